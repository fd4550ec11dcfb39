"""model/known.py: the artifact built from files whose digests, sizes and chunk tables are given
is push's of a directory holding them, byte for byte, and no vouched-for file is read to make it
(with the digest and chunk caches off, so no side channel can stand in for the facts)."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

import ocibridge
from ocibridge.api.options import PushOptions
from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD, chunk_stream
from ocibridge.errors import SourceError
from ocibridge.model.builder import BuildOptions
from ocibridge.model.deliver import deliver
from ocibridge.model.known import KnownFile, plan_known
from ocibridge.oci.mediatypes import Family
from ocibridge.stores.layout import LayoutStore

MIB = 1024 * 1024
COMMIT = {"io.ocibridge.commit.summary": "first", "io.ocibridge.commit.author": "ci-bot"}


@pytest.fixture(autouse=True)
def _no_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")


def model_dir(root: Path, large: int = 0) -> Path:
    """config.json, a safetensors file, nested files, a script kept executable, a .gitattributes
    a directory push leaves out, and (``large`` bytes) a weights file push gives a chunk table."""
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32,
                                                  "torch_dtype": "float16"}))
    header = json.dumps({"w": {"dtype": "F16", "shape": [512], "data_offsets": [0, 1024]}}).encode()
    header += b" " * (-len(header) % 8)
    (root / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + os.urandom(1024))
    (root / "sub" / "notes.md").write_text("notes\n")
    (root / "sub" / "deeper" / "vocab.txt").write_text("a\nb\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / ".gitattributes").write_text("*.bin filter=lfs\n")
    if large:
        (root / "weights.bin").write_bytes(os.urandom(large))
    return root


def facts_of(root: Path, opened: list[str], tables: bool = True) -> dict[str, KnownFile]:
    """What a commit knows of each file of ``root`` (its tables made as the bytes arrived); each
    open of a file is listed in ``opened``."""
    files: dict[str, KnownFile] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        chunks = chunk_stream(io.BytesIO(data), DEFAULT_CHUNK_SIZE) if tables and len(data) >= PUSH_THRESHOLD \
            else None
        known = KnownFile.of_file(path, digest, len(data), chunks)
        files[rel] = KnownFile(known.digest, known.size, _counted(path, rel, opened), known.chunks,
                               mode=known.mode)
    return files


def _counted(path: Path, rel: str, opened: list[str]) -> Callable[[], BinaryIO]:
    def opener() -> BinaryIO:
        opened.append(rel)
        return open(path, "rb")

    return opener


def pushed(root: Path, tmp_path: Path, family: Family = Family.CNAI) -> str:
    build = BuildOptions(family=family, annotations=COMMIT)
    result = ocibridge.push(str(root), f"oci:{tmp_path / 'pushed'}:{family.value}",
                            options=PushOptions(build=build))
    return result.descriptor.digest


def test_large_file_nested_and_executable_are_pushs_bytes_read_only_for_metadata(tmp_path):
    root = model_dir(tmp_path / "tiny", large=PUSH_THRESHOLD + 3 * MIB + 5)
    opened: list[str] = []
    artifact = plan_known(facts_of(root, opened), "tiny", BuildOptions(annotations=COMMIT), ChunkPolicy())
    assert artifact.pending_blobs() == []  # no file is left for the copy to hash (and chunk) as it sends
    digest = artifact.descriptor.digest
    # the config is read from the small files it comes from; nothing vouched for is hashed again
    assert sorted(opened) == ["config.json", "model.safetensors"]
    assert digest == pushed(root, tmp_path)
    manifest = artifact.artifact().manifest
    assert not any(layer.annotations and layer.annotations.get("org.opencontainers.image.title") == ".gitattributes"
                   for layer in manifest.layers)
    script = next(layer for layer in manifest.layers
                  if layer.annotations and layer.annotations.get("org.opencontainers.image.title") == "run.sh")
    assert '"mode":493' in script.annotations["org.cnai.model.file.metadata+json"]  # 0o755, as push keeps it

    # written into a layout: the manifest and its chunk table's referrer, the large file sent once
    store = LayoutStore(tmp_path / "out", create=True)
    opened.clear()
    delivered = deliver(artifact, store, "latest")
    assert delivered.descriptor.digest == digest == store.resolve("latest").digest
    assert delivered.chunks["layers"] == 1 and store.referrers(delivered.descriptor)
    assert opened.count("weights.bin") == 1


@pytest.mark.parametrize("family", list(Family))
def test_each_family_is_pushs(tmp_path, family):
    root = model_dir(tmp_path / "tiny")
    artifact = plan_known(facts_of(root, []), "tiny", BuildOptions(family=family, annotations=COMMIT),
                          ChunkPolicy())
    assert artifact.descriptor.digest == pushed(root, tmp_path, family)


def test_a_large_file_without_its_table_is_read_once_for_it(tmp_path):
    """A table in another chunk size, or none (a parent's file pushed without one): read for it,
    the artifact still push's."""
    root = model_dir(tmp_path / "tiny", large=PUSH_THRESHOLD)
    opened: list[str] = []
    artifact = plan_known(facts_of(root, opened, tables=False), "tiny", BuildOptions(annotations=COMMIT),
                          ChunkPolicy())
    assert artifact.descriptor.digest == pushed(root, tmp_path)
    assert opened.count("weights.bin") == 1


def test_facts_that_disagree_are_refused(tmp_path):
    root = model_dir(tmp_path / "tiny", large=PUSH_THRESHOLD)
    facts = facts_of(root, [])
    other = facts["config.json"]
    with pytest.raises(SourceError, match="chunk table"):
        KnownFile(other.digest, other.size, other.opener, facts["weights.bin"].chunks)
    with pytest.raises(SourceError, match="no files"):
        plan_known({".gitattributes": facts[".gitattributes"]}, "tiny")


def test_files_of_a_pushed_model_as_its_blobs(tmp_path):
    """A parent commit's files: the blobs of its manifest, the large one's chunks from the table
    the manifest binds. Nothing is read but the config's sources; the artifact is push's."""
    from ocibridge.chunks.bound import remote_bound_table
    from ocibridge.model.extract import fetch_manifest
    from ocibridge.oci.layerinfo import layer_mode, raw_file_path

    root = model_dir(tmp_path / "tiny", large=PUSH_THRESHOLD + 1)
    digest = pushed(root, tmp_path)
    store = LayoutStore(tmp_path / "pushed")
    _, manifest = fetch_manifest(store, digest)
    table = remote_bound_table(store, store.resolve(digest))
    assert table is not None
    opened: list[str] = []

    class Counting(LayoutStore):
        def open_blob(self, desc):  # type: ignore[no-untyped-def]
            opened.append(desc.digest)
            return super().open_blob(desc)

    blobs = Counting(tmp_path / "pushed")
    files = {raw_file_path(layer): KnownFile.of_blob(blobs, layer, table.for_layer(layer), table.chunk_size,
                                                     layer_mode(layer))
             for layer in manifest.layers}
    assert None not in files and ".gitattributes" not in files
    artifact = plan_known(files, "tiny", BuildOptions(annotations=COMMIT), ChunkPolicy())
    assert artifact.descriptor.digest == digest
    read = {path for path, known in files.items() if known.digest in opened}
    assert read == {"config.json", "model.safetensors"}


def test_a_build_file_is_a_file_like_any_other(tmp_path):
    """A commit's Modelfile or Kitfile is one of its files: the artifact push makes of the
    directory when told not to read it as a build file (``--no-build-file``)."""
    root = model_dir(tmp_path / "tiny")
    (root / "Modelfile").write_text("FROM ./model.safetensors\n")
    artifact = plan_known(facts_of(root, []), "tiny", BuildOptions(annotations=COMMIT), ChunkPolicy())
    result = ocibridge.push(str(root), f"oci:{tmp_path / 'pushed'}:plain",
                            options=PushOptions(build=BuildOptions(annotations=COMMIT), use_build_file=False))
    assert artifact.descriptor.digest == result.descriptor.digest
