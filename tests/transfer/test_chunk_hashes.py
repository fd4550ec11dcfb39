"""Chunk tables that name their hash (issue 79): new tables are BLAKE3, every table written
before (SHA-256) is still read and verified by lazy reads, the mount and delta pulls, a hash
nobody knows is one clear error, and a push stays reproducible.

The old tables are made here by :func:`v1_table`, which writes the JSON exactly as ocibridge did
before tables named BLAKE3 (git 208ab25, ``ChunkTable.to_bytes``: SHA-256 chunk digests), and
bound to a model pushed without a table, as a push bound them then."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
from pathlib import Path

import blake3
import pytest
from mounting import Mount, mount_env
from support.faultproxy import corrupt
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_model
from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import (
    ANNOTATION_DIGEST,
    ANNOTATION_SIZE,
    TABLE_MEDIA_TYPE,
    ChunkTableError,
    LayerChunks,
    chunk_stream,
    parse_table,
)
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.cli import main
from ocibridge.core import notices
from ocibridge.errors import DigestMismatch
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.writer import Blob, write_artifact

MiB = 1024 * 1024
SIZE = 20 * MiB + 4321  # 21 chunks, the last one short
CHANGED = 5  # the chunk v2 changes


def v1_table(layers: list[tuple[str, bytes]], chunk_size: int = MiB) -> bytes:
    """A table as ocibridge wrote every table before BLAKE3: SHA-256 of each chunk, canonical JSON."""
    entries = [{"chunks": [hashlib.sha256(data[i:i + chunk_size]).hexdigest() for i in range(0, len(data), chunk_size)],
                "digest": digest, "size": len(data)} for digest, data in sorted(layers)]
    doc = {"schemaVersion": 1, "mediaType": "application/vnd.ocibridge.chunks.table.v1+json", "algorithm": "sha256",
           "chunkSize": chunk_size, "layers": entries}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _push_bound(registry, src: Path, repo: str, tag: str, table: bytes | None) -> str:
    """Push ``src`` without a table, then tag ``tag`` its manifest binding ``table`` (its blob
    pushed first), as a push bound a table; returns the manifest digest."""
    ocibridge.push(str(src), f"{registry.host}/{repo}:{tag}-plain", options=ocibridge.PushOptions(chunks=False))
    with open_repository(host=registry.host, repository=repo) as store:
        plain = store.resolve(f"{tag}-plain")
        doc = json.loads(store.fetch_bytes(plain))
        if table is None:
            return plain.digest
        doc.setdefault("annotations", {}).update({ANNOTATION_DIGEST: _sha(table), ANNOTATION_SIZE: str(len(table))})
        body = json.dumps(doc).encode()
        bound = Descriptor.for_bytes(OCI_MANIFEST, body)
        write_artifact(store, bound, body, [Blob.of_bytes(Descriptor.for_bytes(TABLE_MEDIA_TYPE, table), table)],
                       tags=[tag])
        return bound.digest


def _bound_table(store, tag: str) -> bytes:
    """The bytes of the table the manifest tagged ``tag`` binds."""
    annotations = json.loads(store.fetch_bytes(store.resolve(tag)))["annotations"]
    return store.fetch_bytes(Descriptor(mediaType=TABLE_MEDIA_TYPE, digest=annotations[ANNOTATION_DIGEST],
                                        size=int(annotations[ANNOTATION_SIZE])))


def _model(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True)
    (directory / "weights.bin").write_bytes(data)
    (directory / "config.json").write_text('{"model_type": "toy"}')
    return directory


@pytest.fixture(scope="module")
def old_tables(registry, tmp_path_factory):
    """v1 and v2 (chunk 5 changed) of a 20 MiB model, each bound to a table in the old SHA-256
    format: (repo, v1 bytes, v2 bytes, v1 dir, v2 dir)."""
    base = tmp_path_factory.mktemp("old-tables")
    one = os.urandom(SIZE)
    two = bytearray(one)
    two[CHANGED * MiB + 100:CHANGED * MiB + 200] = os.urandom(100)
    repo = new_repo()
    dirs = []
    for tag, data in (("v1", one), ("v2", bytes(two))):
        src = _model(base / tag, data)
        _push_bound(registry, src, repo, tag, v1_table([(_sha(data), data)]))
        dirs.append(src)
    return repo, one, bytes(two), dirs[0], dirs[1]


def _moved(proxy, digest: str) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{digest}"))


# -- (a) a table written before BLAKE3 still verifies everywhere -----------------------------------
def test_the_old_format_reads_back_byte_for_byte():
    """A SHA-256 table parses as one and is written back with the same bytes (so a conversion
    or a mirror that carries it keeps its digest, and the manifest's)."""
    data = os.urandom(3 * MiB + 5)
    old = v1_table([(_sha(data), data)])
    table = parse_table(old)
    assert table.algorithm == "sha256" and table.to_bytes() == old
    (entry,) = table.layers.values()
    assert entry.algorithm == "sha256" and entry.chunks == chunk_stream(io.BytesIO(data), MiB, "sha256").chunks


def test_an_old_table_verifies_a_lazy_read(old_tables, fault_proxy):
    repo, one, _, _, _ = old_tables
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        assert model.chain.table is not None and model.chain.table.algorithm == "sha256"
        layer = model.file("weights.bin").layer.digest
        assert model.read("weights.bin", 7 * MiB + 3, 7 * MiB + 1000) == one[7 * MiB + 3:7 * MiB + 1000]
    assert _moved(fault_proxy, layer) == MiB  # one chunk: read by the table, not the whole blob
    fault_proxy.add("GET", f"/blobs/{layer}", corrupt(offset=10))
    with open_model(ref, warn=None, cache=False) as model, \
            pytest.raises(DigestMismatch, match="chunk 9 of .* does not match its digest in the chunk table"):
        model.read("weights.bin", 9 * MiB, 9 * MiB + 16)  # the SHA-256 of the chunk caught it


def test_an_old_table_verifies_a_mount_read(old_tables, fault_proxy, tmp_path):
    repo, one, _, _, _ = old_tables
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        layer = model.file("weights.bin").layer.digest
    with Mount(ref, tmp_path / "mnt", mount_env(tmp_path / "a"), tmp_path / "mount.log") as m, \
            open(m.where / "weights.bin", "rb") as f:
        f.seek(12 * MiB + 7)
        assert f.read(5000) == one[12 * MiB + 7:12 * MiB + 5007]
    # by chunks, not the file: the kernel may read ahead up to 1 MiB past the read, which a mount
    # run as root sets as its device's read-ahead (lazymount/readahead.py): two more chunks at most
    assert 0 < _moved(fault_proxy, layer) <= 3 * MiB
    fault_proxy.add("GET", f"/blobs/{layer}", corrupt(offset=100), times=None)
    with Mount(ref, tmp_path / "mnt2", mount_env(tmp_path / "b"), tmp_path / "mount2.log") as m, \
            pytest.raises(OSError) as caught, open(m.where / "weights.bin", "rb") as f:
        f.seek(3 * MiB)
        f.read(10)
    assert caught.value.errno == errno.EIO


def test_an_old_table_gives_a_delta_pull(old_tables, fault_proxy):
    repo, _, two, _, _ = old_tables
    heard: list[str] = []
    with notices.heard_by(heard.append):
        ocibridge.path(f"{fault_proxy.host}/{repo}:v1")
        snap = ocibridge.path(f"{fault_proxy.host}/{repo}:v2")
    assert (Path(snap) / "weights.bin").read_bytes() == two
    assert _moved(fault_proxy, _sha(two)) == MiB  # the changed chunk alone
    assert [h for h in heard if h.startswith("reused ")] == [
        f"reused 20 of 21 chunks ({(SIZE - MiB) / MiB:.1f} MiB) of {_sha(two)}; fetched 1.0 MiB"]


def test_a_pull_over_an_old_version_reuses_its_file_under_a_new_blake3_table(old_tables, registry, fault_proxy,
                                                                           tmp_path):
    """v1 bound to an old SHA-256 table, v3 pushed now (a BLAKE3 table): a pull of v3 over v1's
    directory hashes the old file with BLAKE3 and moves only the changed chunk."""
    repo, one, two, _, v2 = old_tables
    ocibridge.push(str(v2), f"{registry.host}/{repo}:v3", options=ocibridge.PushOptions(chunk_threshold=16 * MiB))
    out = tmp_path / "out"
    ocibridge.pull(f"{fault_proxy.host}/{repo}:v1", str(out))
    heard: list[str] = []
    with notices.heard_by(heard.append):
        ocibridge.pull(f"{fault_proxy.host}/{repo}:v3", str(out),
                       options=ocibridge.PullOptions(on_existing="overwrite"))
    assert (out / "weights.bin").read_bytes() == two
    assert [h for h in heard if h.startswith("reused ")] == [
        f"reused 20 of 21 chunks ({(SIZE - MiB) / MiB:.1f} MiB) of {_sha(two)}; fetched 1.0 MiB"]


# -- (b) new tables name BLAKE3, and a wrong chunk is caught with it -------------------------------
@pytest.fixture(scope="module")
def new_table(registry, tmp_path_factory):
    data = os.urandom(SIZE)
    src = _model(tmp_path_factory.mktemp("new-table") / "m", data)
    repo = new_repo()
    ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=ocibridge.PushOptions(chunk_threshold=16 * MiB))
    return repo, data, src


def test_a_push_names_blake3_and_its_digests_are_blake3(new_table, registry):
    repo, data, _ = new_table
    with open_repository(host=registry.host, repository=repo) as store:
        doc = json.loads(_bound_table(store, "v1"))
    assert doc["algorithm"] == "blake3" and doc["mediaType"] == TABLE_MEDIA_TYPE and doc["schemaVersion"] == 1
    (entry,) = doc["layers"]
    assert entry["chunks"] == [blake3.blake3(data[i:i + MiB]).hexdigest() for i in range(0, SIZE, MiB)]
    assert entry["chunks"][0] != hashlib.sha256(data[:MiB]).hexdigest()
    with open_model(f"{registry.host}/{repo}:v1", warn=None) as model:
        assert model.chain.table is not None and model.chain.table.algorithm == "blake3"


def test_a_wrong_chunk_under_a_blake3_table_fails_the_read(new_table, fault_proxy):
    repo, data, _ = new_table
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None, cache=False) as model:
        layer = model.file("weights.bin").layer.digest
        assert model.read("weights.bin", 4 * MiB, 4 * MiB + 8) == data[4 * MiB:4 * MiB + 8]
        fault_proxy.add("GET", f"/blobs/{layer}", corrupt(offset=7))
        with pytest.raises(DigestMismatch, match="chunk 6 of .* does not match its digest in the chunk table"):
            model.read("weights.bin", 6 * MiB, 6 * MiB + 8)


@pytest.mark.parametrize("algorithm", ["sha256", "blake3"])
def test_the_stream_hasher_checks_with_the_hash_the_table_names(algorithm):
    data = os.urandom(5 * 65536 + 17)
    entry = chunk_stream(io.BytesIO(data), 65536, algorithm)
    good = TableHasher(entry, 65536)
    good.update(data)
    assert good.failed_chunk is None and good.hexdigest() == entry.digest.split(":")[1]
    bad = TableHasher(entry, 65536)
    bad.update(data[:3 * 65536 + 9] + bytes([data[3 * 65536 + 9] ^ 1]) + data[3 * 65536 + 10:])
    assert bad.failed_chunk == 3 and bad.verified == 3 * 65536 and bad.hexdigest() == ""
    other = "blake3" if algorithm == "sha256" else "sha256"  # the same digests read as the other hash
    assert TableHasher(LayerChunks(entry.digest, entry.size, entry.chunks, other), 65536).hexdigest() == ""
    mislabelled = TableHasher(LayerChunks(entry.digest, entry.size, entry.chunks, other), 65536)
    mislabelled.update(data)
    assert mislabelled.failed_chunk == 0


# -- (c) a hash nobody knows: one clear error --------------------------------------------------------
def test_an_unknown_hash_is_refused_in_one_line(registry, tmp_path, capsys):
    data = os.urandom(2 * MiB)
    old = json.loads(v1_table([(_sha(data), data)]))
    old["algorithm"] = "md5"
    table = json.dumps(old, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(ChunkTableError, match=r"unknown chunk hash 'md5' \(this ocibridge knows sha256, blake3"):
        parse_table(table)
    with pytest.raises(ChunkTableError, match="unknown chunk hash"):
        hashes.factory("md5")
    repo = new_repo()
    _push_bound(registry, _model(tmp_path / "m", data), repo, "v1", table)
    capsys.readouterr()
    code = main(["cat", f"{registry.host}/{repo}:v1", "weights.bin", "--range", "0-16"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
    assert "unknown chunk hash 'md5'" in err and "Traceback" not in err


# -- (d) reproducible -------------------------------------------------------------------------------
def test_the_same_input_gives_the_same_digests_twice(new_table, registry, monkeypatch):
    """Two pushes of one directory, the second reading every file again (no digest cache): one
    manifest digest, binding one BLAKE3 table."""
    _, _, src = new_table
    options = ocibridge.PushOptions(chunk_threshold=16 * MiB)
    repos = [new_repo(), new_repo()]
    first = ocibridge.push(str(src), f"{registry.host}/{repos[0]}:a", options=options)
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")
    second = ocibridge.push(str(src), f"{registry.host}/{repos[1]}:b", options=options)
    assert first.descriptor == second.descriptor
    tables = []
    for repo, tag in zip(repos, "ab", strict=True):
        with open_repository(host=registry.host, repository=repo) as store:
            tables.append(_bound_table(store, tag))
    assert tables[0] == tables[1] and json.loads(tables[0])["algorithm"] == "blake3"


# -- push --chunk-hash sha256: the old format, for readers not upgraded yet ----------------------
def test_push_chunk_hash_sha256_writes_the_old_format_byte_for_byte(new_table, registry, capsys):
    repo, data, src = new_table
    ref = f"{registry.host}/{repo}:old"
    assert main(["push", str(src), ref, "-q", "--chunk-threshold", "16M", "--chunk-hash", "sha256"]) == 0
    with open_repository(host=registry.host, repository=repo) as store:
        assert _bound_table(store, "old") == v1_table([(_sha(data), data)])
    capsys.readouterr()
    assert main(["push", str(src), ref, "-q", "--no-chunks", "--chunk-hash", "sha256"]) == 2
    assert "--chunk-hash" in capsys.readouterr().err


# -- serve's commits: the table in the hash the files' tables mostly have ---------------------
def test_a_commit_keeps_the_hash_its_files_tables_mostly_have():
    """A commit to a repository whose head binds a SHA-256 table keeps SHA-256 while the
    unchanged files hold most bytes (else every one of them would be read back from the
    registry to be hashed anew); new repositories, and rewrites, get BLAKE3."""
    from ocibridge.chunks.chunktable import chunk_count
    from ocibridge.model.known import KnownFile, cheapest_hash

    def known(size: int, algorithm: str | None) -> KnownFile:
        digest = "sha256:" + hashlib.sha256(f"{size} {algorithm}".encode()).hexdigest()
        chunks = None if algorithm is None else \
            LayerChunks(digest, size, ("0" * 64,) * chunk_count(size, MiB), algorithm)
        return KnownFile(digest, size, io.BytesIO, chunks)

    assert cheapest_hash({}) == "blake3"
    assert cheapest_hash({"old": known(100 * MiB, "sha256"), "new": known(70 * MiB, "blake3")}) == "sha256"
    assert cheapest_hash({"old": known(70 * MiB, "sha256"), "new": known(100 * MiB, "blake3"),
                          "untabled": known(500 * MiB, None)}) == "blake3"
    assert cheapest_hash({"a": known(80 * MiB, "sha256"), "b": known(80 * MiB, "blake3")}) == "blake3"
