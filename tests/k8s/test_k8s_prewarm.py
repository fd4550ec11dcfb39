"""``ocibridge k8s prewarm REF…`` (issue 45): a DaemonSet that makes every selected node pull the
models ahead of the workload. Every document passes the Kubernetes client's models (round trip
to the same dict) and ``kubectl apply --dry-run=client`` (tests/support/kubeapi.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from tests.k8s.test_k8s_apply import _login, own_credentials  # noqa: F401 - a fixture used by name
from tests.modelgen import make_model
from tests.support.cli_run import digest_of
from tests.support.kubeapi import checked_documents

KINDS = {"DaemonSet", "Secret"}


def k8s_checked(tmp_path: Path, text: str) -> list[dict]:
    return checked_documents(tmp_path, text, KINDS)


@pytest.fixture
def models(tmp_path, capsys, registry, unique_repo):
    """Two ModelPack artifacts (cncf, which CRI-O mounts) and the ModelCar image of the first."""
    first, second = f"{registry.host}/{unique_repo}/a:v1", f"{registry.host}/{unique_repo}/b:v1"
    assert main(["push", str(make_model(tmp_path / "a")), first, "-q", "--media-types", "cncf"]) == 0
    assert main(["push", str(make_model(tmp_path / "b")), second, "-q", "--media-types", "cncf"]) == 0
    assert main(["k8s", "modelcar", first, "--tag", "car"]) == 0
    capsys.readouterr()
    return first, second, f"{registry.host}/{unique_repo}/a:car"


def test_image_volumes_of_a_sleeping_container(tmp_path, capsys, models):
    first, second, _ = models
    assert main(["k8s", "prewarm", first, second, "--selector", "nvidia.com/gpu.present=true",
                 "--selector", "kubernetes.io/arch=amd64", "--namespace", "models"]) == 0
    out, err = capsys.readouterr()
    [ds] = k8s_checked(tmp_path, out)
    assert "kubectl rollout status ds/model-prewarm -n models" in out
    assert "loopback name" in err  # the test registry is 127.0.0.1:PORT
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true", "kubernetes.io/arch": "amd64"}
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    [hold] = spec["containers"]
    assert hold["image"] == "busybox:1.36" and hold["command"] == ["sleep", "infinity"]
    pinned = [v["image"]["reference"] for v in spec["volumes"]]
    repo_of = {r.rsplit(":", 1)[0].rsplit("@", 1)[0] for r in pinned}
    assert repo_of == {first.rsplit(":", 1)[0], second.rsplit(":", 1)[0]}
    for ref, tagged in zip(pinned, (first, second), strict=True):  # pinned by digest
        assert ref.endswith("@" + digest_of(capsys, tagged))
    assert [m["mountPath"] for m in hold["volumeMounts"]] == ["/prewarm/0", "/prewarm/1"]
    assert all(m["readOnly"] for m in hold["volumeMounts"])
    assert hold["readinessProbe"]["exec"]["command"] == ["ls", "/prewarm/0", "/prewarm/1"]
    assert spec["securityContext"]["runAsNonRoot"] and hold["securityContext"]["readOnlyRootFilesystem"]
    assert "initContainers" not in spec and "imagePullSecrets" not in spec

    assert main(["k8s", "prewarm", first, "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["kind"] == "DaemonSet" and as_json["spec"]["template"]["spec"]["volumes"][0]["image"]


def test_modelcar_images_as_init_containers(tmp_path, capsys, models):
    first, _, car = models
    # containerd before 2.1 has no image volumes: the ModelCar image, pulled as an init container
    assert main(["k8s", "prewarm", car, "--runtime", "containerd@1.7", "--name", "llm-prewarm"]) == 0
    out = capsys.readouterr().out
    [ds] = k8s_checked(tmp_path / "a", out)
    assert "ModelCar images as init containers" in out and "kubectl rollout status ds/llm-prewarm" in out
    spec = ds["spec"]["template"]["spec"]
    tools, model = spec["initContainers"]
    assert tools["command"] == ["cp", "/bin/busybox", "/prewarm-tools/busybox"]
    assert model["image"].endswith("@" + digest_of(capsys, car))
    assert model["command"] == ["/prewarm-tools/busybox", "true"]
    assert spec["volumes"] == [{"name": "tools", "emptyDir": {"sizeLimit": "16Mi"}}]
    assert "volumeMounts" not in spec["containers"][0]

    # a ModelPack artifact is no container image
    assert main(["k8s", "prewarm", first, "--mode", "modelcar"]) == 1
    assert "build its ModelCar image with `ocibridge k8s modelcar REF --tag TAG`" in capsys.readouterr().err
    # image volumes where the runtime has none
    assert main(["k8s", "prewarm", car, "--runtime", "containerd@2.0", "--mode", "volume"]) == 1
    assert "has no image volumes" in capsys.readouterr().err
    # the ModelCar image as an image volume, where the runtime has them (subPath: its files at the mount)
    assert main(["k8s", "prewarm", car, "--runtime", "containerd@2.2"]) == 0
    [ds] = k8s_checked(tmp_path / "b", capsys.readouterr().out)
    assert ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "models"


def test_refusals(tmp_path, capsys, models):
    first, _, _ = models
    cases = [
        (["k8s", "prewarm", first, "--selector", "no-equals"], 2, "--selector 'no-equals'"),
        (["k8s", "prewarm", first, "--name", "Bad_Name"], 2, "--name 'Bad_Name'"),
        (["k8s", "prewarm", first, "--create-pull-secret"], 2, "needs --image-pull-secret"),
        (["k8s", "prewarm", first, "--image-pull-secret", "Bad_Name"], 2, "--image-pull-secret 'Bad_Name'"),
        (["k8s", "prewarm", f"oci:{tmp_path}/layout:v1"], 2, "is not a registry reference"),
    ]
    for args, code, message in cases:
        assert main(args) == code, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


@pytest.mark.usefixtures("own_credentials")
def test_pull_secret_from_the_stored_login(tmp_path, capsys, monkeypatch, auth_registry, unique_repo):
    _login(monkeypatch, auth_registry)
    ref = f"{auth_registry.host}/{unique_repo}:v1"
    assert main(["push", str(make_model(tmp_path / "m")), ref, "-q", "--media-types", "cncf"]) == 0
    capsys.readouterr()
    assert main(["k8s", "prewarm", ref, "--image-pull-secret", "regcred", "--create-pull-secret",
                 "--namespace", "models"]) == 0
    out, err = capsys.readouterr()
    secret, ds = k8s_checked(tmp_path, out)
    assert ds["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert secret["metadata"] == {"name": "regcred", "namespace": "models"}
    auth = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"][auth_registry.host]
    assert base64.b64decode(auth["auth"]).decode() == f"{auth_registry.username}:{auth_registry.password}"
    assert "holds registry credentials" in err


def test_the_compile_cache_step_restores_the_nodes_cache_verified(tmp_path, capsys, models):
    """``--warm-image``: an init container per model restores its compile cache for the node's
    key into the node's directory, verifying with the key a ConfigMap holds; its command line,
    run here as the node would run it, restores the cache byte for byte, and with the wrong key
    restores nothing and still exits 0 (the weights' prewarm goes on)."""
    import os
    import subprocess
    import sys

    from tests.signing_keys import key_pair
    from tests.warm.test_warm import _cache_dir, _files

    first, second, _ = models
    private, public = key_pair(tmp_path / "k")
    cache = _cache_dir(tmp_path / "compiled")
    assert main(["warm", "save", first, str(cache), "--engine", "inductor", "--device", "cpu", "--key", str(private),
                 "--option", "mode=default"]) == 0
    capsys.readouterr()
    assert main(["k8s", "prewarm", first, second, "--warm-image", "registry.example/vllm-ocibridge:0.33.1",
                 "--warm-verify-key", "configmap/warm-keys/warm.pub", "--warm-engine", "inductor",
                 "--warm-device", "cpu", "--warm-option", "mode=default", "--plain-http",
                 "--image-pull-secret", "regcred"]) == 0
    out = capsys.readouterr().out
    [ds] = k8s_checked(tmp_path / "a", out)
    assert "Compile caches: each node restores the inductor cache of each model for its own key into " \
           "/var/lib/ocibridge/warm/model-prewarm (verified with configmap warm-keys's warm.pub)" in out
    spec = ds["spec"]["template"]["spec"]
    steps = spec["initContainers"]
    assert [s["name"] for s in steps] == ["warm-0", "warm-1"]
    assert {s["image"] for s in steps} == {"registry.example/vllm-ocibridge:0.33.1"}
    assert steps[0]["args"][0] == f"{first.rsplit(':', 1)[0]}@{digest_of(capsys, first)}"  # pinned
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["warm-cache"]["hostPath"] == {"path": "/var/lib/ocibridge/warm/model-prewarm",
                                                 "type": "DirectoryOrCreate"}
    assert volumes["warm-key"]["configMap"] == {"name": "warm-keys", "items": [{"key": "warm.pub",
                                                                                "path": "warm.pub"}]}
    assert volumes["docker-config"]["secret"]["secretName"] == "regcred"
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in steps[0]["env"]}  # (cpu: no GPU asked)

    def run_step(step: dict, node: Path, key: Path) -> subprocess.CompletedProcess:
        args = [str(node) if a == "/warm-cache" else str(key) if a == "/warm-key/warm.pub" else a
                for a in step["args"]]
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run([*step["command"], *args], capture_output=True, text=True, env=env, timeout=300)

    done = run_step(steps[0], tmp_path / "node", public)
    assert done.returncode == 0 and "signature verified" in done.stdout, done.stderr
    assert _files(tmp_path / "node") == _files(cache)
    _, stranger = key_pair(tmp_path / "other")
    refused = run_step(steps[0], tmp_path / "node-2", stranger)
    assert refused.returncode == 0 and not (tmp_path / "node-2").exists()
    assert "none verifies with" in refused.stderr  # (refused for its signature, not for anything else)
    assert "nothing restored for " + steps[0]["args"][0] in refused.stderr and "Traceback" not in refused.stderr

    for args, message in ((["--warm-image", "img"], "--warm-image needs --warm-verify-key"),
                          (["--warm-verify-key", "configmap/k/warm.pub"], "go with --warm-image IMAGE"),
                          (["--warm-image", "img", "--warm-verify-key", "keys/warm.pub"],
                           "--warm-verify-key 'keys/warm.pub': secret/NAME/ITEM")):
        assert main(["k8s", "prewarm", first, *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
