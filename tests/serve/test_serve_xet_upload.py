"""Uploads to serve over Xet (issue 55): hf_xet, as huggingface_hub drives it, sends xorbs and
shards to the CAS URL serve's write grant names; serve rebuilds each file into Staging only from
xorbs whose every chunk it rehashed, and only when the file's Xet hash and SHA-256 match."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ocibridge.core.environment import cache_root
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.xet import merkle as xethash
from ocibridge.hubserver.xet import shards as xetformat
from tests.serving import serving

hf_xet = pytest.importorskip("hf_xet")
TOKEN = "s3cret"


@pytest.fixture
def served(tmp_path):
    (tmp_path / "lay").mkdir()
    with serving([f"oci:{tmp_path}/lay"], tokens=(f"{TOKEN} write", "reader")) as s:
        yield s


def staged() -> Staging:
    return Staging(cache_root() / "serve" / "staging")


def call(url: str, method: str = "GET", body: bytes | None = None, token: str = TOKEN) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def grant(served, repo: str = "acme/up") -> tuple[str, str]:
    """The CAS URL and write token serve grants for ``repo``."""
    status, body = call(f"{served.url}/api/models/{repo}/xet-write-token/main")
    assert status == 200, body
    answer = json.loads(body)
    return answer["casUrl"], answer["accessToken"]


@pytest.mark.parametrize("policy", ["lz4", "bg4-lz4"])
def test_hf_xet_uploads_land_in_staging_exactly(served, monkeypatch, policy):
    """Chunks come as they are, as LZ4 frames, or byte-grouped then LZ4 (the policy hf_xet is
    told to use: by default it picks per xorb, and byte-grouping only for numbers)."""
    monkeypatch.setenv("HF_XET_XORB_COMPRESSION_POLICY", policy)
    big = os.urandom(300 * 1024)  # several chunks of about 64 KiB
    text = b"".join(b"line %06d of a very compressible file\n" % i for i in range(6000))  # LZ4 shrinks it
    session = hf_xet.XetSession()
    with session.new_upload_commit(token_refresh_url=f"{served.url}/api/models/acme/up/xet-write-token/main",
                                   token_refresh_headers={"Authorization": f"Bearer {TOKEN}"}) as commit:
        handles = [commit.start_upload_bytes(data, sha256=hf_xet.COMPUTE_SHA256) for data in (big, text)]
    for data, handle in zip((big, text), handles, strict=True):
        sha256 = handle.result().xet_info.sha256
        assert sha256 == hashlib.sha256(data).hexdigest()
        path = staged().path_for(sha256)
        assert path is not None and path.read_bytes() == data
    # what hf_xet asked (hf_xet 1.8: a xorb upload grant first, refused, then the xorb itself;
    # shards over v2; its telemetry goes to the server's root, not the CAS URL)
    shapes = {(m, "/".join(p.split("/")[:7 if "/xorb" in p or "/chunks/" in p else 6]))
              for m, p in served.requests if p.startswith("/xet-write/")}
    assert shapes == {("POST", "/xet-write/acme/up/v1/xorb-grants/default"),
                      ("POST", "/xet-write/acme/up/v1/xorbs/default"),
                      ("GET", "/xet-write/acme/up/v1/chunks/default"),
                      ("POST", "/xet-write/acme/up/v2/shards")}, shapes
    assert {"lz4": 1, "bg4-lz4": 2}[policy] in stored_schemes(), "no chunk came compressed so"
    assert len(stored_schemes()) >= 4  # the large file came in several chunks


def test_huggingface_hub_reads_the_write_grant(served):
    """huggingface_hub's own reader of a Xet grant (utils/_xet.py) takes serve's write grant."""
    from huggingface_hub.utils._xet import _fetch_xet_connection_info_with_url

    info = _fetch_xet_connection_info_with_url(f"{served.url}/api/models/acme/up/xet-write-token/main",
                                               {"Authorization": f"Bearer {TOKEN}"})
    assert info.endpoint == f"{served.url}/xet-write/acme/up" and info.access_token
    status, _ = call(f"{served.url}/api/models/acme/up/xet-write-token/main", token="wrong")
    assert status == 401
    status, _ = call(f"{served.url}/api/models/acme/up/xet-write-token/main", token="reader")
    assert status == 403  # a read token is granted no writes
    status, body = call(f"{served.url}/xet-write/acme/up/v1/chunks/default/{'0' * 64}", token=info.access_token)
    assert status == 404  # the grant is good at the CAS URL ...
    status, _ = call(f"{served.url}/xet-write/acme/other/v1/chunks/default/{'0' * 64}", token=info.access_token)
    assert status == 401  # ... of its repository only


def stored_schemes() -> list[int]:
    """The compression scheme of every chunk of every kept xorb."""
    schemes = []
    for path in (staged().root / "xorbs").iterdir():
        raw, at = path.read_bytes(), 0
        while at + 8 <= len(raw) and raw[at:at + 7] != xetformat.FOOTER_IDENT:
            schemes.append(raw[at + 4])
            at += 8 + int.from_bytes(raw[at + 1:at + 4], "little")
    return schemes


def one_chunk_xorb(data: bytes) -> tuple[bytes, str]:
    """A xorb of one stored chunk, and its hash's text."""
    n = len(data).to_bytes(3, "little")
    return b"\x00" + n + b"\x00" + n + data, xethash.hex_of(xethash.xorb_hash([(xethash.chunk_hash(data), len(data))]))


def shard_of(data: bytes, xorb: str, sha256: str, file_hash: bytes | None = None) -> bytes:
    """A shard naming one file: ``data``, one chunk of xorb ``xorb``, with ``sha256`` as its SHA-256."""
    file_hash = file_hash or xethash.file_hash([(xethash.chunk_hash(data), len(data))])
    xorb_raw, sha256_raw = xethash.from_hex(xorb), xethash.from_hex(sha256)  # both stored as Xet hashes
    assert xorb_raw is not None and sha256_raw is not None
    return (xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0)
            + file_hash + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, 1, 0)
            + xorb_raw + struct.pack("<IIII", 0, len(data), 0, 1)
            + sha256_raw + bytes(16)
            + xetformat.BOOKEND + bytes(16))


def kept_nothing() -> bool:
    root = staged().root
    return not any((root / d).is_dir() and any((root / d).iterdir()) for d in ("xorbs", "sha256", "tmp"))


def test_a_xorb_that_is_not_its_hash_is_refused_and_nothing_kept(served):
    cas, token = grant(served)
    xorb, name = one_chunk_xorb(os.urandom(1000))
    tampered = xorb[:-1] + bytes([xorb[-1] ^ 1])
    status, body = call(f"{cas}/v1/xorbs/default/{name}", "POST", tampered, token)
    assert status == 400 and b"hash" in body
    assert kept_nothing()
    status, _ = call(f"{cas}/v1/xorbs/default/{name}", "POST", xorb, "not-a-grant")
    assert status == 401 and kept_nothing()
    status, body = call(f"{cas}/v1/xorbs/default/{name}", "POST", xorb, token)  # the true one is taken
    assert status == 200 and json.loads(body) == {"was_inserted": True}


def test_a_shard_naming_a_missing_xorb_or_a_wrong_sha256_is_refused(served):
    cas, token = grant(served)
    data = os.urandom(5000)
    xorb, name = one_chunk_xorb(data)
    good = shard_of(data, name, hashlib.sha256(data).hexdigest())
    status, body = call(f"{cas}/v1/shards", "POST", good, token)
    assert status == 400 and b"never uploaded" in body
    assert kept_nothing()
    assert call(f"{cas}/v1/xorbs/default/{name}", "POST", xorb, token)[0] == 200
    status, body = call(f"{cas}/v1/shards", "POST", shard_of(data, name, hashlib.sha256(b"other").hexdigest()), token)
    assert status == 400 and b"sha256" in body
    assert not staged().has(hashlib.sha256(data).hexdigest())
    status, body = call(f"{cas}/v1/shards", "POST", shard_of(data, name, hashlib.sha256(data).hexdigest(),
                                                               file_hash=bytes(32)), token)
    assert status == 400 and b"do not hash to the Xet hash" in body
    assert not staged().has(hashlib.sha256(data).hexdigest())
    status, body = call(f"{cas}/v2/shards", "POST", good, token)
    assert status == 200 and json.loads(body) == {"type": "result"}
    path = staged().path_for(hashlib.sha256(data).hexdigest())
    assert path is not None and Path(path).read_bytes() == data


def test_global_dedupe_answers_none(served):
    cas, token = grant(served)
    status, _ = call(f"{cas}/v1/chunks/default-merkledb/{'0' * 64}", token=token)
    assert status == 404


def test_kept_xorbs_stay_within_their_budget(tmp_path):
    """Past the budget the least recently used xorbs go, never the one just kept."""
    from ocibridge.hubserver.access import Signer as Grants
    from ocibridge.hubserver.xet.upload import XetUpload

    up = XetUpload(Staging(tmp_path / "staging"), Grants([]), lambda request: "", budget=2500)
    up.xorbs.mkdir(parents=True)
    for i in range(4):
        (up.xorbs / f"x{i}").write_bytes(bytes(1000))
        os.utime(up.xorbs / f"x{i}", (1000 + i, 1000 + i))
    os.utime(up.xorbs / "x0", (2000, 2000))  # x0: used last, though kept first
    up._within_budget(up.xorbs / "x1")
    assert sorted(p.name for p in up.xorbs.iterdir()) == ["x0", "x1"]


def test_a_shard_naming_more_bytes_than_the_disk_holds_is_refused_before_any_is_written(served):
    """A small shard may name one xorb over and over: what it names is bounded before a byte is
    rebuilt (by the free space where serve stages), and a segment by what its chunks can hold."""
    cas, token = grant(served)
    xorb = xethash.from_hex("1" * 64)
    assert xorb is not None
    count = shutil.disk_usage(cache_root().parent).free // 0xFFFFFFFF + 1
    body = (xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0) + bytes(32) + struct.pack("<IIQ", 0, count, 0)
            + (xorb + struct.pack("<IIII", 0, 0xFFFFFFFF, 0, 32768)) * count + xetformat.BOOKEND + bytes(16))
    status, answer = call(f"{cas}/v1/shards", "POST", body, token)
    assert status == 400 and b"free where serve stages" in answer
    one = (xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0) + bytes(32) + struct.pack("<IIQ", 0, 1, 0)
           + xorb + struct.pack("<IIII", 0, 200_000, 0, 1) + xetformat.BOOKEND + bytes(16))
    status, answer = call(f"{cas}/v1/shards", "POST", one, token)
    assert status == 400 and b"declares 200000 bytes in 1 chunks" in answer
    assert kept_nothing()


def test_a_writer_has_at_most_its_share_of_xorb_bodies_read_at_once(served, monkeypatch):
    """hf_xet opens more uploads as a large file goes on (8 to 19-20): serve reads at most
    RECEIVING_SHARE bodies of one writer at once (the rest wait, unread), so its memory does not
    grow with the client's concurrency; every upload is still taken once its turn comes."""
    import re
    import socket
    import time
    from urllib.parse import urlsplit

    from ocibridge.hubserver.xet import permits
    from ocibridge.hubserver.xet.upload import RECEIVING_SHARE

    monkeypatch.setattr(permits, "STALL", 60.0)  # the paused bodies keep their permits throughout
    cas, token = grant(served, "acme/many")
    where = urlsplit(cas)
    xorbs = [one_chunk_xorb(os.urandom(64 * 1024)) for _ in range(RECEIVING_SHARE + 4)]

    def reading() -> int:
        _, page = call(f"{served.url}/metrics")
        found = re.search(rb"^ocibridge_serve_xet_xorbs_reading (\S+)$", page, re.M)
        assert found is not None, page[:500]
        return int(float(found.group(1)))

    def settled(want: int) -> int:
        deadline = time.monotonic() + 20
        while (now := reading()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        return now

    sockets = []
    for body, name in xorbs:  # each upload's headers and its body's first bytes, then a pause
        s = socket.create_connection((where.hostname, where.port), timeout=60)
        s.sendall(f"POST {where.path}/v1/xorbs/default/{name} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                  f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:100])
        sockets.append(s)
    assert settled(RECEIVING_SHARE) == RECEIVING_SHARE
    time.sleep(0.5)
    assert reading() == RECEIVING_SHARE  # not one more, with all of them open
    for s, (body, _) in zip(sockets, xorbs, strict=True):
        s.sendall(body[100:])
    for s in sockets:
        answer = b""
        while b"was_inserted" not in answer:
            piece = s.recv(65536)
            assert piece, answer
            answer += piece
        assert answer.startswith(b"HTTP/1.1 200") and b'"was_inserted":true' in answer.replace(b" ", b""), answer
        s.close()
    assert settled(0) == 0
