"""A Xet file built while its xorbs arrive (issue 64, hubserver/xet/ahead.py), tried with raw
xorbs and shards against serve as a process over the real registry: the shard decides. The file
it names is what is staged and committed, whether it is the one built ahead (then its registry
blob is there before the commit) or other bytes (then what was built is dropped and its registry
upload cut, never a blob); a tampered xorb is still refused, and what was streamed with it too."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import httpx
from huggingface_hub import HfApi
from support import status
from support.publishing import MIB, blob_in, serve_process

from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet import shards as xetformat

CHUNK = 64 * 1024
AUTH = {"authorization": "Bearer writer-token"}


def xorb_of(data: bytes) -> tuple[bytes, str, list[tuple[bytes, int]]]:
    """``data`` as a xorb of stored 64 KiB chunks: its bytes, its hash's text, its chunks."""
    pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
    chunks = [(merkle.chunk_hash(p), len(p)) for p in pieces]
    raw = b"".join(b"\x00" + len(p).to_bytes(3, "little") + b"\x00" + len(p).to_bytes(3, "little") + p
                   for p in pieces)
    return raw, merkle.hex_of(merkle.xorb_hash(chunks)), chunks


def shard(segments: list[tuple[str, list[tuple[bytes, int]]]], data: bytes) -> bytes:
    """A shard naming one file, ``data``: the whole of each xorb of ``segments``, in order."""
    sha, hashes = merkle.from_hex(hashlib.sha256(data).hexdigest()), [c for _, cs in segments for c in cs]
    assert sha is not None
    body = xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0) + merkle.file_hash(hashes)
    body += struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, len(segments), 0)
    for name, chunks in segments:
        raw = merkle.from_hex(name)
        assert raw is not None
        body += raw + struct.pack("<IIII", 0, sum(n for _, n in chunks), 0, len(chunks))
    return body + sha + bytes(16) + xetformat.BOOKEND + bytes(16)


def commit(url: str, repo: str, data: bytes) -> httpx.Response:
    lines = ({"key": "header", "value": {"summary": "w"}},
             {"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256",
                                          "oid": hashlib.sha256(data).hexdigest(), "size": len(data)}})
    return httpx.post(f"{url}/api/models/{repo}/commit/main", headers={**AUTH, "content-type": "application/x-ndjson"},
                      content=b"".join(json.dumps(line).encode() + b"\n" for line in lines), timeout=120)


def cas_of(url: str, repo: str) -> Callable[[str, bytes], httpx.Response]:
    """A new repository ``repo`` and a POST to its Xet write endpoint (``/v1/xorbs/...``,
    ``/v2/shards``) with the write grant serve gives for it."""
    HfApi(endpoint=url, token="writer-token").create_repo(repo)
    grant = httpx.get(f"{url}/api/models/{repo}/xet-write-token/main", headers=AUTH).json()
    cas, token = grant["casUrl"], {"authorization": f"Bearer {grant['accessToken']}"}

    def post(path: str, body: bytes) -> httpx.Response:
        return httpx.post(f"{cas}{path}", content=body, headers=token, timeout=120)

    return post


def test_the_shard_decides_what_is_committed_whatever_was_built_ahead(tmp_path: Path, registry, unique_repo):
    prefix = f"{registry.host}/{unique_repo}"
    first, second = os.urandom(9 * MIB), os.urandom(MIB)  # past the relay's 8 MiB: its upload begins
    (x1, n1, c1), (x2, n2, c2) = xorb_of(first), xorb_of(second)
    streamed = first + second
    with serve_process(tmp_path, prefix) as url:
        post = cas_of(url, "acme/ahead")

        # the xorbs of first+second in order, then a shard naming other bytes: second alone
        assert post(f"/v1/xorbs/default/{n1}", x1).status_code == 200
        assert post(f"/v1/xorbs/default/{n2}", x2).status_code == 200
        assert post("/v2/shards", shard([(n2, c2)], second)).status_code == 200
        assert commit(url, "acme/ahead", second).status_code == 200
        got = httpx.get(f"{url}/acme/ahead/resolve/main/w.bin", headers=AUTH, timeout=120)
        assert got.status_code == 200 and got.content == second  # exactly the shard's file
        ref = f"{prefix}/acme/ahead:latest"
        assert not blob_in(ref, hashlib.sha256(streamed).hexdigest(), len(streamed))  # the upload ahead was cut

        # the same xorbs again, and the shard naming them: taken as built, in the registry before the commit
        assert post(f"/v1/xorbs/default/{n1}", x1).json() == {"was_inserted": False}
        assert post(f"/v1/xorbs/default/{n2}", x2).json() == {"was_inserted": False}
        assert post("/v2/shards", shard([(n1, c1), (n2, c2)], streamed)).status_code == 200
        assert blob_in(ref, hashlib.sha256(streamed).hexdigest(), len(streamed))
        staging, sha = tmp_path / "ocibridge-cache" / "serve" / "staging", hashlib.sha256(streamed).hexdigest()
        assert (staging / "held" / sha).read_text() == str(len(streamed))  # sent as built: no file of it here
        assert not (staging / "sha256" / sha).exists()

        # the registry collects the blob before the commit names it (distribution's garbage-collect,
        # zot's untagged-blob cleanup): the commit asks for the bytes again, and the client's
        # second upload of them lands
        blob = f"{registry.url}/v2/{unique_repo}/acme/ahead/blobs/sha256:{sha}"
        assert httpx.delete(blob).status_code == 202
        refused = commit(url, "acme/ahead", streamed)
        # said as what happened (uploaded, then removed by the registry), not as never uploaded
        assert refused.status_code == 422 and f"w.bin: sha256:{sha} was uploaded" in refused.text
        assert "removed it before a commit named it" in refused.text and "upload it again" in refused.text
        assert not (staging / "held" / sha).exists()  # dropped: asked for again, not refused for good
        assert post(f"/v1/xorbs/default/{n1}", x1).json() == {"was_inserted": False}
        assert post(f"/v1/xorbs/default/{n2}", x2).json() == {"was_inserted": False}
        assert post("/v2/shards", shard([(n1, c1), (n2, c2)], streamed)).status_code == 200
        assert blob_in(ref, sha, len(streamed)) and (staging / "held" / sha).exists()
        assert commit(url, "acme/ahead", streamed).status_code == 200
        assert not (staging / "held" / sha).exists()  # committed: the record goes as a staged file does
        got = httpx.get(f"{url}/acme/ahead/resolve/main/w.bin", headers=AUTH, timeout=120)
        assert got.status_code == 200 and got.content == streamed

        # a tampered xorb in the stream: refused, and the shard naming it too; nothing staged
        third = os.urandom(9 * MIB)
        (x3, n3, c3) = xorb_of(third)
        assert post(f"/v1/xorbs/default/{n3}", x3[:-1] + bytes([x3[-1] ^ 1])).status_code == 400
        refused = post("/v2/shards", shard([(n3, c3)], third))
        assert refused.status_code == 400 and "never uploaded" in refused.text
        assert commit(url, "acme/ahead", third).status_code >= 400
        assert not blob_in(ref, hashlib.sha256(third).hexdigest(), len(third))
    log = (tmp_path / "serve.log").read_text()
    assert log.count("was built as its xorbs came") == 2, log  # only the shards that named the stream


def shard_of_files(files: list[tuple[bytes, bytes, list[tuple[str, int, int, int]]]]) -> bytes:
    """A shard naming several files: each its Xet hash, its SHA-256 and its segments (a xorb's
    hash, the bytes and the chunks ``[first, end)`` of it), as the shard says, true or not."""
    body = xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0)
    for file_hash, sha, segments in files:
        body += file_hash + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, len(segments), 0)
        for name, size, first, end in segments:
            raw = merkle.from_hex(name)
            assert raw is not None
            body += raw + struct.pack("<IIII", 0, size, first, end)
        body += sha + bytes(16)
    return body + xetformat.BOOKEND + bytes(16)


def test_a_file_sent_as_built_is_left_out_of_the_budget_and_nothing_else_is(tmp_path: Path, registry, unique_repo):
    """The staging budget leaves out only the file the registry took as its xorbs came. A shard
    that names that file twice, the second time as one byte, must not make the rest of its files
    free: the file is left out once, by name (it was subtracted from the total, so the total
    went below zero and a 6 MiB file passed a 4 MiB budget). That refusal comes before the build
    ahead is taken, so the shard sent again without the rest still takes it as built."""
    prefix = f"{registry.host}/{unique_repo}"
    big, tail, other = os.urandom(9 * MIB), os.urandom(MIB), os.urandom(6 * MIB)
    (x1, n1, c1) = xorb_of(big)
    (x2, n2, c2) = xorb_of(tail + other)  # as hf_xet packs them: a large file's tail, then small files
    k = len(tail) // CHUNK
    streamed = big + tail
    sha_streamed, sha_other = hashlib.sha256(streamed).hexdigest(), hashlib.sha256(other).hexdigest()
    as_xet = {sha: merkle.from_hex(sha) or b"" for sha in (sha_streamed, sha_other)}  # the shard's byte order
    streamed_entry = (merkle.file_hash(c1 + c2[:k]), as_xet[sha_streamed],
                      [(n1, len(big), 0, len(c1)), (n2, len(tail), 0, k)])
    other_entry = (merkle.file_hash(c2[k:]), as_xet[sha_other], [(n2, len(other), k, len(c2))])
    as_one_byte = (streamed_entry[0], as_xet[sha_streamed], [(n2, 1, 0, 1)])
    with serve_process(tmp_path, prefix, "--staging-budget", "4M") as url:
        post = cas_of(url, "acme/budget")

        assert post(f"/v1/xorbs/default/{n1}", x1).status_code == 200
        assert post(f"/v1/xorbs/default/{n2}", x2).status_code == 200
        refused = post("/v2/shards", shard_of_files([streamed_entry, other_entry, as_one_byte]))
        assert refused.status_code == 507 and "--staging-budget" in refused.text  # 6 MiB to stage, 4 allowed
        staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
        assert not (staging / "sha256" / sha_other).exists()

        assert post("/v2/shards", shard_of_files([streamed_entry])).status_code == 200
        assert blob_in(f"{prefix}/acme/budget:latest", sha_streamed, len(streamed))
        assert (staging / "held" / sha_streamed).read_text() == str(len(streamed))
    assert "was built as its xorbs came" in (tmp_path / "serve.log").read_text()


def test_an_upload_the_registry_collected_is_mounted_from_a_repository_that_holds_it(tmp_path: Path, registry,
                                                                                    unique_repo):
    """A commit whose held upload the registry collected still lands when another repository
    the writer reads holds the same bytes: they are mounted from there, as for any upload
    another repository holds. Only when nothing holds them does the commit say the registry
    removed the upload."""
    prefix = f"{registry.host}/{unique_repo}"
    first, second = os.urandom(9 * MIB), os.urandom(MIB)
    (x1, n1, c1), (x2, n2, c2) = xorb_of(first), xorb_of(second)
    streamed = first + second
    sha = hashlib.sha256(streamed).hexdigest()
    with serve_process(tmp_path, prefix) as url:
        for repo in ("acme/kept", "acme/again"):
            post = cas_of(url, repo)
            for name, body in ((n1, x1), (n2, x2)):
                assert post(f"/v1/xorbs/default/{name}", body).status_code == 200
            assert post("/v2/shards", shard([(n1, c1), (n2, c2)], streamed)).status_code == 200
            if repo == "acme/kept":
                assert commit(url, repo, streamed).status_code == 200
        # acme/again's upload is collected from its repository; acme/kept still holds the bytes
        assert httpx.delete(f"{registry.url}/v2/{unique_repo}/acme/again/blobs/sha256:{sha}").status_code == 202
        assert not blob_in(f"{prefix}/acme/again:latest", sha, len(streamed))
        landed = commit(url, "acme/again", streamed)
        assert landed.status_code == 200, landed.text
        got = httpx.get(f"{url}/acme/again/resolve/main/w.bin", headers=AUTH, timeout=120)
        assert got.status_code == 200 and got.content == streamed


def test_a_registry_that_does_not_answer_for_a_held_upload_fails_the_commit_as_the_registry(tmp_path: Path,
                                                                                          unique_repo, fault_proxy):
    """Whether the registry still holds an upload is asked at the commit. A registry that does
    not answer that question (here: refuses it) is the registry's error, 502, and the record is
    kept for the commit sent again: not "never uploaded", not "removed"."""
    first, second = os.urandom(9 * MIB), os.urandom(MIB)
    (x1, n1, c1), (x2, n2, c2) = xorb_of(first), xorb_of(second)
    streamed = first + second
    sha = hashlib.sha256(streamed).hexdigest()
    with serve_process(tmp_path, f"{fault_proxy.host}/{unique_repo}") as url:
        post = cas_of(url, "acme/asked")
        for name, body in ((n1, x1), (n2, x2)):
            assert post(f"/v1/xorbs/default/{name}", body).status_code == 200
        assert post("/v2/shards", shard([(n1, c1), (n2, c2)], streamed)).status_code == 200
        staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
        assert (staging / "held" / sha).exists()
        fault_proxy.add("HEAD", rf"/blobs/sha256:{sha}", status(403), times=None)
        failed = commit(url, "acme/asked", streamed)
        assert failed.status_code == 502, failed.text
        assert "was received" not in failed.text and "removed" not in failed.text
        assert (staging / "held" / sha).exists()
        fault_proxy.clear()
        assert commit(url, "acme/asked", streamed).status_code == 200
