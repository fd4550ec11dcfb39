"""Trees written from untrusted artifacts never reach outside their target (issue 13, classes
1-3): symlink chains, whiteouts, and pulls that fail half-way. Each case snapshots the folder
around the target and asserts it is exactly as before."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.core.confined import resolve_inside
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.k8s import check, mount
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from tests.k8s.test_k8s import _image, _tar

WEIGHT_TAR = "application/vnd.cnai.model.weight.v1.tar"
CONFIG = "application/vnd.cnai.model.config.v1+json"
ARTIFACT = "application/vnd.cnai.model.manifest.v1+json"


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every path under ``root`` (links not followed) with its kind and content or target."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", b"")
            else:
                out[rel] = ("file", path.read_bytes())
    return out


def _artifact(root: Path, layers: list[bytes], media_type: str = WEIGHT_TAR) -> str:
    """A ModelPack artifact whose weight layers are the given tars: what a hostile push holds."""
    return titled_artifact(root, [(media_type, data, None) for data in layers])


def titled_artifact(root: Path, layers: list[tuple[str, bytes, str | None]]) -> str:
    """A layout holding one artifact whose layers are (media type, bytes, title or None)."""
    layout = LayoutStore(root, create=True)
    config = json.dumps({"descriptor": {"name": "x"}, "config": {},
                         "modelfs": {"type": "layers", "diffIds": []}}).encode()
    config_desc = Descriptor.for_bytes(CONFIG, config)
    layout.push_blob(config_desc, io.BytesIO(config))
    descs = []
    for media_type, data, title in layers:
        desc = Descriptor.for_bytes(media_type, data)
        if title is not None:
            desc = desc.model_copy(update={"annotations": {"org.opencontainers.image.title": title}})
        layout.push_blob(desc, io.BytesIO(data))
        descs.append(desc)
    manifest = Manifest(artifactType=ARTIFACT, config=config_desc, layers=descs).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest, "v1")
    return f"oci:{root}:v1"


def _around(tmp_path: Path) -> Path:
    """A folder with a neighbour's file in it, where mounts go: it must survive them."""
    around = tmp_path / "around"
    around.mkdir()
    (around / "neighbour.txt").write_text("must survive")
    return around


def _pull(capsys, ref: str, dest: Path, *flags: str) -> tuple[int, str]:
    code = main(["pull", ref, str(dest), "-q", *flags])
    return code, capsys.readouterr().err


# -- class 1: symlink chains ---------------------------------------------------------------------
CHAINS = {
    "a -> .. then b -> a/../..": [("d", "dir", b""), ("d/a", "sym", ".."), ("d/b", "sym", "a/../..")],
    "b written first, a turns it into an escape": [("d/b", "sym", "a/../../x"), ("d/a", "sym", "..")],
    "a loop": [("a", "sym", "b"), ("b", "sym", "a")],
    "three links deep": [("p", "sym", "."), ("q", "sym", "p/p/p/.."), ("f", "file", b"x")],
}


@pytest.mark.parametrize("entries", CHAINS.values(), ids=CHAINS.keys())
def test_pull_refuses_a_link_chain_that_leaves_the_directory(tmp_path, capsys, entries) -> None:
    ref = _artifact(tmp_path / "layout", [_tar(entries)])
    around = tmp_path / "around"
    (around / "dest").mkdir(parents=True)
    (around / "dest" / "mine.txt").write_text("the user's")
    before = snapshot(around)
    code, err = _pull(capsys, ref, around / "dest")
    assert code == 1 and len(err.splitlines()) == 1
    assert "points outside the tree" in err or "more than 40 links" in err
    assert snapshot(around) == before


def test_pull_refuses_a_chain_through_a_link_already_in_the_directory(tmp_path, capsys) -> None:
    ref = _artifact(tmp_path / "layout", [_tar([("b", "sym", "up/../x")])])
    dest = tmp_path / "around" / "dest"
    dest.mkdir(parents=True)
    os.symlink("..", dest / "up")  # harmless on its own: it leads to the parent of dest
    before = snapshot(tmp_path / "around")
    code, err = _pull(capsys, ref, dest)
    assert code == 1 and err.strip() == "ocibridge: error: b: symlink points outside the tree (up/../x)"
    assert snapshot(tmp_path / "around") == before


def test_links_that_stay_inside_are_pulled(tmp_path, capsys) -> None:
    entries = [("d", "dir", b""), ("d/f", "file", b"data"), ("d/a", "sym", ".."), ("d/b", "sym", "a/d/f")]
    ref = _artifact(tmp_path / "layout", [_tar(entries)])
    code, err = _pull(capsys, ref, tmp_path / "out")
    assert code == 0, err
    assert (tmp_path / "out" / "d" / "b").read_bytes() == b"data"


@pytest.mark.parametrize("entries", CHAINS.values(), ids=CHAINS.keys())
def test_k8s_keeps_link_chains_as_the_runtimes_do(tmp_path, entries) -> None:
    """containerd and containers/storage keep symlinks as written (tests/k8s/test_k8s_runtimes.py):
    check warns, mount writes each link verbatim and never follows one while writing."""
    layout = _image(tmp_path, [_tar(entries)])
    around = _around(tmp_path)
    for runtime in ("containerd", "cri-o"):
        result = check(layout, "v1", runtime)
        assert result.will_mount, result.reasons
        assert any("points outside the mount" in w or "a loop" in w for w in result.warnings)
        out = around / f"mnt-{runtime}"
        mount(layout, "v1", out, runtime)
        links = {e.path: e.target for e in result.tree if e.type == "symlink"}
        assert links and {p: os.readlink(out / p) for p in links} == links
    assert (around / "neighbour.txt").read_text() == "must survive"
    assert sorted(p.name for p in around.iterdir()) == ["mnt-containerd", "mnt-cri-o", "neighbour.txt"]


def test_resolver_follows_links_as_the_kernel_does() -> None:
    links = {"d/a": "..", "d/b": "a/../..", "x": "d/a/d", "loop": "loop"}
    assert resolve_inside("d/a/d/a", links.get) == ""
    assert resolve_inside("x/a", links.get) == ""
    with pytest.raises(UnsafePath, match="outside"):
        resolve_inside("d/b", links.get)
    with pytest.raises(UnsafePath, match="more than 40"):
        resolve_inside("loop", links.get)


# -- class 2: whiteouts ----------------------------------------------------------------------------
WHITEOUTS = {
    ".wh...": [(".wh...", "file", b"")],
    ".wh..": [("sub/.wh..", "file", b"")],
    ".wh. (empty)": [("sub/.wh.", "file", b"")],
}
#: Whiteouts through a link of their own layer: the runtimes follow it inside the image
#: (tests/k8s/test_k8s_runtimes.py), so these delete what the link leads to, and nothing else.
WHITEOUTS_THROUGH_LINKS = {
    "through a link": ([("up", "sym", "."), ("up/.wh.victim", "file", b"")],
                       {"sub/keep": b"k"}),
    "through an absolute link": ([("up", "sym", "/"), ("up/.wh.victim", "file", b"")],
                                 {"sub/keep": b"k"}),
    "opaque through a link": ([("up", "sym", "sub"), ("sub/x", "file", b"x"), ("up/.wh..wh..opq", "file", b"")],
                              {"victim": b"v", "sub/x": b"x"}),
}


@pytest.mark.parametrize("entries", WHITEOUTS.values(), ids=WHITEOUTS.keys())
def test_hostile_whiteouts_delete_nothing(tmp_path, entries) -> None:
    lower = _tar([("victim", "file", b"v"), ("sub", "dir", b""), ("sub/keep", "file", b"k")])
    layout = _image(tmp_path, [lower, _tar(entries)])
    around = _around(tmp_path)
    before = snapshot(around)
    for runtime in ("containerd", "cri-o"):
        result = check(layout, "v1", runtime)
        assert not result.will_mount and result.reasons
        with pytest.raises(UnsafePath):
            mount(layout, "v1", around / "mnt", runtime)
        assert snapshot(around) == before


@pytest.mark.parametrize("entries, left", WHITEOUTS_THROUGH_LINKS.values(), ids=WHITEOUTS_THROUGH_LINKS.keys())
def test_whiteouts_through_a_link_stay_in_the_image(tmp_path, entries, left) -> None:
    lower = _tar([("victim", "file", b"v"), ("sub", "dir", b""), ("sub/keep", "file", b"k")])
    layout = _image(tmp_path, [lower, _tar(entries)])
    around = _around(tmp_path)
    for runtime in ("containerd", "cri-o"):
        result = check(layout, "v1", runtime)
        assert result.will_mount, result.reasons
        assert {e.path for e in result.tree if e.type == "file"} == set(left)
        out = around / f"mnt-{runtime}"
        mount(layout, "v1", out, runtime)
        assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
                if p.is_file() and not p.is_symlink()} == left
    assert (around / "neighbour.txt").read_text() == "must survive"


def test_k8s_mount_cli_says_why_in_one_line(tmp_path, capsys) -> None:
    layout = _image(tmp_path, [_tar([(".wh...", "file", b"")])])
    code = main(["k8s", "mount", f"oci:{layout.root}:v1", str(tmp_path / "mnt"), "--runtime", "containerd"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "names no single entry" in err
    assert not (tmp_path / "mnt").exists()


NOT_A_TAR = {
    "tar": (WEIGHT_TAR, b"not a tar archive at all " * 40),
    "gzip": (WEIGHT_TAR + "+gzip", b"\x1f\x8b\x08\x00 then garbage " * 10),
    "zstd": (WEIGHT_TAR + "+zstd", b"\x28\xb5\x2f\xfd then garbage " * 10),
}


@pytest.mark.parametrize("media_type, data", NOT_A_TAR.values(), ids=NOT_A_TAR.keys())
def test_a_layer_that_is_no_tar_is_one_line_naming_it(tmp_path, capsys, media_type, data) -> None:
    """Its digest is right, its content is no (compressed) tar: the pull says so, not
    'unexpected ReadError' (the tar, zlib or zstd module's error), and writes nothing."""
    ref = _artifact(tmp_path / "layout", [data], media_type)
    code, err = _pull(capsys, ref, tmp_path / "out")
    digest = Descriptor.for_bytes(media_type, data).digest
    assert code == 1 and err.count("\n") == 1 and f"layer {digest} is not a readable tar" in err, err
    assert not (tmp_path / "out").exists()


def test_k8s_mount_of_an_image_layer_that_is_no_tar_is_one_line(tmp_path, capsys) -> None:
    layout = _image(tmp_path, [b"not a tar archive at all " * 40])
    code = main(["k8s", "mount", f"oci:{layout.root}:v1", str(tmp_path / "mnt"), "--runtime", "containerd"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "is not a readable tar" in err, err
    assert "unexpected" not in err and not (tmp_path / "mnt").exists()


# -- class 3: all or nothing -------------------------------------------------------------------------
def test_a_pull_that_fails_half_way_leaves_the_directory_as_it_was(tmp_path, capsys) -> None:
    """The artifact's a.txt would replace the user's (with --overwrite), but its c/ cannot
    replace the user's directory c: the pull fails, and a.txt is the user's again."""
    ref = _artifact(tmp_path / "layout", [_tar([("a.txt", "file", b"new"), ("b.txt", "file", b"new b"),
                                                ("c", "file", b"a file where a directory is")])])
    dest = tmp_path / "around" / "dest"
    (dest / "c").mkdir(parents=True)
    (dest / "c" / "kept").write_text("inside the user's directory")
    (dest / "a.txt").write_text("the user's a")
    before = snapshot(tmp_path / "around")
    code, err = _pull(capsys, ref, dest, "--overwrite")
    assert code == 1 and "is a directory; cannot replace it with a file" in err
    assert snapshot(tmp_path / "around") == before


def test_a_failed_pull_into_a_new_directory_leaves_no_directory(tmp_path, capsys) -> None:
    ref = _artifact(tmp_path / "layout", [_tar([("d/a", "sym", ".."), ("d/b", "sym", "a/..")])])
    (tmp_path / "new").mkdir()  # pull makes DIR in a directory that exists (core/parentdir.py)
    before = snapshot(tmp_path)
    code, err = _pull(capsys, ref, tmp_path / "new" / "out")
    assert code == 1 and snapshot(tmp_path) == before
    assert "no such directory" not in err, err  # refused for its links, not for where it goes


# -- class 4: a layout file larger than its descriptor ------------------------------------------------
def test_a_manifest_file_larger_than_its_descriptor_is_refused_after_size_plus_one_bytes(tmp_path, capsys) -> None:
    """The manifest file is swapped for a sparse 64 GiB one: reading it whole would take minutes
    and all memory; ocibridge reads descriptor size + 1 bytes and refuses."""
    ref = _artifact(tmp_path / "layout", [_tar([("f", "file", b"x")])])
    layout = LayoutStore(tmp_path / "layout")
    desc = layout.resolve("v1")
    path = layout.blob_path(desc.digest)
    with open(path, "r+b") as f:
        f.truncate(64 << 30)
    code = main(["inspect", ref])
    err = capsys.readouterr().err
    assert code == 1 and f"is larger than the {desc.size} bytes its descriptor gives" in err


# -- class 7: writers as strict as readers --------------------------------------------------------------
@pytest.mark.parametrize("body, media_type, message", [
    (b"[1, 2, 3]", OCI_MANIFEST, "manifest"),
    (b'{"schemaVersion": 2, "manifests": "not a list"}', "application/vnd.oci.image.index.v1+json", "manifests"),
    (b'{"schemaVersion": 2, "config": {"digest": "sha256:00", "size": 1, "mediaType": "x"}, "layers": []}',
     OCI_MANIFEST, "digest"),
])
def test_a_layout_refuses_to_store_a_manifest_its_reader_would_refuse(tmp_path, body, media_type, message) -> None:
    layout = LayoutStore(tmp_path / "l", create=True)
    before = snapshot(tmp_path / "l")
    with pytest.raises(OcibridgeError, match=message):
        layout.push_manifest(Descriptor.for_bytes(media_type, body), body, "v1")
    assert snapshot(tmp_path / "l") == before and layout.tags() == []


def test_a_layout_refuses_a_manifest_larger_than_its_reader_reads(tmp_path) -> None:
    layout = LayoutStore(tmp_path / "l", create=True)
    body = b'{"schemaVersion": 2, "layers": [], "annotations": {"pad": "' + b"x" * (5 << 20) + b'"}}'
    with pytest.raises(OcibridgeError, match="more than a reader takes"):
        layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, body), body, "v1")
    assert layout.tags() == [] and not any((tmp_path / "l" / "blobs" / "sha256").iterdir())


def test_a_nul_in_a_layer_title_is_one_line_and_writes_nothing(tmp_path, capsys) -> None:
    layout = LayoutStore(tmp_path / "layout", create=True)
    config = json.dumps({"descriptor": {"name": "x"}, "config": {},
                         "modelfs": {"type": "layers", "diffIds": []}}).encode()
    config_desc = Descriptor.for_bytes(CONFIG, config)
    layout.push_blob(config_desc, io.BytesIO(config))
    layer = Descriptor.for_bytes("application/vnd.cnai.model.weight.v1.raw", b"w").model_copy(
        update={"annotations": {"org.opencontainers.image.title": "a\x00b"}})
    layout.push_blob(layer, io.BytesIO(b"w"))
    manifest = Manifest(artifactType=ARTIFACT, config=config_desc, layers=[layer]).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest, "v1")
    code, err = _pull(capsys, f"oci:{tmp_path}/layout:v1", tmp_path / "out")
    assert code == 1 and err.count("\n") == 1 and "NUL" in err and "\x00" not in err
    assert not (tmp_path / "out").exists()


# -- ModelCar images re-root the artifact's tar layers: the same confined rule -----------------
@pytest.mark.parametrize("entries, reason", [
    ([("d", "dir", b""), ("d/a", "sym", ".."), ("d/b", "sym", "a/../..")],
     "d/b: symlink points outside the tree (a/../..)"),
    ([("d", "dir", b""), ("d/b", "sym", "a/../.."), ("d/a", "sym", "..")],  # harmless until a comes
     "d/b: symlink points outside the tree (a/../..)"),
    ([("l", "sym", "."), ("l/f", "file", b"x")], "tar entry l/f: a parent directory is a symlink (l)"),
])
def test_modelcar_refuses_link_chains_and_writes_no_image(tmp_path, entries, reason):
    from ocibridge.k8s import build_modelcar

    _artifact(tmp_path / "art", [_tar(entries)])
    layout = LayoutStore(tmp_path / "art")
    tags_before = sorted(layout.tags())
    with pytest.raises(UnsafePath) as e:
        build_modelcar(layout, "v1", tag="car")
    assert str(e.value) == reason
    assert sorted(LayoutStore(tmp_path / "art").tags()) == tags_before
