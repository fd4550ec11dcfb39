"""serve's cold read checked by the chunk table the manifest binds (reading/blobs.py): each byte
hashed once, with the table's hash, and the blob kept under the table's content key, never under
the layer digest (a table from another manifest may name any layer digest). A reader whose
manifest binds the same table gets the kept copy; a reader of another table, or of none, never
does: it fetches and checks the blob itself."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import httpx
import pytest
from serving import serving
from support.faultproxy import status, throttle
from support.fixtures import new_repo

from ocibridge.cache.modelcache import ModelCache
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ANNOTATION_SIZE, build_table, chunk_stream, parse_table
from ocibridge.cli import main
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_bert_model

SIZE = 3 * 1024 * 1024 + 1000  # 4 chunks of the table (1 MiB), the last short
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory):
    """One file pushed as acme/big and acme/copy (the same table), acme/plain (no table) and
    acme/forged: a manifest naming the same layer with a table of other bytes (``other``).
    (prefix, the file's bytes, its digest, other)"""
    src = make_bert_model(tmp_path_factory.mktemp("table-key") / "big", weights=1)
    data = os.urandom(SIZE)
    (src / WEIGHTS).write_bytes(data)
    prefix = f"{registry.host}/{new_repo()}"
    chunked = ["-q", "--chunks", "--chunk-threshold", "1M"]
    for name in ("big", "copy", "forged"):
        assert main(["push", str(src), f"{prefix}/acme/{name}:latest", *chunked]) == 0
    assert main(["push", str(src), f"{prefix}/acme/plain:latest", "-q", "--no-chunks"]) == 0
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    other = os.urandom(SIZE)
    _bind_a_table_of(registry.host, prefix.split("/", 1)[1] + "/acme/forged", digest, other)
    return prefix, data, digest, other


def _bind_a_table_of(host: str, repository: str, digest: str, other: bytes) -> None:
    """Rewrite the repository's manifest to bind a table whose entry for ``digest`` holds the
    chunk digests of ``other`` (a table anyone may write, naming someone else's layer)."""
    with open_repository(host=host, repository=repository) as store:
        desc = store.resolve("latest")
        doc = json.loads(store.fetch_bytes(desc))
        real = parse_table(store.fetch_bytes(Descriptor(mediaType="application/octet-stream",
                                                        digest=doc["annotations"][ANNOTATION_DIGEST],
                                                        size=int(doc["annotations"][ANNOTATION_SIZE]))))
        entry = chunk_stream(_Reader(other), real.chunk_size, real.algorithm)
        forged = build_table([type(entry)(digest, entry.size, entry.chunks, entry.algorithm)], real.chunk_size)
        table = forged.to_bytes()
        tdesc = forged.descriptor()
        store.push_blob(tdesc, _Reader(table))
        doc["annotations"][ANNOTATION_DIGEST], doc["annotations"][ANNOTATION_SIZE] = tdesc.digest, str(tdesc.size)
        data = json.dumps(doc).encode()
        store.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, tag="latest")


class _Reader:
    def __init__(self, data: bytes):
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        n = len(self._data) - self._at if n < 0 else n
        piece = self._data[self._at:self._at + n]
        self._at += len(piece)
        return piece


def _get(url: str, name: str) -> bytes | None:
    """The file's bytes, or None when serve refused them (an error or a body cut short)."""
    try:
        r = httpx.get(f"{url}/acme/{name}/resolve/main/{WEIGHTS}", timeout=60)
    except httpx.HTTPError:
        return None
    return r.content if r.status_code == 200 and len(r.content) == SIZE else None


def _kept(served) -> list[bytes]:
    """The whole layers kept under table keys."""
    layers = served.blobs.layer_files.layers
    return [p.read_bytes() for p in layers.iterdir() if not p.name.startswith(".")] if layers.is_dir() else []


def test_another_repository_with_the_same_table_gets_the_kept_copy_without_a_fetch(pushed, fault_proxy):
    prefix, data, digest, _ = pushed
    with serving([prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)]) as served:
        assert _get(served.url, "big") == data
        assert _kept(served) == [data]  # checked by the table: kept under its key,
        assert not ModelCache().blobs.blob_path(digest).exists()  # not under the layer digest
        fetched = served.blobs.fetched
        assert _get(served.url, "copy") == data
        assert served.blobs.fetched == fetched
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{digest}")) == 1  # the registry sent it once


def test_readers_of_one_table_in_two_repositories_at_once_share_one_fetch(pushed, fault_proxy):
    """The registry paced (2 MiB/s): the second reader joins the fetch the first started (the
    same table: the same key), and the registry sends the blob once."""
    from concurrent.futures import ThreadPoolExecutor

    prefix, data, digest, _ = pushed
    fault_proxy.add("GET", f"/blobs/{digest}", throttle(2 << 20), times=None)
    with serving([prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)]) as served, \
            ThreadPoolExecutor(2) as pool:
        first = pool.submit(_get, served.url, "big")
        deadline = time.monotonic() + 30
        while not fault_proxy.requests_matching("GET", f"/blobs/{digest}") and time.monotonic() < deadline:
            time.sleep(0.02)  # the first reader's fetch has begun
        second = pool.submit(_get, served.url, "copy")
        assert first.result() == data and second.result() == data
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{digest}")) == 1
    assert served.blobs.fetched == 1 and served.blobs.hits == 0  # the second followed the fetch


def test_a_manifest_binding_another_table_for_the_layer_does_not_get_the_kept_copy(pushed, fault_proxy):
    """acme/forged names the same layer digest with another table: the copy acme/big's table
    checked is not its; it fetches the layer and checks it by its own table, which the real
    bytes fail (refused); a manifest with no table fetches and checks it by the digest."""
    prefix, data, digest, _ = pushed
    with serving([prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)]) as served:
        assert _get(served.url, "big") == data
        fetched = served.blobs.fetched
        assert _get(served.url, "forged") is None
        assert served.blobs.fetched == fetched
        assert _get(served.url, "plain") == data
        assert served.blobs.fetched == fetched + 1 and ModelCache().blobs.blob_path(digest).is_file()
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{digest}")) >= 3


def test_bytes_a_forged_table_checked_reach_no_reader_of_another_table_or_of_the_digest(pushed, fault_proxy):
    """The registry of acme/forged sends other bytes under the layer digest, bytes its table
    vouches for: its reader gets them (its manifest's word), kept under its table's key only;
    readers of the real table and of none fetch the real bytes."""
    prefix, data, digest, other = pushed
    repository = prefix.split("/", 1)[1]
    fault_proxy.add("GET", f"/{repository}/acme/forged/blobs/{digest}",
                    status(200, body=other, headers={"Content-Type": "application/octet-stream"}), times=None)
    with serving([prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)]) as served:
        assert _get(served.url, "forged") == other
        assert _kept(served) == [other] and not ModelCache().blobs.blob_path(digest).exists()
        assert _get(served.url, "big") == data
        assert _get(served.url, "plain") == data
        assert hashlib.sha256(ModelCache().blobs.blob_path(digest).read_bytes()).hexdigest() == digest[7:]


def _path(ref: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["path", ref])
    return code, capsys.readouterr().out.strip()


def test_path_after_serve_links_the_kept_copy_with_no_fetch(pushed, fault_proxy, capsys):
    """``ocibridge path`` of a manifest binding the table serve checked the layer by answers the
    kept copy (a hard link: once on disk), hashed against the layer digest, with no fetch of it."""
    prefix, data, digest, _ = pushed
    proxied = prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)
    with serving([proxied]) as served:
        assert _get(served.url, "big") == data
        (kept,) = [p for p in served.blobs.layer_files.layers.iterdir() if not p.name.startswith(".")]
    gets = len(fault_proxy.requests_matching("GET", f"/blobs/{digest}"))
    code, out = _path(f"{proxied}/acme/big:latest", capsys)
    assert code == 0
    answered = Path(out) / WEIGHTS
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{digest}")) == gets == 1
    assert answered.read_bytes() == data and answered.stat().st_ino == kept.stat().st_ino
    assert not ModelCache().blobs.blob_path(digest).exists()


def test_path_of_a_forged_table_never_answers_the_bytes_it_checked(pushed, fault_proxy, capsys):
    """acme/forged's registry sends other bytes under the layer digest, bytes its table vouches
    for, and serve kept them under that table's key: ``path`` of acme/forged hashes that file
    against the layer digest, which it fails, and the fetch it makes instead fails too (refused,
    no snapshot); ``path`` of acme/big (another key) gets the real bytes."""
    prefix, data, digest, other = pushed
    repository = prefix.split("/", 1)[1]
    proxied = prefix.replace(prefix.split("/", 1)[0], fault_proxy.host)
    fault_proxy.add("GET", f"/{repository}/acme/forged/blobs/{digest}",
                    status(200, body=other, headers={"Content-Type": "application/octet-stream"}), times=None)
    with serving([proxied]) as served:
        assert _get(served.url, "forged") == other
    code, out = _path(f"{proxied}/acme/forged:latest", capsys)
    assert code != 0 and out == ""
    code, out = _path(f"{proxied}/acme/big:latest", capsys)
    assert code == 0 and (Path(out) / WEIGHTS).read_bytes() == data
