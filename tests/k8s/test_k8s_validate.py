"""``--validate [VERSION]`` (issue 53 item 16): what every k8s command that prints documents
prints, checked offline against the chosen Kubernetes release's OpenAPI schema (kubernetes-validate's
schemas, strict: an unknown field is refused), before anything is printed. Run as processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

import ocibridge
from tests.modelgen import make_model
from tests.support.data import data


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ), check=False)


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory) -> str:
    from tests.support.fixtures import new_repo

    ref = f"{registry.host}/{new_repo('validate')}:v1"
    ocibridge.push(str(make_model(tmp_path_factory.mktemp("validate") / "m")), ref)
    return ref


def test_an_image_volume_pod_is_valid_from_1_31_and_refused_before(pushed):
    done = run("k8s", "volume", pushed, "--validate=1.33")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["kind"] == "Pod"
    assert "ocibridge: valid for Kubernetes 1.33 (1 document(s))" in done.stderr
    # image volumes came with 1.31: 1.30's PodSpec has no such field, and nothing is printed
    old = run("k8s", "volume", pushed, "--validate", "v1.30.4")
    assert old.returncode == 1 and old.stdout == ""
    assert old.stderr == ("ocibridge: error: Kubernetes 1.30 refuses Pod model-consumer: spec.volumes[0]: "
                          "Additional properties are not allowed ('image' was unexpected)\n")
    newest = run("k8s", "volume", pushed, "--validate")
    assert newest.returncode == 0 and "valid for Kubernetes 1." in newest.stderr
    too_old = run("k8s", "volume", pushed, "--validate=1.20")
    assert too_old.returncode == 2 and "cover Kubernetes 1.25 to" in too_old.stderr


def test_every_command_printing_documents_takes_validate(pushed):
    lines = {
        "prewarm": ["k8s", "prewarm", pushed, "--validate=1.33"],
        "serve": ["k8s", "serve", "registry.example/models", "--replicas", "2", "--validate=1.33"],
        "policy": ["k8s", "policy", "--image", "registry.example/models", "--key",
                   str(data("containers-policy", "cosign.pub")), "--validate=1.33"],
    }
    kinds = {}
    for name, argv in lines.items():
        done = run(*argv)
        assert done.returncode == 0, (name, done.stderr)
        kinds[name] = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
        assert "valid for Kubernetes 1.33" in done.stderr, name
    assert kinds["prewarm"] == ["DaemonSet"]
    assert {"Deployment", "Service"} <= set(kinds["serve"])
    policy = run(*lines["policy"]).stderr
    assert "not checked (custom resources): ClusterPolicy" in policy  # not in Kubernetes' own schema


def test_the_api_names_the_field_a_version_refuses():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": "http"}]}]}}
    with pytest.raises(ocibridge.OcibridgeError,
                       match=r"spec\.containers\[0\]\.ports\[0\]\.containerPort: 'http' is not of type 'integer'"):
        ocibridge.k8s_validate([pod], "1.33")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert ocibridge.k8s_validate([pod], "1.33").as_dict() == {
        "kubernetesVersion": "1.33", "documents": [{"kind": "Pod", "name": "p", "checked": True}]}
