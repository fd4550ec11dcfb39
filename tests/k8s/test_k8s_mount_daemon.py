"""``ocibridge k8s mount-daemon`` (issue 65): a DaemonSet mounting models lazily on every node and
a Pod reading one. The documents pass the Kubernetes client's models, ``kubectl apply
--dry-run=client`` and ``--validate`` (the schema of a release); the container's command line,
run on this machine as the image's entrypoint would run it, mounts the model, and SIGTERM (a
pod's end) unmounts it."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest
import yaml
from mounting import OCIBRIDGE, digests, mount_env
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.lazymount.mounttable import is_mounted
from tests.modelgen import make_bert_model
from tests.support.kubeapi import checked_documents


def checked(tmp_path, text: str) -> dict[str, dict]:
    return {d["kind"]: d for d in checked_documents(tmp_path, text)}


def test_the_daemon_set_mounts_each_model_on_the_node_and_the_pod_reads_one(tmp_path, capsys):
    qwen = "qwen=reg.example/models/qwen@sha256:" + "a" * 64
    assert main(["k8s", "mount-daemon", "reg.example/models/llama:v1", qwen,
                 "--image", "reg.example/tools/ocibridge:1", "--selector", "gpu=true", "--validate"]) == 0
    out, err = capsys.readouterr()
    assert "valid for Kubernetes" in err
    docs = checked(tmp_path, out)
    assert list(docs) == ["DaemonSet", "Pod"]
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu": "true"}
    assert [c["name"] for c in pod["containers"]] == ["mount-llama-v1", "mount-qwen"]
    first = pod["containers"][0]
    assert first["args"] == ["mount", "reg.example/models/llama:v1", "/models/llama-v1", "--foreground",
                             "--allow-other"]
    assert first["securityContext"] == {"privileged": True, "runAsUser": 0}
    mounts = {m["name"]: m for m in first["volumeMounts"]}
    assert mounts["models"] == {"name": "models", "mountPath": "/models", "mountPropagation": "Bidirectional"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["fuse"]["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
    assert volumes["models"]["hostPath"]["path"] == "/var/lib/ocibridge/models"
    assert volumes["cache"]["hostPath"]["path"] == "/var/cache/ocibridge"
    assert {"name": "OCIBRIDGE_CACHE", "value": "/var/cache/ocibridge"} in first["env"]
    reader = docs["Pod"]["spec"]
    assert reader["containers"][0]["volumeMounts"][0]["mountPropagation"] == "HostToContainer"
    assert reader["volumes"][0]["hostPath"]["path"] == "/var/lib/ocibridge/models/llama-v1"
    assert reader["nodeSelector"] == {"gpu": "true"}
    assert out.startswith("# ocibridge mount on every node labelled gpu=true: 2 model(s)")


def test_two_models_of_one_name_are_one_error_line(capsys):
    assert main(["k8s", "mount-daemon", "a.example/m:v1", "b.example/m:v1"]) != 0
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "two models are named 'm-v1': give NAME=REF" in err


@pytest.fixture
def pushed(registry, tmp_path) -> tuple[str, object]:
    src = make_bert_model(tmp_path / "src")
    ref = f"{registry.host}/{new_repo()}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0
    return ref, src


def test_the_containers_command_line_mounts_the_model_and_sigterm_unmounts_it(pushed, tmp_path, capsys):
    ref, src = pushed
    assert main(["k8s", "mount-daemon", ref, "--plain-http"]) == 0
    container = yaml.safe_load_all(capsys.readouterr().out).__next__()["spec"]["template"]["spec"]["containers"][0]
    models = tmp_path / "models"  # the host path, as the container sees it at /models (its volume: there)
    models.mkdir()
    args = [a.replace("/models/", f"{models}/") for a in container["args"]]
    env = mount_env(tmp_path / "env")
    child = subprocess.Popen([*OCIBRIDGE, *args], env=env, stderr=subprocess.PIPE, text=True)
    where = models / container["args"][2].rsplit("/", 1)[1]
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(where) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert is_mounted(where), child.stderr.read() if child.poll() is not None else "not mounted in time"
        assert digests(where) == digests(src)
        child.send_signal(signal.SIGTERM)  # what kubelet sends when the pod goes
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert not is_mounted(where)


def test_the_default_image_can_mount():
    """The image ``--image`` defaults to (the Containerfile's) has the mount extra and fuse3."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "Containerfile").read_text()
    assert re.search(r"/src\[[a-z,]*mount[a-z,]*\]", text) and re.search(r"apt-get install .*\bfuse3\b", text)


def test_a_loopback_registry_is_warned_about_as_k8s_volume_warns(capsys):
    """On a node, 127.0.0.1 is the node itself: ``k8s volume`` and ``serve`` warn, so does this (issue 90)."""
    assert main(["k8s", "mount-daemon", "127.0.0.1:5000/models/llama:v1", "reg.example/models/qwen:v1"]) == 0
    out, err = capsys.readouterr()
    assert "kind: DaemonSet" in out
    warned = [line for line in err.splitlines() if "loopback name" in line]
    assert len(warned) == 1 and "registry 127.0.0.1:5000 is a loopback name" in warned[0], err
