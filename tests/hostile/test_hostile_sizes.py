"""Sizes are measured, never declared (issue 34, item 2): a blob whose file is not the size its
descriptor claims is refused when it is opened, and a layer's bomb bound grows with the
compressed bytes actually consumed, whatever size the descriptor states. Each refusal is one
line, costs bounded memory (the child's peak RSS is measured) and leaves the directory as it was."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
import zstandard

from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.kinds.ollama.store import OllamaStore
from ocibridge.layers.reader import EXPANSION_FLOOR, MAX_EXPANSION_RATIO, layer_stream, open_layer
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import parse_ollama_name
from ocibridge.stores.layout import LayoutStore
from tests.hostile_run import CLI_SECONDS, RSS_BOUND_MB, run_cli, snapshot

WEIGHT = "application/vnd.cnai.model.weight.v1.tar"
CONFIG = "application/vnd.cnai.model.config.v1+json"
ARTIFACT = "application/vnd.cnai.model.manifest.v1+json"


def _tar_head(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.PAX_FORMAT)


def zstd_bomb(expanded: int, frames: int = 1, pattern: bytes = b"\0") -> bytes:
    """A tar+zstd layer holding one file of ``expanded`` bytes of ``pattern``, built as a stream
    (never ``expanded`` bytes in memory); ``frames`` independent frames, as pzstd writes."""
    out = io.BytesIO()
    per_frame = expanded // frames
    block = (pattern * (CHUNK // len(pattern) + 1))[:CHUNK]
    for frame in range(frames):
        cobj = zstandard.ZstdCompressor(level=3).compressobj()
        if frame == 0:
            out.write(cobj.compress(_tar_head("model/w.bin", expanded)))
        left = per_frame if frame < frames - 1 else expanded - per_frame * (frames - 1)
        while left:
            step = min(left, CHUNK)
            out.write(cobj.compress(block[:step]))
            left -= step
        out.write(cobj.flush())
    return out.getvalue()


def layout_with(root: Path, blob: bytes, media_type: str, declared: int | None = None) -> str:
    """A layout artifact with one layer ``blob`` whose descriptor claims ``declared`` bytes."""
    layout = LayoutStore(root, create=True)
    config = json.dumps({"descriptor": {"name": "x"}, "config": {},
                         "modelfs": {"type": "layers", "diffIds": []}}).encode()
    config_desc = Descriptor.for_bytes(CONFIG, config)
    layout.push_blob(config_desc, io.BytesIO(config))
    desc = Descriptor.for_bytes(media_type, blob, annotations={"org.cncf.model.filepath": "w.bin"})
    layout.push_blob(desc, io.BytesIO(blob))
    if declared is not None:
        desc = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=declared, annotations=desc.annotations)
    manifest = Manifest(artifactType=ARTIFACT, config=config_desc, layers=[desc]).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest, "v1")
    return f"oci:{root}:v1"


# -- a file whose size is not its descriptor's is refused at once ------------------------------
SMALL = zstd_bomb(4096)
LIES = {"10^12 bytes": 10**12, "one byte more": len(SMALL) + 1, "one byte less": len(SMALL) - 1, "zero": 0,
        "2^63 - 1": 2**63 - 1}


@pytest.mark.parametrize("declared", LIES.values(), ids=LIES.keys())
def test_layout_refuses_a_blob_whose_file_is_not_its_declared_size(tmp_path, declared) -> None:
    ref = layout_with(tmp_path / "lay", SMALL, WEIGHT + "+zstd", declared)
    store = LayoutStore(tmp_path / "lay")
    desc = Descriptor(mediaType=WEIGHT + "+zstd", digest=Descriptor.for_bytes(WEIGHT, SMALL).digest, size=declared)
    with pytest.raises(DigestMismatch, match=f"holds {len(SMALL)} bytes, its descriptor says {declared}"):
        store.open_blob(desc)
    before = snapshot(tmp_path)
    ran = run_cli("pull", ref, str(tmp_path / "dest"), "-q")
    line = ran.one_error_line()
    assert f"holds {len(SMALL)} bytes, its descriptor says {declared}" in line
    assert ran.peak_mb < RSS_BOUND_MB and ran.cpu_seconds < CLI_SECONDS
    assert snapshot(tmp_path) == before


def test_ollama_store_refuses_a_blob_whose_file_is_not_its_declared_size(tmp_path) -> None:
    blob = b"GGUF" + b"\0" * 60
    desc = Descriptor.for_bytes("application/vnd.ollama.image.model", blob)
    path = tmp_path / "blobs" / f"sha256-{desc.digest[7:]}"
    path.parent.mkdir(parents=True)
    path.write_bytes(blob)
    store = OllamaStore(tmp_path, parse_ollama_name("m:v1"), create=True)
    for declared in (10**12, len(blob) + 1, len(blob) - 1):
        lying = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=declared)
        with pytest.raises(DigestMismatch, match=f"holds {len(blob)} bytes"):
            store.open_blob(lying)


# -- the bomb bound follows the compressed bytes consumed ---------------------------------------
def _drain(reader) -> int:
    total = 0
    while chunk := reader.read(CHUNK):
        total += len(chunk)
    return total


BOMBS = {
    "zeros, one frame": lambda: zstd_bomb(512 << 20),
    "zeros, 16 frames": lambda: zstd_bomb(512 << 20, frames=16),
    "a repeated pattern": lambda: zstd_bomb(512 << 20, pattern=b"ocibridge!"),
}


@pytest.mark.parametrize("make", BOMBS.values(), ids=BOMBS.keys())
@pytest.mark.parametrize("declared", [None, 10**12], ids=["honest size", "declared 10^12"])
def test_the_bomb_bound_counts_compressed_bytes_consumed_not_the_declared_size(make, declared) -> None:
    blob = make()
    desc = Descriptor.for_bytes(WEIGHT + "+zstd", blob)
    if declared is not None:  # a reader over a stream: only the verifier at EOF could see the lie
        desc = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=declared)
    stream = layer_stream(io.BytesIO(blob), desc)
    with pytest.raises(OcibridgeError, match="bomb limit") as caught:
        _drain(stream)
    produced = stream._stream.count  # type: ignore[attr-defined]
    assert produced <= len(blob) * MAX_EXPANSION_RATIO + EXPANSION_FLOOR + CHUNK
    assert "\n" not in str(caught.value)


def test_an_honest_layer_near_the_ratio_is_read_whole() -> None:
    data = gzip.compress(_tar_head("model/w.bin", 64 << 20) + b"\0" * (64 << 20) + b"\0" * 1024)
    desc = Descriptor.for_bytes(WEIGHT + "+gzip", data)
    assert _drain(layer_stream(io.BytesIO(data), desc)) > 64 << 20


def test_the_ratio_can_be_raised_for_a_genuinely_sparse_layer(tmp_path, monkeypatch) -> None:
    blob = zstd_bomb(256 << 20)
    desc = Descriptor.for_bytes(WEIGHT + "+zstd", blob)
    with pytest.raises(OcibridgeError, match="OCIBRIDGE_MAX_EXPANSION_RATIO"):
        _drain(layer_stream(io.BytesIO(blob), desc))
    monkeypatch.setenv("OCIBRIDGE_MAX_EXPANSION_RATIO", "1000000")
    assert _drain(layer_stream(io.BytesIO(blob), desc)) > 256 << 20


def test_a_pulled_bomb_is_one_line_bounded_in_memory_and_leaves_nothing(tmp_path) -> None:
    ref = layout_with(tmp_path / "lay", zstd_bomb(1 << 30), WEIGHT + "+zstd")
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "kept.txt").write_text("mine")
    before = snapshot(tmp_path)
    ran = run_cli("pull", ref, str(tmp_path / "dest"), "-q")
    assert "bomb limit" in ran.one_error_line()
    assert ran.peak_mb < RSS_BOUND_MB and ran.cpu_seconds < CLI_SECONDS, (ran.peak_mb, ran.cpu_seconds)
    assert snapshot(tmp_path) == before


def test_open_layer_of_a_layout_refuses_the_lie_before_decompressing(tmp_path) -> None:
    layout_with(tmp_path / "lay", zstd_bomb(1 << 30), WEIGHT + "+zstd", declared=10**12)
    store = LayoutStore(tmp_path / "lay")
    manifest = parse_manifest_bytes(store.fetch_bytes(store.resolve("v1")))
    assert isinstance(manifest, Manifest)
    with pytest.raises(DigestMismatch, match="its descriptor says 1000000000000"):
        open_layer(store, manifest.layers[0])
