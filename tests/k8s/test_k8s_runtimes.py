"""`k8s mount` and `k8s check` against real runtimes: a private containerd and podman (the
containers/image + containers/storage code CRI-O pulls images with) pull the images ocibridge
pushed to the test registry, unpack and mount them, and the mounted tree must equal what
ocibridge predicts: paths, types, modes (special bits included), owners, link targets and
content hashes. Hostile images too: where a runtime refuses, `check` must refuse as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runtimes import (  # as the fixtures import it
    Containerd,
    Podman,
    RuntimeRefused,
    RuntimeUnavailable,
    snapshot,
)

from ocibridge.cli import main
from ocibridge.k8s import check
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.transfer.copy import copy
from tests.k8s.test_k8s_formats import CARTONS, _package
from tests.k8s_images import DOCKER_CONFIG, Entry, push_image

SOURCES = ["directory", f"carton:{CARTONS[0].name}", "mlsteam", "ollama"]


def _predicted(ref: str, runtime: str) -> dict:
    """`k8s check`'s tree in the snapshot's shape (content hashes come from `k8s mount`)."""
    t = open_store_target(ref)
    result = check(t.store, t.reference, runtime)
    assert result.will_mount, result.reasons
    return {e.path: (e.type, e.mode, e.uid, e.gid, e.target) for e in result.tree}


def _mounted_by_us(ref: str, runtime: str, out: Path, capsys) -> tuple[dict, list[str]]:
    assert main(["k8s", "mount", ref, str(out), "--runtime", runtime, "--json"]) == 0, capsys.readouterr().err
    return snapshot(out), json.loads(capsys.readouterr().out)["notReproduced"]


def _without_hashes(tree: dict) -> dict:
    return {p: (t, m, u, g, None if t == "file" else x) for p, (t, m, u, g, x) in tree.items()}


def _agree(ref: str, seen: dict, tmp_path: Path, capsys, runtime: str, label: str) -> None:
    """`check` lists what the runtime mounted; `mount` lays out the same, but for device nodes,
    which it names instead of creating."""
    ours, untold = _mounted_by_us(ref, runtime, tmp_path / f"ours-{label}", capsys)
    devices = {p for p, node in seen.items() if node[0] in ("chardev", "blockdev")}
    assert seen and ours == {p: node for p, node in seen.items() if p not in devices}, label
    assert {n.split()[2] for n in untold if n.startswith("device node")} == devices, label
    assert _without_hashes(seen) == _predicted(ref, runtime), label


@pytest.mark.parametrize("kind", SOURCES)
def test_modelcar_images_mount_in_real_runtimes_as_predicted(
    kind: str, tmp_path: Path, capsys, registry, unique_repo, containerd: Containerd, podman: Podman
) -> None:
    base = f"{registry.host}/{unique_repo}"
    store = open_store_target(f"{base}:v1", for_write=True).store
    copy(build(_package(kind, tmp_path)), ARTIFACT_TAG, store, "v1")
    assert main(["k8s", "modelcar", f"{base}:v1", "--tag", "car"]) == 0
    assert main(["k8s", "modelcar", f"{base}:v1", "--tag", "both", "--index"]) == 0
    capsys.readouterr()
    for tag in ("car", "both"):
        ref = f"{base}:{tag}"
        containerd.pull(ref)
        with containerd.mounted(ref, tmp_path / f"ctr-{tag}") as root:
            seen = snapshot(root)
        assert any(p.startswith("models/") for p in seen)
        _agree(ref, seen, tmp_path, capsys, "containerd", f"containerd-{tag}")
        podman.pull(ref)
        with podman.mounted(ref) as root:
            assert snapshot(root) == seen, f"podman and containerd disagree on {tag}"
        _agree(ref, seen, tmp_path, capsys, "cri-o", f"cri-o-{tag}")
        assert _predicted(ref, "cri-o@1.33") == _without_hashes(seen)  # an image by its shape there too


# -- hand-made and hostile images -----------------------------------------------------------------
M = Entry("models", "dir", mode=0o755)
F = [M, Entry("models/f", data=b"f")]
D = [M, Entry("models/d", "dir", mode=0o750, uid=6), Entry("models/d/x", data=b"x")]  # a lower layer
HOSTILE: dict[str, tuple[list[list[Entry]], dict]] = {
    "special-bits-and-owners": ([[
        M, Entry("models/su", data=b"x", mode=0o4755, uid=1000, gid=2000),
        Entry("models/sg", data=b"y", mode=0o2711), Entry("models/tmp", "dir", mode=0o1777),
        Entry("models/ro", "dir", mode=0o555, uid=7, gid=8), Entry("models/ro/f", data=b"z", mode=0o400, uid=7),
    ]], {}),
    "symlink-absolute": ([[M, Entry("models/passwd", "sym", "/etc/passwd")]], {}),
    "symlink-climbing": ([[M, Entry("models/up", "sym", "../../../etc")]], {}),
    "entry-below-an-earlier-symlink": ([[M, Entry("models/l", "sym", "/tmp")], [Entry("models/l/f", data=b"t")]], {}),
    "hard-link-same-layer": ([[M, Entry("models/a", data=b"a"), Entry("models/b", "link", "models/a")]], {}),
    "hard-link-across-layers": ([[M, Entry("models/a", data=b"a")], [Entry("models/b", "link", "models/a")]], {}),
    "whiteouts": ([[M, Entry("models/d", "dir"), Entry("models/d/x", data=b"x"), Entry("models/gone", data=b"g")],
                   [Entry("models/d", "dir"), Entry("models/d/.wh..wh..opq"), Entry("models/d/new", data=b"n"),
                    Entry("models/.wh.gone")]], {}),
    "implicit-parents-in-an-upper-layer": ([[Entry("models", "dir", mode=0o700, uid=5),
                                             Entry("models/d", "dir", mode=0o750, uid=6, gid=7)],
                                            [Entry("models/d/x", data=b"x")]], {}),
    "whiteout-without-its-directory": ([D, [Entry("models/d/.wh.x", mode=0o600)]], {}),
    "opaque-without-its-directory": ([D, [Entry("models/d/.wh..wh..opq", mode=0o600), Entry("models/d/n", data=b"n")]],
                                     {}),
    "entry-below-an-earlier-symlink-to-a-directory": ([[M, Entry("models/sub", "dir", mode=0o700, uid=3),
                                                        Entry("models/l", "sym", "sub")],
                                                       [Entry("models/l/f", data=b"y")]], {}),
    "entry-below-a-symlink-of-the-same-layer": ([[M, Entry("models/sub", "dir", mode=0o711),
                                                  Entry("models/l", "sym", "sub"),
                                                  Entry("models/l/f", data=b"x")]], {}),
    "names-climbing-out-or-absolute": ([[M, Entry("models/../../up-there", data=b"u"), Entry("/abs", data=b"a"),
                                         Entry("models/sub/../here", data=b"h")]], {}),
    "whiteout-through-a-link-of-its-layer": ([D, [Entry("models/up", "sym", "."), Entry("models/up/d/.wh.x")]], {}),
    "whiteout-through-an-absolute-link": ([D, [Entry("models/up", "sym", "/models/d"), Entry("models/up/.wh.x")]],
                                          {}),
    "opaque-through-a-link-to-a-directory-of-its-layer": ([D, [Entry("models/up", "sym", "d"),
                                                               Entry("models/d/n", data=b"n"),
                                                               Entry("models/up/.wh..wh..opq")]], {}),
    "opaque-through-a-link-to-a-lower-directory": ([D, [Entry("models/up", "sym", "d"),
                                                        Entry("models/up/.wh..wh..opq")]], {}),
    "entry-below-a-same-layer-link-to-nowhere": ([[M, Entry("models/l", "sym", "/nowhere"),
                                                   Entry("models/l/f", data=b"x")]], {}),
    "fifo-and-device-nodes": ([[M, Entry("models/p", "fifo", mode=0o640),
                                Entry("models/null", "chr", "1:3", mode=0o666),
                                Entry("models/loop", "blk", "7:0", mode=0o600)]], {}),
    "config-without-media-type": ([F], {"config_media_type": None}),
    "docker-config-in-oci-manifest": ([F], {"config_media_type": DOCKER_CONFIG}),
    "modelpack-config-on-tar-layers": ([F], {"config_media_type": "application/vnd.cncf.model.config.v1+json"}),
    "image-with-artifact-type": ([F], {"artifact_type": "application/vnd.cncf.model.manifest.v1+json"}),
    # content of its own: containerd skips unpacking a layer whose snapshot (same diff_ids) exists
    "tar-content-as-a-raw-layer": ([[M, Entry("models/r", data=b"only in this case")]],
                                   {"layer_media_type": "application/vnd.cncf.model.weight.v1.raw"}),
}


def _pulled(runtime, ref: str) -> str | None:
    """None when the runtime pulled (and unpacked) ``ref``, else its error line."""
    try:
        runtime.pull(ref)
    except RuntimeRefused as e:
        return str(e)
    return None


@pytest.mark.parametrize("case", HOSTILE)
def test_hand_made_images_in_real_runtimes_as_predicted(
    case: str, tmp_path: Path, capsys, registry, unique_repo, containerd: Containerd, podman: Podman
) -> None:
    if (containerd.snapshotter, podman.driver) != ("overlayfs", "overlay"):
        pytest.fail(f"these rules are those of overlayfs, a node's snapshotter; here containerd has "
                    f"{containerd.snapshotter} and podman {podman.driver}: cannot compare", pytrace=False)
    layers, shape = HOSTILE[case]
    ref = f"{registry.host}/{unique_repo}:{case}"
    t = open_store_target(ref, for_write=True)
    push_image(t.store, case, layers, **shape)

    # containerd (overlayfs): it unpacks what check says it mounts, and nothing else
    predicted = check(t.store, case, "containerd")
    refused = _pulled(containerd, ref)
    assert (refused is None) == predicted.will_mount, (refused, predicted.reasons)
    if refused is None:
        with containerd.mounted(ref, tmp_path / "ctr") as root:
            seen = snapshot(root)
        _agree(ref, seen, tmp_path, capsys, "containerd", "containerd")

    # podman = containers/image + containers/storage, CRI-O's image pull: CRI-O 1.34+ takes the
    # image path exactly when podman can pull it, and then mounts what podman unpacks
    crio = check(t.store, case, "cri-o@1.34")
    refused = _pulled(podman, ref)
    assert (refused is None) == (crio.kind == "image" and crio.will_mount), (refused, crio.reasons, crio.warnings)
    if refused is None:
        with podman.mounted(ref) as root:
            seen = snapshot(root)
        _agree(ref, seen, tmp_path, capsys, "cri-o@1.34", "cri-o")
    elif crio.kind == "artifact":  # not an image for containers/image: 1.34 falls back, 1.33 fails or agrees
        assert any("tries an image pull first, which fails" in w for w in crio.warnings)


@pytest.mark.parametrize("runtime", [Containerd, Podman])
def test_a_missing_runtime_is_named_with_its_install_command(runtime, tmp_path: Path, monkeypatch) -> None:
    """The fixtures turn this into a failure of every runtime test (pytest.fail), never a skip."""
    monkeypatch.setenv("PATH", str(tmp_path))
    hint = r"not on PATH; install it with `apt-get install -y containerd podman`"
    with pytest.raises(RuntimeUnavailable, match=hint):
        runtime(tmp_path)
