"""Kubernetes image volumes: check for both runtimes, ModelCar images, mount emulation, Pod YAML."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from ocibridge.errors import OcibridgeError
from ocibridge.k8s import build_modelcar, check, mount, pod_yaml, volume_yaml
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, BuildOptions, build
from ocibridge.oci.mediatypes import (
    ANNOTATION_TITLE,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_LAYER_TAR,
    OCI_LAYER_TAR_GZIP,
    OCI_MANIFEST,
    Family,
    Kind,
    Variant,
)
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.k8s_pod import assert_valid_mount, assert_valid_pod, assert_valid_volume
from tests.modelgen import make_model, tree

RUNTIMES = ("cri-o", "containerd")


def _layout(tmp_path: Path, name: str = "layout", **opts) -> tuple[Path, LayoutStore]:
    model = make_model(tmp_path / "model")
    layout = LayoutStore(tmp_path / name, create=True)
    copy(build(read_directory(model), BuildOptions(**opts)), ARTIFACT_TAG, layout, "v1")
    return model, layout


def _bytes(root: Path) -> dict[str, bytes]:
    return {p: content for p, (content, _) in tree(root).items()}


# -- CRI-O and containerd on a plain ModelPack artifact -----------------------------------------
def test_crio_mounts_raw_artifact_as_named_files(tmp_path):
    model, layout = _layout(tmp_path)
    result = check(layout, "v1", "cri-o")
    assert result.will_mount and result.kind == "artifact" and not result.reasons
    files = {e.path: e.size for e in result.tree if e.type == "file"}
    assert files == {p: len(c) for p, c in _bytes(model).items()}
    dirs = {e.path for e in result.tree if e.type == "dir"}
    assert dirs == {"weights", "scripts"}
    assert any("scripts/run.sh loses its executable bit" in w for w in result.warnings)
    out = tmp_path / "mnt"
    mount(layout, "v1", out, "cri-o")
    assert _bytes(out) == _bytes(model)
    assert all(mode == 0o644 for mode in (p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()))


def test_containerd_refuses_an_artifact(tmp_path):
    _, layout = _layout(tmp_path)
    result = check(layout, "v1", "containerd")
    assert not result.will_mount and result.tree == []
    assert "not an image tar layer" in result.reasons[0]
    assert any("0 diff_ids" in r for r in result.reasons)
    with pytest.raises(OcibridgeError, match="containerd@2.3 would not mount"):
        mount(layout, "v1", tmp_path / "mnt", "containerd")
    assert not (tmp_path / "mnt").exists()


def test_crio_tar_layers_cnai_skipped_cncf_not_unpacked(tmp_path):
    opts = {"variants": {Kind.CODE: Variant.TAR}, "group": {Kind.CODE}}
    _, cnai = _layout(tmp_path, "cnai", **opts)
    r = check(cnai, "v1", "cri-o")
    assert r.will_mount
    assert any("skipped by cri-o@1.36" in w and "not org.cnai.model.filepath" in w for w in r.warnings)
    assert not any("--media-types" in w for w in r.warnings)  # with cncf the tar would be one file
    assert any("1 tar layer(s): CRI-O mounts none of their files" in w for w in r.warnings)
    assert "scripts" not in {e.path for e in r.tree}
    _, cncf = _layout(tmp_path / "b", "cncf", family=Family.CNCF, **opts)
    r = check(cncf, "v1", "cri-o")
    assert any("does not unpack" in w for w in r.warnings)
    assert not any("loses its executable bit" in w for w in r.warnings)
    tar_layer = [d for d in parse_manifest_bytes(cncf.fetch_bytes(cncf.resolve("v1"))).layers
                 if d.mediaType.endswith(".tar")][0]
    node = {e.path: e for e in r.tree}["scripts/run.sh"]
    assert node.type == "file" and node.size == tar_layer.size  # the archive itself, as one file
    out = tmp_path / "mnt"
    mount(cncf, "v1", out, "cri-o")
    with tarfile.open(out / "scripts" / "run.sh") as t:
        assert t.getnames() == ["scripts/run.sh"]


def _artifact(tmp_path: Path, layers: list[tuple[bytes, dict[str, str]]]) -> LayoutStore:
    layout = LayoutStore(tmp_path / "crafted", create=True)
    descs = []
    for data, notes in layers:
        d = Descriptor.for_bytes("application/vnd.cncf.model.weight.v1.raw", data, annotations=notes)
        layout.push_blob(d, io.BytesIO(data))
        descs.append(d)
    cfg = b"{}"
    cdesc = Descriptor.for_bytes(Family.CNCF.config_media_type, cfg)
    layout.push_blob(cdesc, io.BytesIO(cfg))
    m = Manifest(artifactType=Family.CNCF.artifact_type, config=cdesc, layers=descs).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, m), m, "v1")
    return layout


def test_crio_names_escapes_duplicates_and_unnamed(tmp_path):
    layout = _artifact(tmp_path, [
        (b"first", {ANNOTATION_TITLE: "dup.bin"}),
        (b"second", {ANNOTATION_TITLE: "dup.bin"}),
        (b"escape", {ANNOTATION_TITLE: "../../etc/passwd"}),
        (b"by-filepath", {"org.cncf.model.filepath": "sub/dir/f.bin"}),
        (b"nameless", {}),
    ])
    r = check(layout, "v1", "cri-o")
    assert r.will_mount
    assert {e.path: e.size for e in r.tree if e.type == "file"} == {
        "dup.bin": 6, "etc/passwd": 6, "sub/dir/f.bin": 11,
    }
    text = "\n".join(r.warnings)
    assert "duplicate name dup.bin" in text and "escapes the mount" in text and "no name" in text
    out = tmp_path / "mnt"
    mount(layout, "v1", out, "cri-o")
    assert _bytes(out) == {"dup.bin": b"second", "etc/passwd": b"escape", "sub/dir/f.bin": b"by-filepath"}


def test_crio_file_and_directory_conflict_will_not_mount(tmp_path):
    layout = _artifact(tmp_path, [(b"a", {ANNOTATION_TITLE: "x"}), (b"b", {ANNOTATION_TITLE: "x/y"})])
    r = check(layout, "v1", "cri-o")
    assert not r.will_mount and "is a file" in r.reasons[0]


# -- ModelCar images ---------------------------------------------------------------------------
def _recomputed_diff_ids(layout: LayoutStore, manifest: Manifest) -> list[str]:
    return ["sha256:" + hashlib.sha256(layout.blob_path(d.digest).read_bytes()).hexdigest()
            for d in manifest.layers]


@pytest.mark.parametrize("variant", [None, "tar+gzip"])
def test_modelcar_image_mounts_on_both_runtimes(tmp_path, variant):
    opts = {"variants": {k: Variant(variant) for k in Kind}} if variant else {}
    model, layout = _layout(tmp_path, **opts)
    desc = build_modelcar(layout, "v1", tag="car")
    assert layout.resolve("car").digest == desc.digest
    manifest = parse_manifest_bytes(layout.fetch_bytes(desc))
    assert isinstance(manifest, Manifest) and manifest.config.mediaType == OCI_CONFIG
    assert {d.mediaType for d in manifest.layers} == {OCI_LAYER_TAR}
    config = json.loads(layout.fetch_bytes(manifest.config))
    assert config["rootfs"]["diff_ids"] == _recomputed_diff_ids(layout, manifest)
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    with tarfile.open(layout.blob_path(manifest.layers[0].digest)) as t:
        first = t.getmembers()[0]
        assert first.name == "models" and first.isdir() and first.mtime == 0 and first.uid == 0
    expected = {f"models/{p}": v for p, v in tree(model).items()}
    for runtime in RUNTIMES:
        r = check(layout, "car", runtime)
        assert r.will_mount and r.kind == "image" and r.diff_ids_verified, r.reasons
        assert r.sub_path == "models"
        assert {e.path for e in r.tree if e.type == "file"} == set(expected)
        out = tmp_path / f"mnt-{runtime}"
        mount(layout, "car", out, runtime)
        assert tree(out) == expected  # bytes and executable bits


def test_modelcar_is_reproducible_and_reuses_layers(tmp_path):
    _, a = _layout(tmp_path / "a")
    _, b = _layout(tmp_path / "b")
    da, db = build_modelcar(a, "v1"), build_modelcar(b, "v1")
    assert da.digest == db.digest
    again = build_modelcar(a, "v1", tag="again")
    assert again.digest == da.digest
    art = parse_manifest_bytes(a.fetch_bytes(a.resolve("v1")))
    img = parse_manifest_bytes(a.fetch_bytes(da))
    assert len(img.layers) == len(art.layers)  # one image layer per artifact layer


def test_modelcar_merges_more_than_100_layers_in_order(tmp_path):
    """105 raw artifact layers become 100 image layers (the first five carry two files each);
    every file is there once and the diff_ids verify on both runtimes."""
    from ocibridge.kinds.modelcar.build import MAX_IMAGE_LAYERS
    from ocibridge.model.package import ModelFile, ModelPackage

    files = [ModelFile.from_bytes(f"shard-{i:03d}.safetensors", f"w{i}".encode() * 40, Kind.WEIGHT)
             for i in range(MAX_IMAGE_LAYERS + 5)]
    layout = LayoutStore(tmp_path / "many", create=True)
    copy(build(ModelPackage(files=files, descriptor={"name": "many"}, config={"format": "safetensors"})),
         ARTIFACT_TAG, layout, "v1")
    assert len(parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1"))).layers) == MAX_IMAGE_LAYERS + 5
    image = parse_manifest_bytes(layout.fetch_bytes(build_modelcar(layout, "v1", tag="car")))
    assert len(image.layers) == MAX_IMAGE_LAYERS
    with tarfile.open(layout.blob_path(image.layers[0].digest)) as t:
        assert [m.name for m in t.getmembers()] == ["models", "models/shard-000.safetensors",
                                                    "models/shard-001.safetensors"]
    for runtime in RUNTIMES:
        r = check(layout, "car", runtime)
        assert r.will_mount and r.diff_ids_verified, r.reasons
    mount(layout, "car", tmp_path / "mnt", "containerd")
    assert _bytes(tmp_path / "mnt" / "models") == {f.path: f"w{i}".encode() * 40 for i, f in enumerate(files)}


def test_modelcar_index_serves_both_runtimes_and_modelpack(tmp_path):
    _, layout = _layout(tmp_path)
    art = layout.resolve("v1")
    top = build_modelcar(layout, "v1", tag="both", index=True)
    assert top.mediaType == OCI_INDEX
    index = parse_manifest_bytes(layout.fetch_bytes(top))
    plats = [(m.platform.os, m.platform.architecture) if m.platform else None for m in index.manifests]
    assert plats == [("linux", "amd64"), ("linux", "arm64"), None]
    assert index.manifests[2].digest == art.digest
    assert index.manifests[2].artifactType == Family.CNAI.artifact_type
    for plat in ("linux/amd64", "linux/arm64"):
        for runtime in RUNTIMES:
            r = check(layout, "both", runtime, platform=plat)
            assert r.will_mount and r.kind == "image" and r.sub_path == "models", (plat, runtime)
    # a platform the index does not list falls back to the platform-less ModelPack manifest
    assert check(layout, "both", "cri-o", platform="linux/s390x").kind == "artifact"
    assert not check(layout, "both", "containerd", platform="linux/s390x").will_mount
    # the index is accepted as a source again
    assert build_modelcar(layout, "both").digest == build_modelcar(layout, "v1").digest


# -- image layers: whiteouts and hostile entries ------------------------------------------------
def _tar(entries: list[tuple[str, str, bytes | str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, str(data)
                t.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.LNKTYPE, str(data)
                t.addfile(info)
            else:
                assert isinstance(data, bytes)
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _image(tmp_path: Path, layers: list[bytes], gzip_last: bool = False,
           diff_ids: list[str] | None = None) -> LayoutStore:
    import gzip as gz

    layout = LayoutStore(tmp_path / "img", create=True)
    descs, computed = [], []
    for i, data in enumerate(layers):
        computed.append("sha256:" + hashlib.sha256(data).hexdigest())
        blob, mt = (gz.compress(data, mtime=0), OCI_LAYER_TAR_GZIP) if gzip_last and i == len(layers) - 1 \
            else (data, OCI_LAYER_TAR)
        d = Descriptor.for_bytes(mt, blob)
        layout.push_blob(d, io.BytesIO(blob))
        descs.append(d)
    cfg = json.dumps({"architecture": "amd64", "os": "linux",
                      "rootfs": {"type": "layers", "diff_ids": diff_ids or computed}}).encode()
    cdesc = Descriptor.for_bytes(OCI_CONFIG, cfg)
    layout.push_blob(cdesc, io.BytesIO(cfg))
    m = Manifest(config=cdesc, layers=descs).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, m), m, "v1")
    return layout


def test_whiteouts_and_opaque_directories(tmp_path):
    lower = _tar([("a", "dir", b""), ("a/x", "file", b"x"), ("a/y", "file", b"y"),
                  ("b/z", "file", b"z"), ("c/keep", "file", b"k"), ("c/gone", "file", b"g"),
                  ("d", "file", b"was a file")])
    upper = _tar([("a/new", "file", b"n"), ("a/.wh..wh..opq", "file", b""), (".wh.b", "file", b""),
                  ("c/.wh.gone", "file", b""), ("d", "dir", b""), ("d/inside", "file", b"now a dir"),
                  ("c/link", "sym", "keep"), ("hard", "link", "a/new")])
    layout = _image(tmp_path, [lower, upper], gzip_last=True)
    expected = {"a/new": b"n", "c/keep": b"k", "d/inside": b"now a dir", "hard": b"n"}
    for runtime in RUNTIMES:
        r = check(layout, "v1", runtime)
        assert r.will_mount and r.diff_ids_verified, r.reasons
        assert {e.path for e in r.tree if e.type == "file"} == set(expected)
        assert {e.path: e.target for e in r.tree if e.type == "symlink"} == {"c/link": "keep"}
        out = tmp_path / f"mnt-{runtime}"
        mount(layout, "v1", out, runtime)
        assert _bytes(out) == expected
        assert (out / "c" / "link").readlink() == Path("keep")
        assert not (out / "a" / "x").exists() and not (out / "b").exists()


@pytest.mark.parametrize("entries, lands", [
    ([("../evil", "file", b"x")], "evil"),
    ([("/abs", "file", b"x")], "abs"),
    ([("l", "sym", "."), ("l/f", "file", b"x")], "f"),
    ([("l", "sym", "/"), ("l/../../f", "file", b"x")], "f"),
])
def test_names_and_links_stay_in_the_image_as_the_runtimes_keep_them(tmp_path, entries, lands):
    """containerd and containers/storage clean a name (`..` stops at the root, an absolute name
    starts there) and follow a link of the same layer scoped to the image (test_k8s_runtimes.py)."""
    layout = _image(tmp_path, [_tar(entries)])
    for runtime in RUNTIMES:
        r = check(layout, "v1", runtime)
        assert r.will_mount, r.reasons
        assert {e.path for e in r.tree if e.type == "file"} == {lands}
        climbing = any(n.startswith("/") or n.startswith("../") or "/../../" in n for n, _, _ in entries)
        assert any("climbs out of the image or is absolute" in w for w in r.warnings) == climbing
        out = tmp_path / f"mnt-{runtime}"
        mount(layout, "v1", out, runtime)
        assert (out / lands).read_bytes() == b"x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["img", "mnt-containerd", "mnt-cri-o"]


@pytest.mark.parametrize("entries, message", [
    ([("h", "link", "missing")], "hard link"),
    ([("l", "sym", "/nowhere"), ("l/f", "file", b"x")], "does not hold"),
])
def test_hostile_image_layers_are_refused(tmp_path, entries, message):
    layout = _image(tmp_path, [_tar(entries)])
    r = check(layout, "v1", "cri-o")
    assert not r.will_mount and message in r.reasons[0]
    with pytest.raises(OcibridgeError):
        mount(layout, "v1", tmp_path / "mnt", "cri-o")
    assert not (tmp_path / "mnt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ocibridge-tmp-")]


def test_wrong_diff_id_and_corrupt_blob_are_caught(tmp_path):
    layout = _image(tmp_path, [_tar([("f", "file", b"data")])])
    manifest = parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1")))
    blob = layout.blob_path(manifest.layers[0].digest)
    data = bytearray(blob.read_bytes())
    data[600] ^= 1  # inside the file's content block
    blob.write_bytes(bytes(data))
    r = check(layout, "v1", "containerd")
    assert not r.will_mount and "content has digest" in r.reasons[0]
    other = _image(tmp_path / "other", [_tar([("f", "file", b"data")])], diff_ids=["sha256:" + "1" * 64])
    r = check(other, "v1", "cri-o")
    assert not r.will_mount and r.diff_ids_verified is False and "the config says" in r.reasons[0]
    with pytest.raises(OcibridgeError, match="the config says"):
        mount(other, "v1", tmp_path / "mnt", "containerd")


# -- YAML --------------------------------------------------------------------------------------
def _assert_pod(doc: dict, digest: str, sub_path: str | None) -> None:
    assert_valid_pod(doc)
    vol = doc["spec"]["volumes"][0]
    assert vol["image"]["reference"].endswith("@" + digest)
    assert vol["image"]["pullPolicy"] == "IfNotPresent"
    vm = doc["spec"]["containers"][0]["volumeMounts"][0]
    assert vm["name"] == vol["name"] and vm["readOnly"] is True and vm["mountPath"] == "/models"
    assert vm.get("subPath") == sub_path


def test_pod_yaml_parses_and_pins_a_digest_the_store_holds(tmp_path):
    _, layout = _layout(tmp_path)
    art = layout.resolve("v1")
    text = volume_yaml(layout, "v1", "registry.example:5000/team/model:v1", runtime="cri-o")
    doc = yaml.safe_load(text)
    _assert_pod(doc, art.digest, None)
    assert doc["spec"]["volumes"][0]["image"]["reference"] == f"registry.example:5000/team/model@{art.digest}"
    digest = doc["spec"]["volumes"][0]["image"]["reference"].split("@", 1)[1]
    assert layout.resolve(digest).digest == digest
    with pytest.raises(OcibridgeError, match="containerd@2.3 would not mount"):
        volume_yaml(layout, "v1", "registry.example/team/model:v1", runtime="containerd")
    car = build_modelcar(layout, "v1", tag="car")
    doc = yaml.safe_load(volume_yaml(layout, "car", "registry.example/team/model:car", runtime="containerd"))
    _assert_pod(doc, car.digest, "models")
    snip = yaml.safe_load(pod_yaml(f"r.example/m@{car.digest}", runtime="containerd", snippet=True,
                                   sub_path="models", mount_path="/data"))
    assert set(snip) == {"volumes", "volumeMounts"} and snip["volumeMounts"][0]["mountPath"] == "/data"
    assert_valid_volume(snip["volumes"][0])
    assert_valid_mount(snip["volumeMounts"][0], {snip["volumes"][0]["name"]})


@pytest.mark.parametrize("path, value", [
    (("spec", "volumes", 0, "image", "reference"), "r.example/m:v1"),  # not pinned
    (("spec", "volumes", 0, "image", "pullPolicy"), "Sometimes"),
    (("spec", "volumes", 0, "image", "refrence"), "typo"),  # unknown key
    (("spec", "containers", 0, "volumeMounts", 0, "name"), "other"),  # names no volume
    (("spec", "containers", 0, "volumeMounts", 0, "mountPath"), "models"),
    (("metadata", "name"), "Bad_Name"),
    (("kind",), "Deployment"),
])
def test_pod_check_itself_catches_bad_pods(path, value):
    doc = yaml.safe_load(pod_yaml("r.example/m@sha256:" + "a" * 64, runtime="cri-o"))
    assert_valid_pod(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(AssertionError):
        assert_valid_pod(doc)


@pytest.mark.parametrize("kwargs", [
    {"reference_pinned_by_digest": "r.example/m:v1"},
    {"reference_pinned_by_digest": "oci:/x@sha256:" + "0" * 64},
    {"mount_path": "relative"},
    {"name": "Bad_Name"},
    {"sub_path": "../x"},
])
def test_pod_yaml_refuses_bad_inputs(kwargs):
    args = {"reference_pinned_by_digest": "r.example/m@sha256:" + "a" * 64, "runtime": "cri-o", **kwargs}
    with pytest.raises(OcibridgeError):
        pod_yaml(args.pop("reference_pinned_by_digest"), **args)
