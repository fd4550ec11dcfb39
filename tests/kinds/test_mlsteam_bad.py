"""Hostile and broken .mlarchive input, and exports that must refuse: one clear error each,
nothing written at the destination (no blobs, no index entry, no temp files, no output)."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest

from ocibridge.errors import DigestMismatch, OcibridgeError, SourceError, UnsafePath
from ocibridge.kinds.directory.source import read_directory
from ocibridge.kinds.mlsteam import (
    InvalidManifest,
    NotAnMlarchive,
    ZipLimits,
    export_mlarchive,
    read_mlarchive,
)
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.models import Index
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.kinds.test_mlsteam import make_sdk_archive_v2024, push_to_layout
from tests.modelgen import make_model

GOOD_MANIFEST = {
    "schema": "v2024.1",
    "name": "m",
    "version": "1",
    "models": [{"name": "a", "framework": "pytorch", "loader": {"file": "load.py"}}],
}


def write_zip(path: Path, entries: list[tuple[str | zipfile.ZipInfo, bytes]], method=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def archive_with(path: Path, manifest=GOOD_MANIFEST, extra=(), model_files=None) -> Path:
    model_files = model_files if model_files is not None else [("models/a/w.pt", b"w" * 5000)]
    raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    entries = [("manifest.json", raw), *model_files, ("hooks/load.py", b"def load(env): pass\n"), *extra]
    return write_zip(path, entries)


def assert_layout_untouched(root: Path) -> None:
    assert list((root / "blobs" / "sha256").iterdir()) == []
    assert Index.model_validate_json((root / "index.json").read_bytes()).manifests == []
    assert not [p for p in root.rglob("*") if ".ocibridge-tmp-" in p.name]


def attempt_push(archive: Path, layout_dir: Path, error, match: str, **kw):
    layout = LayoutStore(layout_dir, create=True)
    with pytest.raises(error, match=match) as info:
        art = build(read_mlarchive(archive, **kw))
        copy(art, ARTIFACT_TAG, layout, "v1")
    assert isinstance(info.value, OcibridgeError)
    assert "\n" not in str(info.value)
    assert_layout_untouched(layout_dir)
    return info.value


def _symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (0o120777) << 16
    return info


CASES = {
    "not json": (dict(manifest=b"{not json"), InvalidManifest, r"manifest\.json: not valid JSON"),
    "bad framework": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a", "framework": "jax"}]}),
        InvalidManifest,
        r"models\.0\.framework",
    ),
    "bad cleanup": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a", "enc_model_cleanup": "sometimes"}]}),
        InvalidManifest,
        r"models\.0\.enc_model_cleanup",
    ),
    "v2023 without version": (
        dict(manifest={"models": [{"name": "a", "framework": "pytorch"}]}),
        InvalidManifest,
        r"models\.0\.version: required in v2023\.1",
    ),
    "no models": (dict(manifest={**GOOD_MANIFEST, "models": []}), InvalidManifest, r"models:"),
    "unknown schema": (dict(manifest={**GOOD_MANIFEST, "schema": "v2099.1"}), InvalidManifest, "v2099"),
    "missing model dir": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a"}, {"name": "b"}]}),
        SourceError,
        r"model 'b' .* models/b/",
    ),
    "no model files": (dict(model_files=[]), SourceError, r"no models/ files"),
    "missing loader file": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a", "loader": "nothere.py"}]}),
        SourceError,
        r"models\.0\.loader: file 'nothere\.py' is not in the archive",
    ),
    "loader escape": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a", "loader": {"file": "../../x.py"}}]}),
        UnsafePath,
        r"escapes",
    ),
    "cleanup glob escape": (
        dict(manifest={**GOOD_MANIFEST, "models": [{"name": "a", "enc_model_cleanup_files": ["../*"]}]}),
        UnsafePath,
        r"enc_model_cleanup_files\.0",
    ),
    "dot-dot entry": (dict(extra=[("../evil.py", b"x")]), UnsafePath, r"escapes"),
    "nested dot-dot entry": (dict(extra=[("hooks/../../evil.py", b"x")]), UnsafePath, r"escapes"),
    "absolute entry": (dict(extra=[("/etc/evil", b"x")]), UnsafePath, r"absolute"),
    "backslash entry": (dict(extra=[("hooks\\..\\..\\evil", b"x")]), UnsafePath, r"backslash"),
    "duplicate entry": (dict(extra=[("hooks/load.py", b"other")]), SourceError, r"duplicate entry 'hooks/load\.py'"),
    "duplicate after normalising": (dict(extra=[("hooks/./load.py", b"x")]), SourceError, r"duplicate"),
    "file and directory": (dict(extra=[("hooks/load.py/x", b"x")]), SourceError, r"both a file and a directory"),
    "symlink entry": (dict(extra=[(_symlink_info("src/link"), b"/etc/passwd")]), SourceError, r"not a regular file"),
}


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("case", list(CASES))
def test_bad_archive_is_refused_and_nothing_is_written(tmp_path, case):
    kwargs, error, match = CASES[case]
    archive = archive_with(tmp_path / "bad.mlarchive", **kwargs)
    err = attempt_push(archive, tmp_path / "layout", error, match)
    assert str(tmp_path / "bad.mlarchive") in str(err)


def test_missing_manifest(tmp_path):
    archive = write_zip(tmp_path / "x.mlarchive", [("models/a/w.pt", b"w")])
    attempt_push(archive, tmp_path / "layout", SourceError, r"no manifest\.json")


def test_not_a_zip_and_truncated_zip(tmp_path):
    good = make_sdk_archive_v2024(tmp_path)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.mlarchive"
    truncated.write_bytes(data[: len(data) // 2])
    attempt_push(truncated, tmp_path / "l1", SourceError, r"not a readable zip archive")
    short_tail = tmp_path / "short.mlarchive"
    short_tail.write_bytes(data[:-10])
    attempt_push(short_tail, tmp_path / "l2", SourceError, r"not a readable zip archive")
    text = tmp_path / "text.mlarchive"
    text.write_text("hello")
    attempt_push(text, tmp_path / "l3", SourceError, r"not a readable zip archive")


def test_corrupt_entry_data_is_caught_while_streaming(tmp_path):
    """Central directory intact, compressed bytes of a weight damaged: found by the CRC or
    the inflater while the builder streams the entry, before anything reaches the layout."""
    weights = bytes(range(256)) * 4000
    archive = archive_with(tmp_path / "c.mlarchive", model_files=[("models/a/w.pt", weights)])
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("models/a/w.pt")
    raw = bytearray(archive.read_bytes())
    start = info.header_offset + 30 + len(info.filename)
    for i in range(start + 20, start + info.compress_size - 20, 97):
        raw[i] ^= 0x5A
    archive.write_bytes(bytes(raw))
    read_mlarchive(archive)  # the directory is fine: the damage shows only when streaming
    attempt_push(archive, tmp_path / "layout", SourceError, r"models/a/w\.pt")


def test_bomb_by_ratio_is_refused(tmp_path):
    zeros = b"\0" * (64 << 20)  # bzip2 squeezes this more than 1000-fold
    archive = write_zip(
        tmp_path / "bomb.mlarchive",
        [("manifest.json", json.dumps(GOOD_MANIFEST).encode()), ("hooks/load.py", b""),
         ("models/a/w.pt", zeros)],
        method=zipfile.ZIP_BZIP2,
    )
    attempt_push(archive, tmp_path / "layout", SourceError, r"ratio limit")


def test_total_size_limit(tmp_path):
    archive = archive_with(tmp_path / "big.mlarchive")
    attempt_push(archive, tmp_path / "layout", SourceError, r"size limit",
                 limits=ZipLimits(max_total_size=4000))


def test_overlapping_entries_are_refused(tmp_path):
    """Two central-directory records pointing at the same local data (the overlap bomb)."""
    archive = archive_with(tmp_path / "o.mlarchive", extra=[("models/a/x.pt", b"x" * 5000)])
    raw = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        first = zf.getinfo("manifest.json").header_offset
    cd = raw.rfind(b"PK\x01\x02")  # the last central record: models/a/x.pt
    struct.pack_into("<L", raw, cd + 42, first)
    archive.write_bytes(bytes(raw))
    attempt_push(archive, tmp_path / "layout", SourceError, r"overlap")


def test_encrypted_entry_is_refused(tmp_path):
    archive = archive_with(tmp_path / "e.mlarchive")
    raw = bytearray(archive.read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    struct.pack_into("<H", raw, cd + 8, struct.unpack_from("<H", raw, cd + 8)[0] | 1)
    archive.write_bytes(bytes(raw))
    attempt_push(archive, tmp_path / "layout", SourceError, r"encrypted")


# -- export refusals ---------------------------------------------------------------------------


def _no_output(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if ".ocibridge-tmp-" in p.name]


def test_export_refuses_a_non_mlarchive_artifact(tmp_path):
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(make_model(tmp_path / "model"))), ARTIFACT_TAG, layout, "dir")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "x.mlarchive"
    with pytest.raises(NotAnMlarchive, match=r"no raw manifest\.json layer"):
        export_mlarchive(layout, layout.resolve("dir"), out)
    _no_output(out)


def test_export_refuses_a_manifest_json_that_is_not_mlsteam(tmp_path):
    model = make_model(tmp_path / "model")
    (model / "manifest.json").write_text('{"layers": []}')
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(model)), ARTIFACT_TAG, layout, "dir")
    out = tmp_path / "x.mlarchive"
    with pytest.raises(NotAnMlarchive, match=r"not an MLSteam archive artifact: .*models"):
        export_mlarchive(layout, layout.resolve("dir"), out)
    assert not out.exists()


def test_export_of_a_corrupt_blob_leaves_the_old_file(tmp_path):
    archive = make_sdk_archive_v2024(tmp_path)
    art, layout = push_to_layout(archive, tmp_path / "layout")
    weight = next(
        layer for layer in art.manifest.layers
        if layer.annotations["org.cnai.model.filepath"] == "models/classifier/classifier.pt"
    )
    blob = layout.blob_path(weight.digest)
    data = bytearray(blob.read_bytes())
    data[1000] ^= 0xFF
    blob.write_bytes(bytes(data))
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "demo.mlarchive"
    out.write_bytes(b"previous export")
    with pytest.raises(DigestMismatch):
        export_mlarchive(layout, layout.resolve("v1"), out)
    assert out.read_bytes() == b"previous export"
    assert [p.name for p in out.parent.iterdir()] == ["demo.mlarchive"]


def test_forged_small_size_does_not_let_more_bytes_through(tmp_path):
    """A central directory that under-declares an entry (so it passes the up-front limits):
    the streaming reader yields no more than declared and the CRC check refuses it."""
    archive = archive_with(tmp_path / "f.mlarchive", model_files=[("models/a/w.pt", b"\0" * (4 << 20))])
    raw = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        names = [i.filename for i in zf.infolist()]
    cd = raw.find(b"PK\x01\x02")
    for name in names:  # walk the central records to the weight's
        n, m, k = struct.unpack_from("<3H", raw, cd + 28)
        if name == "models/a/w.pt":
            struct.pack_into("<L", raw, cd + 24, 1000)
            break
        cd += 46 + n + m + k
    archive.write_bytes(bytes(raw))
    sizes = {f.path: f.size for f in read_mlarchive(archive).files}
    assert sizes["models/a/w.pt"] == 1000
    attempt_push(archive, tmp_path / "layout", SourceError, r"models/a/w\.pt: corrupt entry data: Bad CRC")
