"""Runtime rules by version: every rule of docs/kubernetes.md's table, checked for each runtime
version it differs on (CRI-O 1.31/1.33/1.34/current, containerd 1.6/1.7/2.0/2.1/2.2). Layout
stores: what is asserted is the decision; tests/k8s/test_k8s_runtimes.py shows the real runtimes
take the same ones."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from ocibridge.cli import main
from ocibridge.errors import OcibridgeError
from ocibridge.k8s import build_modelcar, check, mount, volume_yaml
from ocibridge.k8s.runtime import RuntimeVersion
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, OCI_MANIFEST, Family
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.stores.layout import LayoutStore
from tests.k8s.test_k8s import _layout
from tests.k8s_images import DOCKER_CONFIG, Entry, push_image

CRIO_133, CRIO_134 = "cri-o@1.33", "cri-o@1.34"
CRIO_ALL = ("cri-o@1.33", "cri-o@1.34", "cri-o@1.35", "cri-o")
CONTAINERD_WITH_VOLUMES = ("containerd@2.1", "containerd@2.2", "containerd")
CONTAINERD_WITHOUT = ("containerd@1.6", "containerd@1.7", "containerd@2.0")


def _artifact(tmp_path: Path, layers: list[tuple[bytes, dict[str, str], str]], family: Family = Family.CNAI,
              config_media_type: str | None = None) -> LayoutStore:
    """A ModelPack-shaped artifact with layers (content, annotations, kind/variant) as given."""
    layout = LayoutStore(tmp_path / "crafted", create=True)
    descs = []
    for data, notes, kind in layers:
        d = Descriptor.for_bytes(f"application/vnd.{family.value}.model.{kind}", data, annotations=notes or None)
        layout.push_blob(d, io.BytesIO(data))
        descs.append(d)
    cfg = b"{}"
    cdesc = Descriptor.for_bytes(config_media_type or family.config_media_type, cfg)
    layout.push_blob(cdesc, io.BytesIO(cfg))
    m = Manifest(artifactType=family.artifact_type, config=cdesc, layers=descs).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, m), m, "v1")
    return layout


def _files(result) -> dict[str, int]:
    return {e.path: e.size for e in result.tree if e.type == "file"}


# -- parsing ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, label", [
    ("cri-o", "cri-o@1.36"), ("containerd", "containerd@2.3"), ("cri-o@1.33", "cri-o@1.33"),
    ("cri-o@1.33.7", "cri-o@1.33"), ("containerd@2.1.4", "containerd@2.1"), ("containerd@1.6", "containerd@1.6"),
])
def test_runtime_versions_parse(text: str, label: str) -> None:
    assert RuntimeVersion.parse(text).label == label
    assert RuntimeVersion.parse(text).beyond_known is None


def test_a_version_newer_than_known_takes_the_newest_rules(tmp_path: Path) -> None:
    _, layout = _layout(tmp_path)
    r = check(layout, "v1", "cri-o@1.40")
    assert r.will_mount and r.kind == "artifact"
    assert "cri-o@1.40 is newer than the versions ocibridge knows: the rules of cri-o@1.36 are assumed" in r.warnings


@pytest.mark.parametrize("text", ["docker", "cri-o@", "cri-o@1", "cri-o@v1.33", "containerd@2.x", "cri-o@1.33\n"])
def test_bad_runtime_versions_are_one_error_line(text: str, capsys, tmp_path: Path) -> None:
    with pytest.raises(OcibridgeError):
        RuntimeVersion.parse(text)
    with pytest.raises(SystemExit) as exit_:
        main(["k8s", "check", f"oci:{tmp_path}/none:v1", "--runtime", text])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: argument --runtime") and err.count("\n") == 1


# -- CRI-O: file names by version -------------------------------------------------------------------
def test_crio_133_names_by_cnai_filepath_and_134_by_cncf(tmp_path: Path) -> None:
    cnai = _artifact(tmp_path / "a", [(b"weights", {"org.cnai.model.filepath": "w.bin"}, "weight.v1.raw"),
                                      (b"titled", {ANNOTATION_TITLE: "t.bin"}, "doc.v1.raw")])
    cncf = _artifact(tmp_path / "b", [(b"weights", {"org.cncf.model.filepath": "w.bin"}, "weight.v1.raw"),
                                      (b"titled", {ANNOTATION_TITLE: "t.bin"}, "doc.v1.raw")], Family.CNCF)
    old = check(cnai, "v1", CRIO_133)
    assert old.will_mount and _files(old) == {"w.bin": 7, "t.bin": 6} and old.layers_hidden == 0
    assert not any("--media-types" in w for w in old.warnings)
    assert "layer 0: bind-mounted as the file w.bin (named by org.cnai.model.filepath)" in old.layers
    for version in ("cri-o@1.34", "cri-o@1.35", "cri-o"):
        new = check(cnai, "v1", version)
        assert new.will_mount and _files(new) == {"t.bin": 6} and new.layers_hidden == 1
        label = RuntimeVersion.parse(version).label
        assert any(f"skipped by {label}" in w and "not org.cnai.model.filepath" in w for w in new.warnings)
        assert any(f"push it with --media-types cncf for {label}" in w for w in new.warnings)
        assert _files(check(cncf, "v1", version)) == {"w.bin": 7, "t.bin": 6}
    old = check(cncf, "v1", CRIO_133)
    assert _files(old) == {"t.bin": 6} and old.layers_hidden == 1
    assert any("push it with --media-types cnai for cri-o@1.33" in w for w in old.warnings)
    out = tmp_path / "mnt-133"
    mount(cnai, "v1", out, CRIO_133)
    assert (out / "w.bin").read_bytes() == b"weights"
    out = tmp_path / "mnt-134"
    mount(cnai, "v1", out, CRIO_134)
    assert sorted(p.name for p in out.iterdir()) == ["t.bin"]


def test_crio_133_mounts_a_cnai_group_over_the_mount_path_itself(tmp_path: Path) -> None:
    """A grouped layer whose filepath is the model's root: 1.33 puts the tar over /models and the
    pod fails; 1.34 does not read the cnai key and skips it."""
    layout = _artifact(tmp_path, [(b"tar bytes", {"org.cnai.model.filepath": "."}, "code.v1.tar"),
                                  (b"w", {ANNOTATION_TITLE: "w.bin"}, "weight.v1.raw")])
    old = check(layout, "v1", CRIO_133)
    assert not old.will_mount and "which is the mount path itself" in old.reasons[0]
    new = check(layout, "v1", CRIO_134)
    assert new.will_mount and _files(new) == {"w.bin": 1} and new.layers_hidden == 1


@pytest.mark.parametrize("version", CRIO_ALL)
def test_crio_skips_a_layer_with_an_empty_title(tmp_path: Path, version: str) -> None:
    """An empty title names nothing: the layer is skipped (its filepath is not read), the rest mounts."""
    layout = _artifact(tmp_path, [
        (b"hidden", {ANNOTATION_TITLE: "", "org.cnai.model.filepath": "h.bin", "org.cncf.model.filepath": "h.bin"},
         "weight.v1.raw"),
        (b"shown", {ANNOTATION_TITLE: "s.bin"}, "weight.v1.raw"),
    ])
    r = check(layout, "v1", version)
    assert r.will_mount and _files(r) == {"s.bin": 5} and r.layers_hidden == 1
    assert any("has an empty title" in w and "skips it" in w for w in r.warnings)
    out = tmp_path / "mnt"
    mount(layout, "v1", out, version)
    assert [p.name for p in out.iterdir()] == ["s.bin"]


@pytest.mark.parametrize("version", ["cri-o@1.31", "cri-o@1.32"])
def test_crio_before_133_mounts_no_artifacts(tmp_path: Path, version: str) -> None:
    _, layout = _layout(tmp_path)
    r = check(layout, "v1", version)
    assert not r.will_mount and "mounts only images (artifacts from CRI-O 1.33)" in r.reasons[0]
    car = build_modelcar(layout, "v1", tag="car")
    assert check(layout, car.digest, version).will_mount


# -- CRI-O: image or artifact by version -------------------------------------------------------------
def _image_store(tmp_path: Path, **shape) -> LayoutStore:
    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [[Entry("models", "dir", mode=0o755), Entry("models/f", data=b"f")]], **shape)
    return layout


def test_an_image_with_artifact_type_is_an_artifact_on_133_and_an_image_from_134(tmp_path: Path) -> None:
    layout = _image_store(tmp_path, artifact_type=Family.CNCF.artifact_type)
    old = check(layout, "v1", CRIO_133)
    assert old.kind == "artifact" and not old.will_mount and "nothing would be mounted" in old.reasons[0]
    for version in ("cri-o@1.34", "cri-o"):
        new = check(layout, "v1", version)
        assert new.kind == "image" and new.will_mount and _files(new) == {"models/f": 1}


@pytest.mark.parametrize("shape", [{"config_media_type": DOCKER_CONFIG}, {"config_media_type": None}])
def test_an_oci_manifest_without_the_oci_config_type(shape: dict, registry, unique_repo) -> None:
    """containers/image refuses it as an image and CRI-O's artifact path takes it for one by its
    shape (no artifactType): every CRI-O version fails to pull it; with an artifactType 1.34+
    falls back to the artifact path (1.33 goes there at once). containerd does not look. (On the
    registry: a layout refuses to store a config descriptor without mediaType.)"""
    layout = open_store_target(f"{registry.host}/{unique_repo}:v1", for_write=True).store
    push_image(layout, "v1", [[Entry("models", "dir", mode=0o755), Entry("models/f", data=b"f")]], **shape)
    for version in CRIO_ALL:
        r = check(layout, "v1", version)
        assert r.kind == "image" and not r.will_mount
        assert "containers/image refuses it as an image (config media type" in r.reasons[0]
        assert "takes it for an image by its shape: the pull fails" in r.reasons[0]
    push_image(layout, "typed", [[Entry("models", "dir", mode=0o755), Entry("models/f", data=b"f")]], **shape,
               artifact_type=Family.CNCF.artifact_type)
    assert "tries an image pull first" not in " ".join(check(layout, "typed", CRIO_133).warnings)
    for version in ("cri-o@1.34", "cri-o"):
        r = check(layout, "typed", version)
        assert r.kind == "artifact" and not r.will_mount  # nothing named in this one
        assert any("tries an image pull first, which fails (config media type" in w for w in r.warnings)
    for version in CONTAINERD_WITH_VOLUMES:
        r = check(layout, "v1", version)
        assert r.will_mount and _files(r) == {"models/f": 1}
        assert any("containerd does not check the config media type" in w for w in r.warnings)


# -- containerd by version --------------------------------------------------------------------------
@pytest.mark.parametrize("version", CONTAINERD_WITHOUT)
def test_containerd_before_21_has_no_image_volumes(tmp_path: Path, version: str) -> None:
    _, layout = _layout(tmp_path)
    build_modelcar(layout, "v1", tag="car")
    r = check(layout, "car", version)
    assert not r.will_mount and "has no image volumes (containerd 2.1 or later)" in r.reasons[0]
    with pytest.raises(OcibridgeError, match=f"{version} would not mount"):
        mount(layout, "car", tmp_path / "mnt", version)


def test_containerd_21_mounts_a_modelcar_without_sub_path_22_with(tmp_path: Path) -> None:
    _, layout = _layout(tmp_path)
    build_modelcar(layout, "v1", tag="car")
    old = check(layout, "car", "containerd@2.1")
    assert old.will_mount and old.sub_path is None and any("no image-volume subPath" in w for w in old.warnings)
    assert check(layout, "car", "containerd@2.2").sub_path == "models"
    pod = yaml.safe_load(volume_yaml(layout, "car", "r.example/m:car", runtime="containerd@2.1"))
    assert "subPath" not in pod["spec"]["containers"][0]["volumeMounts"][0]
    pod = yaml.safe_load(volume_yaml(layout, "car", "r.example/m:car", runtime="containerd@2.2"))
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "models"
    assert not any("subPath" in w for w in check(layout, "car", "containerd@2.2").warnings)


# -- image layers: the same on every version with image volumes --------------------------------------
IMAGE_VERSIONS = ("cri-o@1.33", "cri-o@1.34", "cri-o", "containerd@2.1", "containerd@2.2")


@pytest.mark.parametrize("version", IMAGE_VERSIONS)
def test_special_bits_owners_and_leaving_links_are_kept(tmp_path: Path, version: str) -> None:
    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [[
        Entry("models", "dir", mode=0o755), Entry("models/su", data=b"x", mode=0o4755, uid=1000, gid=2000),
        Entry("models/tmp", "dir", mode=0o1777), Entry("models/etc", "sym", "/etc/passwd"),
        Entry("models/up", "sym", "../../.."),
    ]])
    r = check(layout, "v1", version)
    assert r.will_mount, r.reasons
    tree = {e.path: (e.type, e.mode, e.uid, e.gid, e.target) for e in r.tree}
    assert tree["models/su"] == ("file", 0o4755, 1000, 2000, None)
    assert tree["models/tmp"] == ("dir", 0o1777, 0, 0, None)
    assert tree["models/etc"][4] == "/etc/passwd" and tree["models/up"][4] == "../../.."
    leaving = [w for w in r.warnings if "points outside the mount" in w]
    assert len(leaving) == 2 and "models/etc -> /etc/passwd" in leaving[0]
    out = tmp_path / "mnt"
    mount(layout, "v1", out, version)
    st = (out / "models" / "su").stat()
    assert st.st_mode & 0o7777 == 0o4755 and (st.st_uid, st.st_gid) == (1000, 2000)  # the suite runs as root
    assert (out / "models" / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert str((out / "models" / "etc").readlink()) == "/etc/passwd"


@pytest.mark.parametrize("version", IMAGE_VERSIONS)
def test_a_hard_link_across_layers_does_not_unpack(tmp_path: Path, version: str) -> None:
    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [[Entry("models", "dir", mode=0o755), Entry("models/a", data=b"a")],
                              [Entry("models/b", "link", "models/a")]])
    r = check(layout, "v1", version)
    assert not r.will_mount and "hard link to models/a of an earlier layer" in r.reasons[0]
    with pytest.raises(OcibridgeError, match="would not mount|earlier layer"):
        mount(layout, "v1", tmp_path / "mnt", version)
    assert not (tmp_path / "mnt").exists()


# -- the CLI -------------------------------------------------------------------------------------
def test_check_lists_per_layer_what_the_version_does(tmp_path: Path, capsys) -> None:
    _artifact(tmp_path, [(b"w", {"org.cnai.model.filepath": "w.bin"}, "weight.v1.raw")])
    ref = f"oci:{tmp_path / 'crafted'}:v1"
    assert main(["k8s", "check", ref, "--runtime", CRIO_133]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{ref}: will mount on cri-o@1.33 (artifact)"
    assert "  layer 0: bind-mounted as the file w.bin (named by org.cnai.model.filepath)" in out
    assert main(["k8s", "check", ref, "--runtime", CRIO_134, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["runtime"] == "cri-o" and doc["runtimeVersion"] == "1.34" and doc["layers"] == ["layer 0: skipped"]


def test_volume_json_is_the_pod_as_json(tmp_path: Path, capsys, registry, unique_repo) -> None:
    from tests.modelgen import make_model

    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    assert main(["k8s", "modelcar", ref, "--tag", "car"]) == 0
    capsys.readouterr()
    car = f"{registry.host}/{unique_repo}:car"
    for extra in ([], ["--snippet"], ["--runtime", "containerd@2.1"]):
        assert main(["k8s", "volume", car, "--runtime", "containerd", *extra]) == 0
        as_yaml = yaml.safe_load(capsys.readouterr().out)
        assert main(["k8s", "volume", car, "--runtime", "containerd", *extra, "--json"]) == 0
        as_json = json.loads(capsys.readouterr().out)
        assert as_json == as_yaml and ("volumes" in as_json if extra == ["--snippet"] else as_json["kind"] == "Pod")
    assert main(["k8s", "volume", f"oci:{tmp_path}/none:v1", "--json"]) == 1  # bad input: one error line
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error:") and err.count("\n") == 1


def test_mount_says_what_it_cannot_reproduce_without_root(tmp_path: Path, capsys, monkeypatch) -> None:
    """Run as another user, mount cannot give files the layers' owners: it says so (the suite
    runs as root, so the branch is reached by making the effective uid look like a user's)."""
    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [[Entry("models", "dir", mode=0o755),
                               Entry("models/su", data=b"x", mode=0o4755, uid=1000, gid=2000)]])
    monkeypatch.setattr("ocibridge.layers.apply.os.geteuid", lambda: 4242)
    out = tmp_path / "mnt"
    assert main(["k8s", "mount", f"oci:{layout.root}:v1", str(out), "--runtime", "containerd"]) == 0
    text = capsys.readouterr().out
    assert "not reproduced: ownership: not running as root" in text
    assert (out / "models" / "su").stat().st_mode & 0o7777 == 0o4755  # the bits are still there
    assert main(["k8s", "mount", f"oci:{layout.root}:v1", str(tmp_path / "m2"), "--runtime", "cri-o", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notReproduced"][0].startswith("ownership:")


@pytest.mark.parametrize("artifact_type", [None, Family.CNCF.artifact_type])
def test_a_raw_typed_layer_is_unpacked_by_its_content_on_crio(tmp_path: Path, artifact_type) -> None:
    """containers/image does not look at layer media types (podman unpacks a tar typed `raw`:
    tests/k8s/test_k8s_runtimes.py). When the content is not a tar the image pull fails: without an
    artifactType CRI-O's artifact path takes the manifest for an image too and the pull fails on
    every version; with one, 1.33 takes the artifact path at once and 1.34+ after the failed image
    pull. containerd refuses the layer type."""
    import hashlib

    layout = LayoutStore(tmp_path / "img", create=True)
    weights = b"\x00not a tar, a weight file" * 40
    layer = Descriptor.for_bytes("application/vnd.cncf.model.weight.v1.raw", weights,
                                 annotations={ANNOTATION_TITLE: "w.bin"})
    layout.push_blob(layer, io.BytesIO(weights))
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {
        "type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(weights).hexdigest()]}}).encode()
    cdesc = Descriptor.for_bytes("application/vnd.oci.image.config.v1+json", cfg)
    layout.push_blob(cdesc, io.BytesIO(cfg))
    m = Manifest(config=cdesc, layers=[layer], artifactType=artifact_type).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, m), m, "v1")
    if artifact_type is None:
        for version in CRIO_ALL:
            r = check(layout, "v1", version)
            assert r.kind == "image" and not r.will_mount and "not a readable tar" in r.reasons[0]
    else:
        for version in CRIO_ALL:
            r = check(layout, "v1", version)
            assert r.kind == "artifact" and r.will_mount and _files(r) == {"w.bin": len(weights)}
            tried = any("tries an image pull first, which fails (layer 0 is not a readable tar" in w
                        for w in r.warnings)
            assert tried == (version != CRIO_133)
            out = tmp_path / f"mnt-{version}"
            mount(layout, "v1", out, version)
            assert (out / "w.bin").read_bytes() == weights
    r = check(layout, "v1", "containerd")
    assert not r.will_mount and "not an image tar layer" in r.reasons[0]


@pytest.mark.parametrize("version", IMAGE_VERSIONS)
def test_fifos_are_made_device_nodes_only_named(tmp_path: Path, version: str) -> None:
    """The runtimes create FIFOs and device nodes as root; k8s mount makes the FIFO and names the
    device node instead of creating it on this machine."""
    import stat

    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [[Entry("models", "dir", mode=0o755), Entry("models/p", "fifo", mode=0o640),
                               Entry("models/sda", "blk", "8:0", mode=0o666)]])
    r = check(layout, "v1", version)
    assert r.will_mount, r.reasons
    assert {(e.path, e.type, e.target) for e in r.tree if e.path != "models"} == {
        ("models/p", "fifo", None), ("models/sda", "blockdev", "8:0")}
    assert any("models/sda is a device node (blockdev 8:0)" in w for w in r.warnings)
    done = mount(layout, "v1", tmp_path / "mnt", version)
    assert stat.S_ISFIFO((tmp_path / "mnt" / "models" / "p").lstat().st_mode)
    assert not (tmp_path / "mnt" / "models" / "sda").exists()
    assert done.not_reproduced == ["device node models/sda (blockdev 8:0): the runtime creates it, k8s mount does not"]


@pytest.mark.parametrize("version", IMAGE_VERSIONS)
def test_directories_a_layer_implies(tmp_path: Path, version: str) -> None:
    """containers/storage (CRI-O) makes the parents of a layer's entries, and of its whiteouts,
    afresh (0755, root); containerd keeps the lower directory's mode and owner (both seen on the
    real runtimes in tests/k8s/test_k8s_runtimes.py)."""
    layout = LayoutStore(tmp_path / "img", create=True)
    push_image(layout, "v1", [
        [Entry("models", "dir", mode=0o700, uid=5), Entry("models/d", "dir", mode=0o750, uid=6, gid=7),
         Entry("models/w", "dir", mode=0o711, uid=8), Entry("models/w/x", data=b"x")],
        [Entry("models/d/new", data=b"n"), Entry("models/w/.wh.x")],
    ])
    r = check(layout, "v1", version)
    assert r.will_mount, r.reasons
    dirs = {e.path: (e.mode, e.uid, e.gid) for e in r.tree if e.type == "dir"}
    if version.startswith("cri-o"):
        assert dirs == {"models": (0o755, 0, 0), "models/d": (0o755, 0, 0), "models/w": (0o755, 0, 0)}
    else:
        assert dirs == {"models": (0o700, 5, 0), "models/d": (0o750, 6, 7), "models/w": (0o711, 8, 0)}
    out = tmp_path / "mnt"
    mount(layout, "v1", out, version)
    st = (out / "models" / "d").stat()
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == dirs["models/d"]


def test_a_grouped_cnai_push_fails_on_133_and_hides_the_group_on_134(tmp_path: Path) -> None:
    """ocibridge's own grouped push: the weight group spans two directories, so its filepath is
    the model's root ('.'): CRI-O 1.33 would bind-mount the tar over the mount path."""
    from ocibridge.oci.mediatypes import Kind, Variant

    _, layout = _layout(tmp_path, variants={Kind.WEIGHT: Variant.TAR}, group={Kind.WEIGHT})
    old = check(layout, "v1", CRIO_133)
    assert not old.will_mount and old.reasons == ["layer 0 is named '.', which is the mount path itself"]
    new = check(layout, "v1", CRIO_134)
    assert new.will_mount and new.layers_hidden == 1 and "model.safetensors" not in _files(new)
    assert not any("--media-types" in w for w in new.warnings)  # cncf would mount the tar over the mount path
    assert any("1 tar layer(s): CRI-O mounts none of their files" in w and "k8s modelcar" in w for w in new.warnings)
