"""serve --upstream hashes each fetched file once (issue 87): the tee hashes its bytes as they are
written (its check: an LFS file's sha256, or a git blob id and the content's sha256 in the same
pass), and the artifact ``push hf:`` would build of the snapshot is built from those digests: the
copy of it into a store hashes none of the files again, and it is the same artifact, digest for
digest, as the one built by hashing them. The same pass makes the chunk digests of each file push
would give a table (its own rule, here lowered), however the file's fetch was cut and resumed: the
artifact binds push's table with no file read again for it."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ocibridge.chunks import chunking, hashes
from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, MIN_CHUNK_SIZE, chunk_stream
from ocibridge.hubserver.upstream import fetchedfacts
from ocibridge.hubserver.upstream.tee import FileFlight
from ocibridge.kinds.hf.hubcache import repo_folder
from ocibridge.kinds.hf.kind import read_snapshot
from ocibridge.kinds.hf.locator import HubReference
from ocibridge.kinds.source import ReadRequest
from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact
from ocibridge.oci import digest as digest_module
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy

COMMIT = "a" * 40
WEIGHTS = os.urandom(1 << 20)
FILES = {"config.json": b'{"model_type": "bert"}', "model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "
         + WEIGHTS}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324 - git's name


#: push's rule with its threshold lowered: the weights get a table, config.json does not
POLICY = ChunkPolicy(MIN_CHUNK_SIZE, threshold=len(WEIGHTS))


def teed(cache: Path, policy: ChunkPolicy | None = None) -> dict[str, FileFlight]:
    """The files written through the tee into the snapshot, as a fetch writes them: the weights an
    LFS file (checked by sha256), config.json a git file (checked by its blob id); ``policy``: the
    fetch's chunk rule."""
    folder = repo_folder("acme/m", cache)
    flights = {}
    for path, data in FILES.items():
        lfs = path.endswith(".safetensors")
        kind, expected = ("sha256", hashlib.sha256(data).hexdigest()) if lfs else ("git blob id", git_blob_id(data))
        flight = FileFlight(path, len(data), kind, expected, folder / "partial" / path,
                            folder / "snapshots" / COMMIT / path, policy)
        with flight.opened() as tee:
            for at in range(0, len(data), 1 << 16):
                tee.write(data[at:at + (1 << 16)])
            flight.finish(tee.hexdigest(), tee.sha256(), tee.chunks())
        flights[path] = flight
    return flights


class Counting:
    """hashlib as ocibridge/oci/digest.py sees it, counting the bytes its hashers are fed."""

    def __init__(self) -> None:
        self.fed = 0

    def new(self, name: str, data: bytes = b"") -> Any:
        outer = self
        inner = hashlib.new(name, data)
        self.fed += len(data)

        class Hasher:
            def update(self, chunk: bytes) -> None:
                outer.fed += len(chunk)
                inner.update(chunk)

            def hexdigest(self) -> str:
                return inner.hexdigest()

        return Hasher()

    def __getattr__(self, name: str) -> Any:
        return getattr(hashlib, name)


def built(cache: Path, flights: dict[str, FileFlight] | None, into: Path, policy: ChunkPolicy | None = None) -> str:
    """The snapshot's artifact copied into a layout at ``into`` (vouched by ``flights`` when given,
    with the chunks they made; ``policy``: the chunk rule, None: no table)."""
    package = read_snapshot(HubReference("acme/m", COMMIT), ReadRequest(), root=cache)
    tabled = {}
    if flights is not None:
        assert fetchedfacts.vouch(package, flights) == len(FILES)
        tabled = {f.chunks.digest: f.chunks for f in flights.values() if f.chunks is not None}
    stats = copy(PlannedArtifact(package, None, policy, tabled), ARTIFACT_TAG, LayoutStore(into, create=True), "main")
    assert stats.root is not None
    return stats.root.digest


def test_the_build_takes_the_tees_digests_and_hashes_no_file_again(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    flights = teed(tmp_path / "hub")
    assert {p: f.sha256 for p, f in flights.items()} == {p: hashlib.sha256(d).hexdigest() for p, d in FILES.items()}
    hashed_again = built(tmp_path / "hub", None, tmp_path / "hashed")
    counting = Counting()
    monkeypatch.setattr(digest_module, "hashlib", counting)
    vouched = built(tmp_path / "hub", flights, tmp_path / "vouched")
    assert vouched == hashed_again  # the same artifact push hf: builds, by hashing
    assert counting.fed < len(WEIGHTS) // 4  # the config and manifest only: no file hashed twice


def test_a_vouched_file_that_changed_on_disk_is_refused_by_its_size(tmp_path: Path):
    flights = teed(tmp_path / "hub")
    package = read_snapshot(HubReference("acme/m", COMMIT), ReadRequest(), root=tmp_path / "hub")
    fetchedfacts.vouch(package, flights)
    weights = flights["model.safetensors"].final
    os.chmod(weights, 0o644)
    with open(weights, "ab") as f:
        f.write(b"more")
    from ocibridge.errors import DigestMismatch

    with pytest.raises(DigestMismatch):
        copy(PlannedArtifact(package), ARTIFACT_TAG, LayoutStore(tmp_path / "out", create=True), "main")


def test_checked_files_are_linked_into_the_model_cache_once(tmp_path: Path):
    from ocibridge.cache.modelcache import ModelCache

    flights = teed(tmp_path / "hub")
    cache = ModelCache(tmp_path / "cache")
    assert fetchedfacts.into_model_cache(cache, flights) == len(FILES)
    assert fetchedfacts.into_model_cache(cache, flights) == 0  # held already
    for path, data in FILES.items():
        blob = cache.blobs.blob_path(f"sha256:{hashlib.sha256(data).hexdigest()}")
        assert blob.read_bytes() == data
        assert os.stat(blob).st_ino == os.stat(flights[path].final).st_ino  # linked, not copied
        assert oct(blob.stat().st_mode & 0o777) == oct(fetchedfacts.READ_ONLY)
    unchecked = SimpleNamespace(checked=False, sha256=None, final=tmp_path / "nothing")
    assert fetchedfacts.checked_files({"x": unchecked}) == {}  # type: ignore[dict-item]


def test_an_lfs_file_finished_by_its_check_alone_knows_its_sha256(tmp_path: Path):
    data = b"weights" * 1000
    sha256 = hashlib.sha256(data).hexdigest()
    flight = FileFlight("w.bin", len(data), "sha256", sha256, tmp_path / "partial", tmp_path / "final")
    with flight.opened() as tee:
        tee.write(data)
        flight.finish(tee.hexdigest())  # a writer that made no content hash of its own: the check is it
    assert flight.sha256 == sha256
    git = FileFlight("c.json", 2, "git blob id", git_blob_id(b"{}"), tmp_path / "p2", tmp_path / "f2")
    with git.opened() as tee:
        tee.write(b"{}")
        git.finish(tee.hexdigest())
    assert git.checked and git.sha256 is None  # not known: built by hashing, as push does


def pushs_chunks(data: bytes) -> tuple[str, ...]:
    return chunk_stream(io.BytesIO(data), POLICY.chunk_size, hashes.BLAKE3).chunks


def test_the_tee_makes_pushs_chunk_table_in_the_same_pass_and_the_build_reads_nothing_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")  # no chunk cache: the chunks come from the tee or a read
    teed(tmp_path / "plain")
    hashed_again = built(tmp_path / "plain", None, tmp_path / "hashed", POLICY)  # hashed and chunked, as push does
    flights = teed(tmp_path / "hub", POLICY)
    weights = flights["model.safetensors"]
    assert weights.chunks is not None and weights.chunks.chunks == pushs_chunks(FILES["model.safetensors"])
    assert weights.chunks.digest == f"sha256:{weights.sha256}" and weights.chunks.algorithm == hashes.BLAKE3
    assert flights["config.json"].chunks is None  # under the threshold: no table, as push
    assert teed(tmp_path / "untabled")["model.safetensors"].chunks is None  # no rule, no chunks

    def read_again(*args: object) -> None:
        raise AssertionError("a file read again for its chunks")

    monkeypatch.setattr(chunking.ChunkHasher, "update", read_again)
    monkeypatch.setattr(chunking, "_read_chunks", read_again)
    vouched = built(tmp_path / "hub", flights, tmp_path / "vouched", POLICY)
    assert vouched == hashed_again  # push's artifact, its table bound
    layout = LayoutStore(tmp_path / "vouched")
    assert ANNOTATION_DIGEST in json.loads(layout.fetch_bytes(layout.resolve("main")))["annotations"]


def test_a_resumed_rewound_or_adopted_file_still_gets_the_chunks_of_its_bytes(tmp_path: Path):
    data = FILES["model.safetensors"]
    sha256 = hashlib.sha256(data).hexdigest()

    def flight(name: str) -> FileFlight:
        return FileFlight("w", len(data), "sha256", sha256, tmp_path / name / "partial", tmp_path / name / "final",
                          POLICY)

    resumed = flight("resumed")
    with resumed.opened() as tee:  # cut after 300001 bytes ...
        tee.write(data[:300_001])
    with resumed.opened() as tee:  # ... resumed from there: the kept bytes chunked again, then the rest
        tee.write(data[300_001:])
        resumed.finish(tee.hexdigest(), tee.sha256(), tee.chunks())
    rewound = flight("rewound")
    with rewound.opened() as tee:
        tee.write(data[:200_000])
        tee.write(b"not the file" * 1000)
        tee.truncate(200_000)  # an upstream that ignored the Range, say: what is kept is rehashed
        tee.write(data[200_000:])
        rewound.finish(tee.hexdigest(), tee.sha256(), tee.chunks())
    adopted = flight("resumed")  # the snapshot holds it already, checked: read once, chunked too
    assert adopted.adopt()
    for done in (resumed, rewound, adopted):
        assert done.checked and done.chunks is not None and done.chunks.chunks == pushs_chunks(data)
