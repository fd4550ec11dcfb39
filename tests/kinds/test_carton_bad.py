"""Hostile and broken cartons: each fails with one clear carton error, and nothing is published
at the destination layout (no index entry, no manifest, no temp file)."""

from __future__ import annotations

import io
import random
import struct
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest
import zstandard
from test_carton import (
    REFERENCE,
    TOML,
    assert_nothing_published,
    make_carton,
    noise,
    push,
    sha,
)

from ocibridge import PushOptions
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.kinds.carton import (
    CartonError,
    CartonLimits,
    CartonMismatch,
    NotACarton,
    export_carton,
    format_manifest,
    read_carton,
)
from ocibridge.kinds.carton.zipwrite import ZipWriter
from ocibridge.kinds.directory.source import read_directory
from ocibridge.layers.reader import layer_path
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.mediatypes import OCI_MANIFEST, Kind, Variant, layer_media_type
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy


def _raw_zip(path: Path, entries: list[tuple[str, bytes]], manifest: dict[str, str] | None = None) -> None:
    """Entries written verbatim (names unchecked), plus a MANIFEST of them unless given."""
    if manifest is None:
        manifest = {n: sha(d) for n, d in entries if n != "MANIFEST"}
    with open(path, "wb") as out:
        zw = ZipWriter(out)
        for name, data in entries:
            zw.add(name, iter([data]))
        zw.add("MANIFEST", iter([format_manifest(manifest)]), method=0)
        zw.close()


def _linked_carton(path: Path, files: dict[str, bytes], symlinks: dict[str, str]) -> Path:
    """``files``, then ``symlinks`` (link: target), and a MANIFEST listing each link with the
    hash of b"x": the links are what is under test."""
    manifest = {**{n: sha(d) for n, d in files.items()}, **{link: sha(b"x") for link in symlinks}}
    with open(path, "wb") as out:
        zw = ZipWriter(out)
        for name, data in files.items():
            zw.add(name, iter([data]))
        for link, target in symlinks.items():
            zw.add_symlink(link, target)
        zw.add("MANIFEST", iter([format_manifest(manifest)]), method=0)
        zw.close()
    return path


def _fails(path: Path, tmp_path: Path, error: type[Exception], match: str, **kw) -> None:
    """Pushing ``path`` raises ``error`` matching ``match``; the layout stays unpublished."""
    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    with pytest.raises(error, match=match) as info:
        push(path, layout, **kw)
    assert "\n" not in str(info.value)
    assert_nothing_published(layout)


def test_file_not_matching_manifest_small(tmp_path: Path) -> None:
    path = tmp_path / "bad.carton"
    good = noise(10_000, 1)
    entries = {"carton.toml": sha(TOML), "model/w.bin": sha(good), "tensor_data/index.toml": sha(b"tensor = []\n")}
    make_carton(path, {"model/w.bin": noise(10_000, 2)}, manifest=entries)
    _fails(path, tmp_path, CartonMismatch, r"model/w.bin: content sha256 .* does not match MANIFEST")
    assert list((tmp_path / "layout" / "blobs" / "sha256").iterdir()) == []  # caught before any copy


def test_file_not_matching_manifest_streamed(tmp_path: Path) -> None:
    """Above the eager budget the mismatch surfaces during the copy, with the same message."""
    path = tmp_path / "bad.carton"
    good, bad = noise(10_000, 1), noise(10_000, 2)
    entries = {"carton.toml": sha(TOML), "model/w.bin": sha(good), "tensor_data/index.toml": sha(b"tensor = []\n")}
    make_carton(path, {"model/w.bin": bad}, manifest=entries)
    _fails(path, tmp_path, CartonMismatch, r"model/w.bin: content sha256 .* does not match MANIFEST",
           eager_verify_bytes=0)
    blobs = tmp_path / "layout" / "blobs" / "sha256"
    assert not (blobs / sha(good)).exists() and not (blobs / sha(bad)).exists()


def test_manifest_entry_missing_without_links(tmp_path: Path) -> None:
    path = tmp_path / "m.carton"
    make_carton(path, {"model/w.bin": noise(100)}, omit=("model/w.bin",))
    _fails(path, tmp_path, CartonError, "MANIFEST lists 'model/w.bin', which is neither in the archive nor in LINKS")


def test_missing_carton_toml(tmp_path: Path) -> None:
    path = tmp_path / "m.carton"
    _raw_zip(path, [("model/w.bin", b"x")])
    _fails(path, tmp_path, CartonError, "not a carton: no carton.toml")


def test_unknown_spec_version(tmp_path: Path) -> None:
    path = tmp_path / "v.carton"
    make_carton(path, {"model/w.bin": b"x"}, toml=TOML.replace(b"spec_version = 1", b"spec_version = 2"))
    _fails(path, tmp_path, CartonError, r"spec_version 2 is not supported \(known: 1\)")


def test_runner_missing(tmp_path: Path) -> None:
    path = tmp_path / "r.carton"
    make_carton(path, {"model/w.bin": b"x"}, toml=b"spec_version = 1\n")
    _fails(path, tmp_path, CartonError, "carton.toml: runner: Field required")


@pytest.mark.parametrize("name", ["../evil", "/abs/evil", "model/../../evil"])
def test_path_escapes(name: str, tmp_path: Path) -> None:
    path = tmp_path / "e.carton"
    _raw_zip(path, [("carton.toml", TOML), (name, b"x")])
    _fails(path, tmp_path, UnsafePath, "escapes its tree|absolute")


@pytest.mark.parametrize(
    ("link", "target"),
    [("model/l", "../../etc/passwd"), ("model/l", "/etc/passwd"), ("model/l", "../carton.toml"), ("misc/l", "x")],
)
def test_symlinks_outside_model(link: str, target: str, tmp_path: Path) -> None:
    path = _linked_carton(tmp_path / "s.carton", {"carton.toml": TOML, "model/x": b"x"}, {link: target})
    _fails(path, tmp_path, UnsafePath, "outside model/")


def test_symlink_chain_that_leaves_model_through_another_link(tmp_path: Path) -> None:
    """model/d/a -> .. is harmless, and model/d/b -> a/../x reads as model/d/x lexically (a file
    MANIFEST lists with that hash); followed through a, it is x at the archive root: refused."""
    path = _linked_carton(tmp_path / "s.carton", {"carton.toml": TOML, "model/d/x": b"x", "x": b"x"},
                          {"model/d/a": "..", "model/d/b": "a/../x"})
    _fails(path, tmp_path, UnsafePath, "symlink 'model/d/a' → '..' points outside model/")


def test_symlink_loop(tmp_path: Path) -> None:
    path = _linked_carton(tmp_path / "s.carton", {"carton.toml": TOML}, {"model/a": "b", "model/b": "a"})
    _fails(path, tmp_path, CartonError, "loop")


def test_duplicate_entries(tmp_path: Path) -> None:
    path = tmp_path / "d.carton"
    files = {"carton.toml": TOML, "model/w.bin": b"a"}
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("model/w.bin", b"b")
        zf.writestr("MANIFEST", format_manifest({n: sha(d) for n, d in files.items()}))
    _fails(path, tmp_path, CartonError, "duplicate entry 'model/w.bin'")


def test_truncated_zip(tmp_path: Path) -> None:
    data = (REFERENCE / "python_runner_doubler.carton").read_bytes()
    for cut in (len(data) // 2, len(data) - 30):
        path = tmp_path / f"t{cut}.carton"
        path.write_bytes(data[:cut])
        _fails(path, tmp_path / str(cut), CartonError, "not a readable zip archive|truncated")


def test_ratio_limit(tmp_path: Path) -> None:
    path = tmp_path / "b.carton"
    make_carton(path, {"model/zeros.bin": b"\0" * (4 << 20)})
    _fails(path, tmp_path, CartonError, r"beyond the ratio limit 100:1 \(zip bomb\?\)",
           limits=CartonLimits(max_ratio=100))


def test_total_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "b.carton"
    make_carton(path, {"model/a.bin": noise(3000, 1), "model/b.bin": noise(3000, 2)})
    _fails(path, tmp_path, CartonError, "archive expands beyond the limit of 5000 bytes",
           limits=CartonLimits(max_total_size=5000))


def _patch_declared_size(path: Path, name: bytes, new_size: int) -> None:
    """Rewrite an entry's uncompressed size in its local and central headers (a lying header)."""
    data = bytearray(path.read_bytes())
    local = data.find(b"PK\x03\x04", 0)
    while data[local + 30:local + 30 + len(name)] != name:
        local = data.find(b"PK\x03\x04", local + 4)
    struct.pack_into("<L", data, local + 22, new_size)
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name:
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<L", data, central + 24, new_size)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("eager", [True, False])
def test_stream_exceeding_declared_size(eager: bool, tmp_path: Path) -> None:
    """A header that understates the size: caught while streaming, never trusted."""
    path = tmp_path / "lie.carton"
    make_carton(path, {"model/zeros.bin": b"\0" * (2 << 20)})
    _patch_declared_size(path, b"model/zeros.bin", 1000)
    kw = {} if eager else {"eager_verify_bytes": 0}
    _fails(path, tmp_path, CartonError, r"model/zeros.bin expands beyond its declared 1000 bytes", **kw)


def test_entry_not_in_manifest(tmp_path: Path) -> None:
    path = tmp_path / "x.carton"
    _raw_zip(path, [("carton.toml", TOML), ("model/w.bin", b"x"), ("model/extra", b"y")],
             manifest={"carton.toml": sha(TOML), "model/w.bin": sha(b"x")})
    _fails(path, tmp_path, CartonError, "entry 'model/extra' is not listed in MANIFEST")


def test_corrupt_zstd_data(tmp_path: Path) -> None:
    path = tmp_path / "c.carton"
    make_carton(path, {"model/w.bin": noise(50_000)})
    data = bytearray(path.read_bytes())
    frame = data.find(zstandard.FRAME_HEADER, data.find(b"model/w.bin"))
    data[frame + 100:frame + 140] = b"\xff" * 40
    path.write_bytes(bytes(data))
    _fails(path, tmp_path, CartonError, "model/w.bin")


@pytest.mark.parametrize("text", [b"model/w.bin=abc\n", b"b=" + b"0" * 64 + b"\na=" + b"0" * 64 + b"\n",
                                  b"carton.toml=" + b"0" * 64])
def test_malformed_manifest(text: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.carton"
    with open(path, "wb") as out:
        zw = ZipWriter(out)
        zw.add("carton.toml", iter([TOML]))
        zw.add("MANIFEST", iter([text]), method=0)
        zw.close()
    _fails(path, tmp_path, CartonError, "MANIFEST")


def _carton_tree_artifact(tmp_path: Path, weights: bytes, listed: bytes) -> LayoutStore:
    """A layout tagging ``t`` the artifact of a carton's unpacked tree whose model/w.bin holds
    ``weights`` and whose MANIFEST lists the hash of ``listed`` for it."""
    src = tmp_path / "src"
    (src / "model").mkdir(parents=True)
    (src / "carton.toml").write_bytes(TOML)
    (src / "model" / "w.bin").write_bytes(weights)
    (src / "MANIFEST").write_bytes(format_manifest({"carton.toml": sha(TOML), "model/w.bin": sha(listed)}))
    store = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(str(src))), ARTIFACT_TAG, store, "t")
    return store


def test_export_refuses_layer_not_matching_manifest(tmp_path: Path) -> None:
    """An artifact whose files disagree with its MANIFEST is not exported (nothing at the path)."""
    store = _carton_tree_artifact(tmp_path, b"tampered", listed=b"original")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(CartonMismatch, match="model/w.bin: layer digest .* does not match MANIFEST"):
        export_carton(store, store.resolve("t"), out_dir / "x.carton")
    assert list(out_dir.iterdir()) == []


def test_export_missing_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "carton.toml").write_bytes(TOML)
    (src / "MANIFEST").write_bytes(format_manifest({"carton.toml": sha(TOML), "model/w.bin": sha(b"w")}))
    store = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(str(src))), ARTIFACT_TAG, store, "t")
    with pytest.raises(OcibridgeError, match="lacks 'model/w.bin'"):
        export_carton(store, store.resolve("t"), tmp_path / "x.carton")
    assert not (tmp_path / "x.carton").exists()


def test_cli_push_pull_and_error(tmp_path: Path) -> None:
    """The CLI path: push a carton to a layout, pull it back as .carton; a bad one: one line, exit 1."""
    cli = [sys.executable, "-m", "ocibridge"]
    layout = f"oci:{tmp_path / 'layout'}:v1"
    run = subprocess.run([*cli, "push", str(REFERENCE / "torchscript_test_model.carton"), layout],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "back.carton"
    run = subprocess.run([*cli, "pull", layout, str(out)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(out) as a, zipfile.ZipFile(REFERENCE / "torchscript_test_model.carton") as b:
        assert a.read("MANIFEST") == b.read("MANIFEST")
    bad = tmp_path / "bad.carton"
    make_carton(bad, {"model/w.bin": b"x"}, toml=TOML.replace(b"spec_version = 1", b"spec_version = 9"))
    run = subprocess.run([*cli, "push", str(bad), f"oci:{tmp_path / 'other'}:v1"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "spec_version 9 is not supported" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "other" / "index.json").exists() or b'"manifests":[]' in (
        tmp_path / "other" / "index.json").read_bytes().replace(b" ", b"")


def _blob_names(layout: Path) -> set[str]:
    return {p.name for p in (layout / "blobs" / "sha256").iterdir()}


def test_failed_push_leaves_layout_blob_set_unchanged(tmp_path: Path, monkeypatch) -> None:
    """A big file not matching MANIFEST is found while the copy streams it, after other verified
    files were stored: those blobs are removed again, pre-existing ones (shared with an
    artifact already tagged) are kept, and index.json is untouched."""
    from ocibridge.api import model_ops as api
    from ocibridge.kinds.carton import reader

    monkeypatch.setattr(reader, "EAGER_VERIFY_BYTES", 0)  # the streamed check, as for a big carton
    shared = noise(5000, 7)
    good = tmp_path / "good.carton"
    make_carton(good, {"model/shared.bin": shared})
    layout = tmp_path / "layout"
    api.push(str(good), f"oci:{layout}:good")
    before, index_before = _blob_names(layout), (layout / "index.json").read_bytes()

    big_good = random.Random(1).randbytes(9 << 20)  # above the size hashed on a thread of its own
    big_bad = big_good[:-1] + b"!"
    new_files = {"model/a.bin": noise(7000, 3), "model/shared.bin": shared}
    manifest = {p: sha(d) for p, d in {"carton.toml": TOML, "tensor_data/index.toml": b"tensor = []\n",
                                       **new_files, "model/z.bin": big_good}.items()}
    bad = tmp_path / "bad.carton"
    make_carton(bad, {**new_files, "model/z.bin": big_bad}, manifest=manifest)
    with pytest.raises(CartonMismatch, match=r"model/z.bin: content sha256 .* does not match MANIFEST"):
        # one blob at a time, in layer order: model/a.bin is stored before model/z.bin fails
        api.push(str(bad), f"oci:{layout}:bad", transfer=api.TransferOptions(concurrency=1))
    assert _blob_names(layout) == before
    assert (layout / "index.json").read_bytes() == index_before
    assert_nothing_published_beyond(layout, "good")


def assert_nothing_published_beyond(layout: Path, tag: str) -> None:
    store = LayoutStore(layout)
    assert store.tags() == [tag]
    for p in layout.rglob("*"):
        assert ".ocibridge-tmp-" not in p.name, p


def test_blobs_of_an_artifact_tagged_inside_a_failed_block_are_kept(tmp_path: Path) -> None:
    """The undo removes only blobs nothing listed in index.json uses."""
    path = tmp_path / "c.carton"
    make_carton(path, {"model/w.bin": noise(3000, 4)})
    store = LayoutStore(tmp_path / "layout", create=True)
    with pytest.raises(RuntimeError), store.removing_new_blobs_on_failure():
        copy(build(read_carton(path)), ARTIFACT_TAG, store, "kept")
        raise RuntimeError("a later step fails")
    art = build(read_carton(path))
    assert _blob_names(tmp_path / "layout") == {d.digest.split(":")[1] for d in
                                                [art.descriptor, art.manifest.config, *art.manifest.layers]}
    assert store.resolve("kept").digest == art.descriptor.digest


def _patch_central_crc(path: Path, name: bytes) -> None:
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name:
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<L", data, central + 16, struct.unpack_from("<L", data, central + 16)[0] ^ 1)
    path.write_bytes(bytes(data))


def test_crc_checked_where_no_sha256_is(tmp_path: Path) -> None:
    """MANIFEST has no MANIFEST line of its own: its CRC-32 is still checked. A file MANIFEST
    lists is checked by its sha256 instead (a wrong CRC alone does not matter)."""
    path = tmp_path / "m.carton"
    make_carton(path, {"model/w.bin": noise(3000, 5)})
    _patch_central_crc(path, b"MANIFEST")
    _fails(path, tmp_path, CartonError, "MANIFEST: CRC-32 mismatch")
    ok = tmp_path / "ok.carton"
    make_carton(ok, {"model/w.bin": noise(3000, 5)})
    _patch_central_crc(ok, b"model/w.bin")
    store = LayoutStore(tmp_path / "ok-layout", create=True)
    copy(build(read_carton(ok)), ARTIFACT_TAG, store, "v1")
    assert store.tags() == ["v1"]


# -- a registry destination, through the CLI --------------------------------------------------------
def _bad_carton(case: str, path: Path) -> list[bytes]:
    """A broken carton; returns the contents of its intact files (none of which may be uploaded)."""
    good = [TOML, b"tensor = []\n", noise(20_000, 21)]
    if case == "mismatch":
        manifest = {"carton.toml": sha(TOML), "model/w.bin": sha(noise(20_000, 22)),
                    "tensor_data/index.toml": sha(b"tensor = []\n")}
        make_carton(path, {"model/w.bin": good[2]}, manifest=manifest)
    elif case == "spec-version":
        bad_toml = TOML.replace(b"spec_version = 1", b"spec_version = 3")
        make_carton(path, {"model/w.bin": good[2]}, toml=bad_toml)
        good[0] = bad_toml
    elif case == "escape":
        _raw_zip(path, [("carton.toml", TOML), ("model/w.bin", good[2]), ("../evil", b"x")])
    elif case == "links-unreachable":
        make_carton(path, {"model/w.bin": good[2], "model/gone.bin": b"gone"}, omit=("model/gone.bin",),
                    links={sha(b"gone"): ["http://127.0.0.1:9/gone.bin"]})
    return good


@pytest.mark.parametrize("case", ["mismatch", "spec-version", "escape", "links-unreachable"])
def test_cli_bad_carton_to_registry_writes_nothing(case: str, tmp_path: Path, capsys, registry, unique_repo,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One error line, exit 1, and the registry gets no tag, no manifest and none of the
    carton's intact files (the checks run before anything is sent)."""
    from ocibridge.cli import main
    from ocibridge.errors import NotFound
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locate import open_target as open_store_target

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "xdg"))
    path = tmp_path / f"{case}.carton"
    intact = _bad_carton(case, path)
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(path), ref, "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error: ") and path.name in err, err
    store = open_store_target(ref).store
    with pytest.raises(NotFound):
        store.resolve("v1")
    for data in intact:
        assert not store.exists(Descriptor(mediaType="application/octet-stream", digest="sha256:" + sha(data),
                                           size=len(data)))


@pytest.mark.parametrize("twice", ["raw", "tar"])
def test_export_refuses_a_file_the_artifact_holds_twice(twice: str, tmp_path: Path) -> None:
    """A hostile artifact naming one file in two layers is one clear error, not a zip writer's
    ValueError (which the CLI could only report as unexpected)."""
    store = _carton_tree_artifact(tmp_path, b"w", listed=b"w")
    manifest = parse_manifest_bytes(store.fetch_bytes(store.resolve("t")))
    assert isinstance(manifest, Manifest)
    layer = next(x for x in manifest.layers if layer_path(x) == "model/w.bin")
    if twice == "tar":
        data = _tar_of("model/w.bin", b"w")
        store.push_blob(Descriptor.for_bytes(TAR_LAYER, data), io.BytesIO(data))
        layer = Descriptor.for_bytes(TAR_LAYER, data)
    doubled = manifest.model_copy(update={"layers": [*manifest.layers, layer]}).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, doubled)
    store.push_manifest(desc, doubled, "twice")
    with pytest.raises(NotACarton, match="holds 'model/w.bin' twice"):
        export_carton(store, desc, tmp_path / "x.carton")
    assert not (tmp_path / "x.carton").exists()


def _tar_of(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


TAR_LAYER = layer_media_type(Kind.WEIGHT, Variant.TAR)


def test_a_mismatch_fails_the_one_read_that_makes_the_chunk_table(tmp_path: Path, monkeypatch) -> None:
    """A file that gets a chunk table is written to a layout by the copy's one read, hashed for
    MANIFEST and for its chunks, not again by the layout (``IngestingVouched``): a file that
    does not match MANIFEST still fails that read, with the carton's error, and leaves no blob."""
    from ocibridge.api import model_ops as api
    from ocibridge.chunks import chunkcache
    from ocibridge.kinds.carton import reader

    monkeypatch.setattr(reader, "EAGER_VERIFY_BYTES", 0)

    def hashed_again(*args, **kwargs):
        raise AssertionError("the layout hashed a file its carton stream checks already")

    monkeypatch.setattr(LayoutStore, "ingest_blob", hashed_again)
    big_good = random.Random(2).randbytes(9 << 20)
    big_bad = big_good[:4 << 20] + b"!" + big_good[(4 << 20) + 1:]  # the same size
    manifest = {p: sha(d) for p, d in {"carton.toml": TOML, "tensor_data/index.toml": b"tensor = []\n",
                                       "model/z.bin": big_good}.items()}
    bad = tmp_path / "bad.carton"
    make_carton(bad, {"model/z.bin": big_bad}, manifest=manifest)
    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    with pytest.raises(CartonMismatch, match=r"model/z.bin: content sha256 .* does not match MANIFEST"):
        api.push(str(bad), f"oci:{layout}:bad", options=PushOptions(chunk_threshold=1 << 20))
    blobs = layout / "blobs" / "sha256"
    assert not (blobs / sha(big_good)).exists() and not (blobs / sha(big_bad)).exists()
    assert_nothing_published(layout)

    good = tmp_path / "good.carton"
    make_carton(good, {"model/z.bin": big_good})
    done = api.push(str(good), f"oci:{layout}:good", options=PushOptions(chunk_threshold=1 << 20))
    assert (blobs / sha(big_good)).read_bytes() == big_good
    table = chunkcache.lookup("sha256:" + sha(big_good), len(big_good), 1 << 20, "blake3")
    assert table is not None and len(table.chunks) == 9  # made by the same read
    assert done is not None and LayoutStore(layout).tags() == ["good"]


def test_a_mismatch_fails_the_chunking_read_before_a_registry_gets_anything(tmp_path: Path, monkeypatch, registry,
                                                                            unique_repo) -> None:
    """Into a registry, the file with a chunk table is read once before anything is sent (for
    its chunks and its MANIFEST check, not hashed a third time: ``askfirst.hash_whole``); a
    file that does not match MANIFEST fails there, and the registry gets no blob, no tag."""
    from types import SimpleNamespace

    from ocibridge.api import model_ops as api
    from ocibridge.chunks import chunkcache
    from ocibridge.errors import NotFound
    from ocibridge.kinds.carton import reader
    from ocibridge.places.locate import open_target as open_store_target
    from ocibridge.transfer import askfirst

    def hashed_again():
        raise AssertionError("the copy hashed a file its carton stream checks already")

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "xdg"))
    monkeypatch.setattr(reader, "EAGER_VERIFY_BYTES", 0)
    monkeypatch.setattr(askfirst, "hashlib", SimpleNamespace(sha256=hashed_again))
    big_good = random.Random(3).randbytes(9 << 20)
    big_bad = big_good[:4 << 20] + b"!" + big_good[(4 << 20) + 1:]
    manifest = {p: sha(d) for p, d in {"carton.toml": TOML, "tensor_data/index.toml": b"tensor = []\n",
                                       "model/z.bin": big_good}.items()}
    bad = tmp_path / "bad.carton"
    make_carton(bad, {"model/z.bin": big_bad}, manifest=manifest)
    ref = f"{registry.host}/{unique_repo}:v1"
    with pytest.raises(CartonMismatch, match=r"model/z.bin: content sha256 .* does not match MANIFEST"):
        api.push(str(bad), ref, options=PushOptions(chunk_threshold=1 << 20))
    store = open_store_target(ref).store
    with pytest.raises(NotFound):
        store.resolve("v1")
    for data in (big_good, big_bad):
        assert not store.exists(Descriptor(mediaType="application/octet-stream", digest="sha256:" + sha(data),
                                           size=len(data)))
    good = tmp_path / "good.carton"
    make_carton(good, {"model/z.bin": big_good})
    api.push(str(good), ref, options=PushOptions(chunk_threshold=1 << 20))
    with store.open_blob(Descriptor(mediaType="application/octet-stream", digest="sha256:" + sha(big_good),
                                    size=len(big_good))) as blob:
        assert blob.read() == big_good
    assert chunkcache.lookup("sha256:" + sha(big_good), len(big_good), 1 << 20, "blake3") is not None
