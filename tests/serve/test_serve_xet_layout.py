"""A xorb URL names the layout it was issued under, inside its signature, and serve answers that
layout: replicas of different releases behind one Service (a rolling upgrade) answer each
other's URLs with the bytes the reconstruction meant, never another region of the file (hf_xet
checks no hash of what it receives). A URL without a layout means 1024 chunks of 64 KiB, what
the releases before issued. URLs of another layout are signed here as serve signs them, with the
key of the token file this test gives serve; the bytes each should be are made here from the
file, by Xet's chunk format."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
from huggingface_hub import hf_hub_download
from serving import point_hub_at, serving

from ocibridge.cli import main
from ocibridge.hubserver.signer import Signer
from tests.modelgen import make_bert_model
from tests.support.fixtures import new_repo

KiB, MiB = 1 << 10, 1 << 20
SIZE = 1024 * 64 * KiB + 5 * 64 * KiB + 100  # two xorbs of 1024 chunks; five of 256
TOKEN = "layout-reader"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Served:
    url: str
    data: bytes
    issued: list[str]  # the xorb URLs a reconstruction of the whole file names, by k


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, registry) -> Iterator[Served]:  # type: ignore[no-untyped-def]
    src = make_bert_model(tmp_path_factory.mktemp("xet-layout") / "big", weights=1)
    data = os.urandom(SIZE)
    (src / "model.safetensors").write_bytes(data)
    prefix = f"{registry.host}/{new_repo()}"
    assert main(["push", str(src), f"{prefix}/acme/big:latest", "-q", "--chunks", "--chunk-threshold", "1M"]) == 0
    with serving([prefix], tokens=(TOKEN,), xet_min=MiB) as server:
        head = httpx.head(f"{server.url}/acme/big/resolve/main/model.safetensors", headers=AUTH)
        grant = httpx.get(head.headers["x-xet-refresh-route"], headers=AUTH)
        plan = httpx.get(f"{grant.headers['x-xet-cas-url']}/v2/reconstructions/{head.headers['x-xet-hash']}",
                         headers={"Authorization": f"Bearer {grant.headers['x-xet-access-token']}"}).json()
        issued = [plan["xorbs"][term["hash"]][0]["url"] for term in plan["terms"]]
        yield Served(server.url, data, issued)


def expected_xorb(data: bytes, chunk: int, chunks: int, k: int) -> bytes:
    """The ``k``-th xorb of ``data`` in xorbs of ``chunks`` chunks of ``chunk`` bytes: each chunk
    behind its 8-byte header (version 0, stored length, scheme 0, length; 3-byte little-endian)."""
    out = bytearray()
    for c in range(k * chunks, min((k + 1) * chunks, -(-len(data) // chunk))):
        piece = data[c * chunk:(c + 1) * chunk]
        n = len(piece).to_bytes(3, "little")
        out += b"\x00" + n + b"\x00" + n + piece
    return bytes(out)


def with_query(url: str, **changes: str | None) -> str:
    """``url`` with query parameters set (None: removed)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return parts._replace(query=urlencode(query)).geturl()


def signed_for(served: Served, k: int, layout: str) -> str:
    """The ``k``-th xorb URL as a serve issuing ``layout`` signs it (the key of serve's token
    file; the expiry and client of the URL serve issued)."""
    parts = urlsplit(served.issued[0])
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    path = parts.path.rsplit("/", 1)[0] + f"/{k}"
    return served.url + Signer([TOKEN.encode()]).signed(f"{path}?layout={layout}", int(query["expires"]),
                                                        query["client"])


def test_issued_urls_name_the_default_layout_and_a_url_without_one_means_it(served, tmp_path, monkeypatch):
    assert len(served.issued) == 2
    assert all(dict(parse_qsl(urlsplit(u).query))["layout"] == "1024x65536" for u in served.issued)
    tail = expected_xorb(served.data, 64 * KiB, 1024, 1)
    assert httpx.get(served.issued[1], timeout=60).content == tail
    # as a replica of the release before issued it: the same path and signature, no layout
    bare = with_query(served.issued[1], layout=None)
    answer = httpx.get(bare, timeout=60)
    assert answer.status_code == 200 and answer.content == tail
    first = expected_xorb(served.data, 64 * KiB, 1024, 0)
    ranged = httpx.get(with_query(served.issued[0], layout=None), headers={"Range": "bytes=65530-200000"}, timeout=60)
    assert ranged.status_code == 206 and ranged.content == first[65530:200001]
    # hf_xet over those URLs: the exact file
    point_hub_at(monkeypatch, served.url, tmp_path / "hub", xet=True)
    got = Path(hf_hub_download("acme/big", "model.safetensors", token=TOKEN)).read_bytes()
    assert hashlib.sha256(got).digest() == hashlib.sha256(served.data).digest()


@pytest.mark.parametrize(("chunks", "chunk", "k", "asked"), [
    (256, 64 * KiB, 1, None),  # 16 MiB into the file: the 1024 layout's k=1 is its tail
    (256, 64 * KiB, 4, None),  # the short last one: past the 1024 layout's xorbs
    (512, 32 * KiB, 2, (5, 40_000)),  # another chunk size; a range cutting a header and a chunk
    (3, 128 * KiB, 100, None),  # hf_xet's largest chunk
    (8192, 8 * KiB, 0, (64 * MiB - 10, 64 * MiB + 100)),  # hf_xet's most chunks, its 64 MiB of data
])
def test_a_signed_url_of_another_layout_gets_that_layouts_xorb(served, chunks, chunk, k, asked):
    url = signed_for(served, k, f"{chunks}x{chunk}")
    want = expected_xorb(served.data, chunk, chunks, k)
    if asked is None:
        answer = httpx.get(url, timeout=60)
        assert answer.status_code == 200 and answer.content == want
    else:
        start, end = asked
        answer = httpx.get(url, headers={"Range": f"bytes={start}-{end - 1}"}, timeout=60)
        assert answer.status_code == 206 and answer.content == want[start:end]
        assert answer.headers["content-range"] == f"bytes {start}-{end - 1}/{len(want)}"


def test_a_url_of_another_layout_past_the_files_xorbs_is_a_404(served):
    assert httpx.get(signed_for(served, 5, "256x65536")).status_code == 404
    assert httpx.get(signed_for(served, 4, "256x65536")).status_code == 200


@pytest.mark.parametrize("layout", ["16384x4096", "1024x262144", "2048x65536", "1024x2048", "0x65536", "1024x0",
                                    "1024", "x", "1024x65536x1", "-1x65536", "１０２４x65536"])
def test_a_layout_past_hf_xets_bounds_or_malformed_is_a_400(served, layout):
    answer = httpx.get(signed_for(served, 0, layout))
    assert answer.status_code == 400 and "layout" in answer.json()["error"]


def test_a_layout_altered_after_signing_is_refused(served):
    # the default's signature with another layout: no region of another layout goes out
    assert httpx.get(with_query(served.issued[1], layout="256x65536"), headers={"Range": "bytes=0-9"}).status_code \
        == 403
    other = signed_for(served, 1, "256x65536")
    altered = [with_query(other, layout="1024x65536"),  # another's signature, the default
               with_query(other, layout=None),  # dropped: would mean the default
               with_query(other, layout="512x65536")]
    for url in altered:
        assert httpx.get(url, headers={"Range": "bytes=0-9"}).status_code == 403, url
    assert httpx.get(other, headers={"Range": "bytes=0-9"}).status_code == 206  # as signed
