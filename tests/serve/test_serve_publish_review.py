"""A hostile review of serve's write API (issue 55): what one writer could take from another,
bodies that cost a 500, paths a pull would write where it should not, refs racing commits.
serve runs in-process (tests/serving.py) over the real registry, writing commits as ``ocibridge serve`` does."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serving import Served, serving
from support.fixtures import new_repo

from ocibridge.hubserver.repo.publishing import Publishing

#: alice writes acme/, bob writes beta/, both read everything
TOKENS = ("alice write acme/ alice", "bob write beta/ bob", "reader")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def line(key: str, value: Any) -> bytes:
    return json.dumps({"key": key, "value": value}).encode() + b"\n"


HEADER = line("header", {"summary": "review"})


def inline(path: str, data: bytes = b"hi") -> bytes:
    return line("file", {"path": path, "content": base64.b64encode(data).decode(), "encoding": "base64"})


def commit(s: Served, repo: str, token: str, body: bytes, branch: str = "main") -> httpx.Response:
    return httpx.post(f"{s.url}/api/models/{repo}/commit/{branch}", content=body, headers=auth(token), timeout=60)


def files(s: Served, repo: str, branch: str = "main") -> list[str]:
    answer = httpx.get(f"{s.url}/api/models/{repo}/tree/{branch}?recursive=1", headers=auth("reader"))
    assert answer.status_code == 200, answer.text
    return sorted(entry["path"] for entry in answer.json())


@contextlib.contextmanager
def serving_two_repositories(registry: Any) -> Iterator[Served]:
    """serve over a fresh prefix, acme/m (alice's) and beta/m (bob's) made, each with a README."""
    with serving([f"{registry.host}/{new_repo()}"], tokens=TOKENS, publish=Publishing()) as s:
        for org, token in (("acme", "alice"), ("beta", "bob")):
            made = httpx.post(f"{s.url}/api/repos/create", json={"name": "m", "organization": org},
                              headers=auth(token))
            assert made.status_code == 200, made.text
            assert commit(s, f"{org}/m", token, HEADER + inline("README.md")).status_code == 200
        yield s


@pytest.fixture
def served(registry: Any) -> Iterator[Served]:
    """Its own serve and repositories: for a test that changes them."""
    with serving_two_repositories(registry) as s:
        yield s


@pytest.fixture(scope="module")
def refusing(registry: Any) -> Iterator[Served]:
    """One serve and its repositories for the module's tests of refused writes (each asserts that
    acme/m is as made: a write taken shows in the test that let it through): making them per test
    was 1.3 s of each of 23 tests."""
    with serving_two_repositories(registry) as s:
        yield s


def lfs_upload(s: Served, repo: str, token: str, data: bytes) -> dict[str, Any]:
    """The LFS batch answer for ``data`` in ``repo``; its bytes PUT when asked for."""
    oid = hashlib.sha256(data).hexdigest()
    answer = httpx.post(f"{s.url}/{repo}.git/info/lfs/objects/batch", headers=auth(token),
                        json={"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]})
    assert answer.status_code == 200, answer.text
    item: dict[str, Any] = answer.json()["objects"][0]
    if "actions" in item:
        assert httpx.put(item["actions"]["upload"]["href"], content=data).status_code == 200
    return item


def lfs_line(path: str, data: bytes) -> bytes:
    return line("lfsFile", {"path": path, "algo": "sha256", "oid": hashlib.sha256(data).hexdigest(),
                            "size": len(data)})


def test_a_writer_commits_only_what_its_repository_uploaded_or_can_read(served):
    """bob's upload to beta/m, not yet committed, is bob's: alice (a writer of acme/ only) who
    names its SHA-256 is asked for the bytes, not told serve has them; her commit naming it is
    the Hub's 422 and her verify a 404. Once bob commits it, it is beta/m's, which alice's token does
    not read: she is still asked for the bytes (a file she may read is reused: test_serve_writer_bounds)."""
    secret = b"beta's weights, not yet published " + os.urandom(4096)
    oid = hashlib.sha256(secret).hexdigest()
    assert "actions" in lfs_upload(served, "beta/m", "bob", secret)
    asked = httpx.post(f"{served.url}/acme/m.git/info/lfs/objects/batch", headers=auth("alice"),
                       json={"operation": "upload", "objects": [{"oid": oid, "size": len(secret)}]})
    assert "actions" in asked.json()["objects"][0], "serve told alice it holds bob's upload"
    verify = httpx.post(f"{served.url}/ocibridge/lfs/verify", json={"oid": oid, "size": len(secret)},
                        headers=auth("alice"))
    assert verify.status_code == 404
    taken = commit(served, "acme/m", "alice", HEADER + lfs_line("stolen.bin", secret))
    assert taken.status_code == 422, taken.text
    assert files(served, "acme/m") == [".gitattributes", "README.md"]
    # bob's own verify and commit take it
    assert httpx.post(f"{served.url}/ocibridge/lfs/verify", json={"oid": oid, "size": len(secret)},
                      headers=auth("bob")).status_code == 200
    assert commit(served, "beta/m", "bob", HEADER + lfs_line("w.bin", secret)).status_code == 200
    # now a blob of beta/m; alice's token reads acme/ only (its line's prefix scopes its reads), so she
    # is still asked for the bytes, as for any hash, and her commit naming them alone is refused
    asked = httpx.post(f"{served.url}/acme/m.git/info/lfs/objects/batch", headers=auth("alice"),
                       json={"operation": "upload", "objects": [{"oid": oid, "size": len(secret)}]})
    assert "actions" in asked.json()["objects"][0], "serve offered alice beta/m's file"
    assert commit(served, "acme/m", "alice", HEADER + lfs_line("w.bin", secret)).status_code == 422
    assert files(served, "acme/m") == [".gitattributes", "README.md"]


def test_a_file_bob_sent_over_xet_is_not_alices_to_commit(served):
    """The same over Xet: a shard through beta/m's write grant stages a file for beta/m only."""
    from test_serve_xet_upload import one_chunk_xorb, shard_of

    data = os.urandom(3000)
    xorb, name = one_chunk_xorb(data)
    grant = httpx.get(f"{served.url}/api/models/beta/m/xet-write-token/main", headers=auth("bob")).json()
    cas, token = grant["casUrl"], grant["accessToken"]
    assert httpx.post(f"{cas}/v1/xorbs/default/{name}", content=xorb, headers=auth(token)).status_code == 200
    shard = shard_of(data, name, hashlib.sha256(data).hexdigest())
    assert httpx.post(f"{cas}/v1/shards", content=shard, headers=auth(token)).status_code == 200
    assert commit(served, "acme/m", "alice", HEADER + lfs_line("x.bin", data)).status_code == 422
    assert commit(served, "beta/m", "bob", HEADER + lfs_line("x.bin", data)).status_code == 200


DEEP = b"[" * 200_000 + b"]" * 200_000  # within the 2 MiB a body may be; deeper than json's recursion


@pytest.mark.parametrize(("route", "body", "status"), [
    ("/api/repos/create", DEEP, 400),
    ("/api/models/acme/m/preupload/main", DEEP, 400),
    ("/acme/m.git/info/lfs/objects/batch", DEEP, 400),
    ("/ocibridge/lfs/verify", DEEP, 400),
    ("/api/models/acme/m/branch/dev", DEEP, 400),
    ("/api/models/acme/m/commit/main", HEADER + b'{"key": "file", "value": ' + DEEP + b"}\n", 400),
    # a ref that names no branch is main's, as a batch without one
    ("/acme/m.git/info/lfs/objects/batch", b'{"operation": "upload", "objects": [], "ref": {"name": 5}}', 200),
])
def test_malformed_bodies_are_answered_not_a_500(refusing, route, body, status):
    """JSON nested deeper than the parser recurses (a RecursionError, no ValueError: a 500 and a
    traceback before) is the Hub's 400; a ref name that is no string is main; nothing changed."""
    answer = httpx.post(refusing.url + route, content=body, headers=auth("alice"), timeout=60)
    assert answer.status_code == status, answer.text
    assert status == 200 or "error" in answer.json()
    assert files(refusing, "acme/m") == [".gitattributes", "README.md"]


@pytest.mark.parametrize("path", [".git/hooks/post-checkout", "sub/.git/config", ".cache/huggingface/x.metadata",
                                  "line\nbreak.txt", "tab\there", "bell\x07", "del\x7f"])
def test_paths_a_download_must_not_write_are_refused(refusing, path):
    """What huggingface_hub refuses before it sends (a .git or .cache folder: a download into a
    checkout would write its hooks) and control characters: refused by serve too, as raw HTTP
    sends them; the branch stays where it was."""
    answer = commit(refusing, "acme/m", "alice", HEADER + inline(path))
    assert answer.status_code == 400 and "Invalid path" in answer.json()["error"], answer.text
    assert files(refusing, "acme/m") == [".gitattributes", "README.md"]


@pytest.mark.parametrize(("first", "second"), [("readme.md", None), ("Model.bin", "model.bin"),
                                               ("caf\u00e9.txt", "cafe\u0301.txt"), ("Sub/a", "sub/b"),
                                               ("SUB", "sub/x")])
def test_paths_one_file_on_macos_and_windows_are_refused(refusing, first, second):
    """Two paths that differ only in case or Unicode normalisation (against the branch, or in
    one commit) would be one file where most users download: the commit is refused."""
    body = HEADER + inline(first) + (inline(second) if second else b"")
    answer = commit(refusing, "acme/m", "alice", body)
    assert answer.status_code == 400 and "differ only in case" in answer.json()["error"], answer.text
    assert files(refusing, "acme/m") == [".gitattributes", "README.md"]


def test_two_creates_of_one_branch_at_once_are_one_200_and_one_409(served, monkeypatch):
    """create_branch checked the name was free, then tagged, unlocked: two creates of ``dev`` at
    once (from main and from a tag) both answered 200, the second moving the first's branch. The
    ref is locked as a commit to it is: one lands, the other is the Hub's 409."""
    import threading
    import time

    from ocibridge.hubserver.repo import refedits as publish

    assert httpx.post(f"{served.url}/api/models/acme/m/tag/main", json={"tag": "v1"},
                      headers=auth("alice")).status_code == 200
    assert commit(served, "acme/m", "alice", HEADER + inline("later.txt")).status_code == 200
    slow_tag = publish._tag

    def tag_slowly(source: Any, tag: str) -> None:
        time.sleep(0.5)  # the window between the check and the tag, made wide
        slow_tag(source, tag)

    monkeypatch.setattr(publish, "_tag", tag_slowly)
    statuses: dict[str, int] = {}

    def create(start: str) -> None:
        statuses[start] = httpx.post(f"{served.url}/api/models/acme/m/branch/dev", json={"startingPoint": start},
                                     headers=auth("alice"), timeout=30).status_code

    threads = [threading.Thread(target=create, args=(start,)) for start in ("main", "v1")]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join()
    assert sorted(statuses.values()) == [200, 409], statuses
    winner = next(start for start, status in statuses.items() if status == 200)
    assert files(served, "acme/m", "dev") == files(served, "acme/m", winner)


def many_chunk_xorb(count: int) -> tuple[bytes, str, list[bytes]]:
    """A xorb of ``count`` two-byte chunks (each its own), its hash's text and the chunks."""
    from ocibridge.hubserver.xet import merkle as xethash

    datas = [i.to_bytes(2, "little") for i in range(count)]
    raw = b"".join(b"\x00\x02\x00\x00\x00\x02\x00\x00" + d for d in datas)
    return raw, xethash.hex_of(xethash.xorb_hash([(xethash.chunk_hash(d), 2) for d in datas])), datas


def one_chunk_files_shard(xorb: str, datas: list[bytes], indices: list[int]) -> bytes:
    """A shard naming, per index ``i``, a file of chunk ``i`` of ``xorb`` alone."""
    import struct

    from ocibridge.hubserver.xet import merkle as xethash
    from ocibridge.hubserver.xet import shards as xetformat

    entries = b""
    xorb_raw = xethash.from_hex(xorb)
    assert xorb_raw is not None
    for i in indices:
        data = datas[i]
        sha = xethash.from_hex(hashlib.sha256(data).hexdigest())
        assert sha is not None
        entries += (xethash.file_hash([(xethash.chunk_hash(data), len(data))])
                    + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, 1, 0)
                    + xorb_raw + struct.pack("<IIII", 0, len(data), i, i + 1) + sha + bytes(16))
    return xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0) + entries + xetformat.BOOKEND + bytes(16)


def test_a_shard_costs_work_in_proportion_to_what_it_names_once(served):
    """A xorb holds at most xet-core's 8192 chunks (MAX_XORB_CHUNKS: hf_xet never makes more);
    a shard naming its last chunks as thousands of files no longer re-reads every header before
    each, nor holds a file open per file, and a file named twice is built once."""
    import time

    grant = httpx.get(f"{served.url}/api/models/acme/m/xet-write-token/main", headers=auth("alice")).json()
    cas, token = grant["casUrl"], grant["accessToken"]
    raw, name, _ = many_chunk_xorb(8193)
    refused = httpx.post(f"{cas}/v1/xorbs/default/{name}", content=raw, headers=auth(token), timeout=60)
    assert refused.status_code == 400 and "8192" in refused.text, refused.text
    raw, name, datas = many_chunk_xorb(8192)
    assert httpx.post(f"{cas}/v1/xorbs/default/{name}", content=raw, headers=auth(token), timeout=60).status_code == 200
    last = list(range(8192 - 3000, 8192))
    shard = one_chunk_files_shard(name, datas, last + last)  # every file twice
    began = time.process_time()  # serve's threads and this one: the work, which load does not stretch
    answer = httpx.post(f"{cas}/v1/shards", content=shard, headers=auth(token), timeout=600)
    work = time.process_time() - began
    assert answer.status_code == 200, answer.text
    assert work < 15, f"a {len(shard)}-byte shard cost {work:.1f} s of CPU"
    assert commit(served, "acme/m", "alice", HEADER + lfs_line("last.bin", datas[-1])).status_code == 200


@pytest.mark.parametrize("path", ["a/" * 500_000 + "x", "a/" * 2000 + "x", "n" * 256])
def test_a_path_too_long_to_write_is_refused_at_once(refusing, path):
    """A 1 MB path of 500,000 folders made the file-and-folder check of the tree quadratic
    (minutes of CPU for one request); one of 4001 bytes, or a name of 256, was a 500 (the file
    system's ENAMETOOLONG where serve links the commit). At most 1024 bytes, 255 a name: 400."""
    import time

    began = time.process_time()  # serve's threads and this one
    answer = commit(refusing, "acme/m", "alice", HEADER + inline(path))
    assert answer.status_code == 400 and "longer than" in answer.json()["error"], answer.text[:300]
    assert time.process_time() - began < 10
    assert files(refusing, "acme/m") == [".gitattributes", "README.md"]


def test_a_long_path_within_the_limits_is_committed(served):
    path = "/".join(["d" * 200] * 4) + "/" + "f" * 150
    assert commit(served, "acme/m", "alice", HEADER + inline(path)).status_code == 200
    assert path in files(served, "acme/m")


def test_a_chunk_whose_lz4_frame_holds_more_than_its_header_says_is_never_expanded():
    """256 KiB of LZ4 frame (what a chunk may store) holds 60 MiB of zeros: serve decompressed
    all of it before comparing with the header's length (a xorb of 96 MiB of them: 22 GiB of
    work for one request). It stops one byte past the length now."""
    import tracemalloc

    import lz4.frame

    from ocibridge.hubserver.xet import shards as xetformat

    bomb = lz4.frame.compress(bytes(60 * 1024 * 1024))
    assert len(bomb) <= 2 * xetformat.MAX_CHUNK
    tracemalloc.start()
    try:
        with pytest.raises(xetformat.BadUpload):
            xetformat.decompress(1, bomb, 64 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"{peak} bytes held to refuse a 64 KiB chunk"
    data = os.urandom(5000) + bytes(60000)
    assert xetformat.decompress(1, lz4.frame.compress(data), len(data)) == data


def test_a_commit_id_is_no_branch_to_commit_to_or_create(refusing):
    """A commit to revision=<a commit id> was taken: its manifest went under a registry tag named
    by that id, which no reader of the id ever sees (a commit id resolves to its commit first)
    and which list_repo_refs then showed as a tag. The Hub's 400 now, as for a branch so named."""
    head = httpx.get(f"{refusing.url}/api/models/acme/m", headers=auth("reader")).json()["sha"]
    for revision in (head, head.upper(), "a" * 40):
        answer = commit(refusing, "acme/m", "alice", HEADER + inline("x.txt"), branch=revision)
        assert answer.status_code == 400 and "commit id" in answer.json()["error"], answer.text
    made = httpx.post(f"{refusing.url}/api/models/acme/m/branch/{'b' * 40}", json={}, headers=auth("alice"))
    assert made.status_code == 400, made.text
    refs = httpx.get(f"{refusing.url}/api/models/acme/m/refs", headers=auth("reader")).json()
    assert {tag["name"] for tag in refs["tags"]} <= {"latest"}
    assert files(refusing, "acme/m") == [".gitattributes", "README.md"]


def test_a_modelfile_is_committed_as_a_file(served):
    """An Ollama Modelfile beside a GGUF (as many Hub repositories hold) is a file of the commit,
    not a build file the commit is read by (a directory push reads one at its top: there, it
    refused this one's FROM line)."""
    modelfile = b"FROM ./tiny.gguf\nPARAMETER temperature 0.7\n"
    answer = commit(served, "acme/m", "alice", HEADER + inline("Modelfile", modelfile))
    assert answer.status_code == 200, answer.text
    assert files(served, "acme/m") == [".gitattributes", "Modelfile", "README.md"]
    got = httpx.get(f"{served.url}/acme/m/resolve/main/Modelfile", headers=auth("reader"), follow_redirects=True)
    assert got.content == modelfile
