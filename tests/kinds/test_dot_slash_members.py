"""Archive members named with a leading ``./`` (what ``tar -C DIR -cf x.tar .`` and ``bsdtar``
write, with a ``./`` entry for the root itself) are the same files as without it, as tar and
unzip read them: a carton or an mlarchive exported from an artifact whose tar layer was written
so, and cartons and mlarchives whose zip entries are named so, give the same result as their
plain twins. Names that really leave the tree (``..``, absolute, a link pointing out) are still
refused, by one error naming the entry."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_carton import TOML, noise, push, sha

from ocibridge.cli import main
from ocibridge.errors import UnsafePath
from ocibridge.kinds.carton import export_carton, format_manifest, read_carton
from ocibridge.kinds.directory.source import read_directory
from ocibridge.kinds.mlsteam import export_mlarchive, read_mlarchive
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.mediatypes import OCI_MANIFEST, Kind, Variant, layer_media_type
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.kinds.test_mlsteam_bad import archive_with

WEIGHTS = noise(9000, 3)
TAR_LAYER = layer_media_type(Kind.WEIGHT, Variant.TAR)


def _tar_with_gnu_tar(tree: Path, *, dot: bool) -> bytes:
    """The files under ``tree`` as GNU tar writes them: ``tar -C tree -cf - .`` names every
    member ``./…`` (and the root ``./``); the plain form names them ``model/…``."""
    what = ["."] if dot else sorted(os.listdir(tree))
    out = subprocess.run(["tar", "--format=pax", "-C", str(tree), "-cf", "-", *what], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        names = tar.getnames()
    if dot:
        assert names[0] == "." and all(n.startswith("./") for n in names[1:]), names
    else:
        assert not any(n.startswith(".") for n in names), names
    return out


def _tar(members: list[tuple[str, bytes | str]]) -> bytes:
    """Members written verbatim: bytes are a file, a str the target of a symlink."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in members:
            info = tarfile.TarInfo(name)
            if isinstance(body, str):
                info.type, info.linkname = tarfile.SYMTYPE, body
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def _carton_artifact(tmp_path: Path, layer: bytes, tag: str) -> tuple[LayoutStore, Descriptor]:
    """A carton artifact (carton.toml and MANIFEST as raw layers) whose model/ files come in one
    tar layer ``layer``."""
    src = tmp_path / f"src-{tag}"
    src.mkdir()
    (src / "carton.toml").write_bytes(TOML)
    entries = {"carton.toml": sha(TOML), "model/w.bin": sha(WEIGHTS), "model/alias.bin": sha(WEIGHTS)}
    (src / "MANIFEST").write_bytes(format_manifest(entries))
    store = LayoutStore(tmp_path / "layout", create=True)
    root = copy(build(read_directory(str(src))), ARTIFACT_TAG, store, None).root
    assert root is not None
    manifest = parse_manifest_bytes(store.fetch_bytes(root))
    assert isinstance(manifest, Manifest)
    tar_desc = Descriptor.for_bytes(TAR_LAYER, layer)
    store.push_blob(tar_desc, io.BytesIO(layer))
    body = manifest.model_copy(update={"layers": [*manifest.layers, tar_desc]}).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    store.push_manifest(desc, body, tag)
    return store, desc


def _model_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "model").mkdir(parents=True)
    (tree / "model" / "w.bin").write_bytes(WEIGHTS)
    (tree / "model" / "alias.bin").symlink_to("w.bin")
    return tree


def test_a_carton_exported_from_a_dot_slash_tar_layer_is_the_plain_one(tmp_path):
    tree = _model_tree(tmp_path)
    store, dotted = _carton_artifact(tmp_path, _tar_with_gnu_tar(tree, dot=True), "dot")
    _, plain = _carton_artifact(tmp_path, _tar_with_gnu_tar(tree, dot=False), "plain")
    export_carton(store, dotted, tmp_path / "dot.carton")
    export_carton(store, plain, tmp_path / "plain.carton")
    with zipfile.ZipFile(tmp_path / "dot.carton") as zf:
        names = zf.namelist()
    assert sorted(names) == ["MANIFEST", "carton.toml", "model/alias.bin", "model/w.bin"]
    assert (tmp_path / "dot.carton").read_bytes() == (tmp_path / "plain.carton").read_bytes()
    package = read_carton(tmp_path / "dot.carton")
    assert {f.path: f.link_target for f in package.files if f.link_target} == {"model/alias.bin": "w.bin"}
    # the CLI too: one command, no error
    assert main(["pull", f"oci:{tmp_path / 'layout'}:dot", str(tmp_path / "cli.carton"), "-q"]) == 0
    assert (tmp_path / "cli.carton").read_bytes() == (tmp_path / "plain.carton").read_bytes()


@pytest.mark.parametrize(("members", "match"), [
    ([("../model/w.bin", WEIGHTS)], r"tar entry '\.\./model/w\.bin' escapes its tree"),
    ([("./../model/w.bin", WEIGHTS)], r"tar entry '\./\.\./model/w\.bin' escapes its tree"),
    ([("/model/w.bin", WEIGHTS)], r"absolute tar entry '/model/w\.bin'"),
    ([("./model/w.bin", WEIGHTS), ("./model/alias.bin", "../../etc/passwd")],
     r"symlink 'model/alias\.bin' → '\.\./\.\./etc/passwd' points outside model/"),
    ([("./model/w.bin", WEIGHTS), ("./model/alias.bin", "/etc/passwd")],
     r"symlink 'model/alias\.bin' → '/etc/passwd' points outside model/"),
])
def test_carton_export_still_refuses_names_that_leave_the_tree(members, match, tmp_path):
    store, desc = _carton_artifact(tmp_path, _tar(members), "bad")
    with pytest.raises(UnsafePath, match=match) as info:
        export_carton(store, desc, tmp_path / "x.carton")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "x.carton").exists()


def _dot_slash_copy(src: Path, dst: Path) -> None:
    """``src``'s entries renamed ``./NAME``, with a ``./`` root entry first (as bsdtar writes
    a zip of ``.``), each entry's bytes, method and attributes kept."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zipfile.ZipInfo("./")
        root.create_system, root.external_attr = 3, (0o40755 << 16) | 0x10
        zout.writestr(root, b"")
        for info in zin.infolist():  # stored or deflate entries: zipfile reads them
            renamed = zipfile.ZipInfo("./" + info.filename, info.date_time)
            renamed.create_system, renamed.external_attr = info.create_system, info.external_attr
            renamed.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(renamed, zin.read(info))


def test_a_carton_whose_entries_start_with_dot_slash_reads_as_the_plain_one(tmp_path):
    plain = tmp_path / "plain.carton"  # deflate entries (not zstd), so zipfile can rename them
    files = {"model/w.bin": WEIGHTS, "model/cfg.json": b"{}"}
    everything = {"carton.toml": TOML, **files}
    with zipfile.ZipFile(plain, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in everything.items():
            zf.writestr(name, data)
        zf.writestr("MANIFEST", format_manifest({n: sha(d) for n, d in everything.items()}))
    dotted = tmp_path / "dot.carton"
    _dot_slash_copy(plain, dotted)
    a, b = read_carton(plain), read_carton(dotted)
    assert sorted(f.path for f in b.files) == sorted(f.path for f in a.files)
    layout_a, layout_b = tmp_path / "la", tmp_path / "lb"
    assert push(plain, layout_a) == push(dotted, layout_b)  # the same artifact, digest for digest
    assert main(["push", str(dotted), f"oci:{tmp_path / 'cli'}:v1", "-q"]) == 0


def test_carton_import_still_refuses_dot_dot_entries(tmp_path):
    bad = tmp_path / "bad.carton"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("./carton.toml", TOML)
        zf.writestr("./../evil", b"x")
        zf.writestr("MANIFEST", format_manifest({"carton.toml": sha(TOML), "../evil": sha(b"x")}))
    with pytest.raises(UnsafePath, match=r"escapes its tree"):
        read_carton(bad)


def test_an_mlarchive_whose_entries_start_with_dot_slash_reads_as_the_plain_one(tmp_path):
    plain = archive_with(tmp_path / "plain.mlarchive")
    dotted = tmp_path / "dot.mlarchive"
    _dot_slash_copy(plain, dotted)
    a, b = build(read_mlarchive(plain)), build(read_mlarchive(dotted))
    assert a.descriptor.digest == b.descriptor.digest


def test_an_mlarchive_exported_from_a_dot_slash_tar_layer_is_the_plain_one(tmp_path):
    """An mlarchive artifact whose hooks/ file comes in a tar layer: named ``./hooks/load.py``
    or ``hooks/load.py``, the exported mlarchive is the same, entry names without ``./``."""
    from ocibridge.layers.reader import layer_path

    store = LayoutStore(tmp_path / "layout", create=True)
    root = copy(build(read_mlarchive(archive_with(tmp_path / "a.mlarchive"))), ARTIFACT_TAG, store, None).root
    assert root is not None
    manifest = parse_manifest_bytes(store.fetch_bytes(root))
    assert isinstance(manifest, Manifest)

    def with_hooks_as(name: str) -> Descriptor:
        layers = []
        for layer in manifest.layers:
            if layer_path(layer) == "hooks/load.py":
                tar = _tar([(name, store.fetch_bytes(layer))])
                layer = Descriptor.for_bytes(layer_media_type(Kind.CODE, Variant.TAR), tar)
                store.push_blob(layer, io.BytesIO(tar))
            layers.append(layer)
        body = manifest.model_copy(update={"layers": layers}).to_json_bytes()
        desc = Descriptor.for_bytes(OCI_MANIFEST, body)
        store.push_manifest(desc, body, None)
        return desc

    export_mlarchive(store, with_hooks_as("hooks/load.py"), tmp_path / "plain.mlarchive")
    export_mlarchive(store, with_hooks_as("./hooks/load.py"), tmp_path / "dot.mlarchive")
    with zipfile.ZipFile(tmp_path / "dot.mlarchive") as zf:
        assert "hooks/load.py" in zf.namelist(), zf.namelist()
    assert (tmp_path / "dot.mlarchive").read_bytes() == (tmp_path / "plain.mlarchive").read_bytes()
