"""`k8s modelcar --base IMAGE`: a ModelCar image KServe's sidecar mode can run. The base is a
one-layer busybox image built here from Debian's busybox-static and pushed to the test registry
(nothing from the internet); podman runs the built image's shell, and its /models equals what
`k8s mount` lays out. The InferenceService snippet passes `kubectl apply --dry-run=client`."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from ocibridge.cli import main
from ocibridge.places.locate import open_target as open_store_target
from tests.k8s_images import Entry, push_image
from tests.modelgen import make_model
from tests.support.kubeapi import kubectl_dry_run

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "ls", "ln", "sleep", "find", "sort", "cat")


def push_busybox(registry_host: str) -> str:
    """A busybox image (/bin/busybox and applet links) in the test registry; its reference."""
    assert BUSYBOX.is_file(), "busybox-static is missing: apt-get install -y busybox-static (scripts/test does)"
    ref = f"{registry_host}/base/busybox-{uuid.uuid4().hex[:8]}:1"
    t = open_store_target(ref, for_write=True)
    push_image(t.store, t.reference, [[Entry("bin", "dir", mode=0o755),
                                       Entry("bin/busybox", data=BUSYBOX.read_bytes(), mode=0o755),
                                       *(Entry(f"bin/{a}", "sym", "busybox") for a in APPLETS)]])
    return ref


def _listing(root: Path) -> list[str]:
    return sorted(["."] + [f"./{p.relative_to(root)}" for p in root.rglob("*")])


def test_modelcar_on_a_base_runs_its_shell_under_podman(tmp_path, capsys, registry, unique_repo, podman):
    base = push_busybox(registry.host)
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "modelcar", ref, "--base", base, "--tag", "run", "--kserve", "llama",
                 "--image-pull-secret", "regcred"]) == 0
    out, err = capsys.readouterr()
    assert "built application/vnd.oci.image.manifest.v1+json" in err
    [isvc] = [d for d in yaml.safe_load_all(out) if d]
    image = f"{registry.host}/{unique_repo}:run"
    t = open_store_target(image)
    top = t.store.resolve(t.reference)
    assert isvc["spec"]["predictor"] == {
        "model": {"modelFormat": {"name": "huggingface"},
                  "storageUri": f"oci://{registry.host}/{unique_repo}@{top.digest}"},
        "imagePullSecrets": [{"name": "regcred"}]}
    assert "inferenceservice.serving.kserve.io/llama created (dry run)" in kubectl_dry_run(tmp_path / "k", out)

    manifest = json.loads(t.store.fetch_bytes(top))
    config = json.loads(t.store.fetch_bytes(t.store.resolve(t.reference).model_copy(
        update={"digest": manifest["config"]["digest"], "size": manifest["config"]["size"],
                "mediaType": manifest["config"]["mediaType"]})))
    b = open_store_target(base)
    base_manifest = json.loads(b.store.fetch_bytes(b.store.resolve(b.reference)))
    assert manifest["layers"][:1] == base_manifest["layers"]  # the base's layers first, unchanged
    assert len(manifest["layers"]) > 1 and (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["rootfs"]["diff_ids"] == [base_manifest["layers"][0]["digest"],
                                            *(d["digest"] for d in manifest["layers"][1:])]

    mounted = tmp_path / "mounted"
    assert main(["k8s", "mount", image, str(mounted), "--runtime", "containerd"]) == 0
    podman.pull(image)
    seen = podman.run(image, "sh", "-c", "cd /models && find . | sort")
    assert sorted(seen.split()) == _listing(mounted / "models")
    assert (mounted / "bin" / "busybox").is_file()


def test_data_only_modelcar_gets_the_image_volume_scheme(tmp_path, capsys, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "modelcar", ref, "--tag", "data", "--kserve", "llama", "--json"]) == 0
    [isvc] = json.loads(capsys.readouterr().out)["objects"]
    assert isvc["spec"]["predictor"]["model"]["storageUri"].startswith(f"oci+native://{registry.host}/")


@pytest.mark.parametrize("args, message", [
    (["--kserve", "Bad_Name"], "--kserve 'Bad_Name'"),
    (["--create-pull-secret"], "--create-pull-secret needs --kserve NAME"),
])
def test_modelcar_refusals(tmp_path, capsys, args, message):
    assert main(["k8s", "modelcar", "r.example/m:v1", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_base_that_is_not_an_image_is_refused(tmp_path, capsys, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "modelcar", ref, "--base", ref, "--tag", "x"]) == 1
    assert "not a container image" in capsys.readouterr().err


def test_busybox_is_installed() -> None:
    assert shutil.which("busybox") or BUSYBOX.is_file()
