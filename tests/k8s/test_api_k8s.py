"""``ocibridge k8s`` from Python (ocibridge.k8s_*): the same documents the command prints, as
objects, against the registry fixture; and the PyYAML writer they are printed with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import ocibridge
from ocibridge.cli import main
from ocibridge.core.yamldocs import dump_all
from ocibridge.errors import UsageError
from tests.modelgen import make_model, tree
from tests.support.data import data

KEY = data("containers-policy", "cosign.pub")


@pytest.fixture
def pushed(tmp_path, registry, unique_repo) -> tuple[Path, str]:
    """A model pushed to the registry (as a ModelPack artifact, which CRI-O mounts): its files, its tag."""
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(model), ref)
    return model, ref


def _cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_volume_pod_is_pinned_by_digest_and_is_what_the_command_prints(capsys, pushed, registry, unique_repo):
    _, ref = pushed
    car = ocibridge.k8s_modelcar(ref, ocibridge.ModelCarOptions(tag="car"))
    assert car.kserve is None and car.to_yaml() == "" and car.tag == "car"
    car_ref = f"{registry.host}/{unique_repo}:car"

    pod = ocibridge.k8s_volume(car_ref, ocibridge.PodOptions(name="reader"), runtime="containerd@2.2")
    pinned = f"{registry.host}/{unique_repo}@{car.digest}"
    assert pod.pinned == (pinned,)
    doc = pod.as_dict()
    assert doc["kind"] == "Pod" and doc["metadata"]["name"] == "reader"
    assert doc["spec"]["volumes"][0]["image"] == {"reference": pinned, "pullPolicy": "IfNotPresent"}
    assert doc["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "models"
    assert "loopback name" in pod.warnings[0] and not pod.holds_credentials and pod.closing_warnings == ()
    assert yaml.safe_load(pod.to_yaml()) == doc
    assert pod.header.startswith(f"# Image volume for {pinned}\n")

    argv = ["k8s", "volume", car_ref, "--name", "reader", "--runtime", "containerd@2.2"]
    assert _cli(capsys, *argv) == pod.to_yaml()
    assert json.loads(_cli(capsys, *argv, "--json")) == doc


def test_check_says_mountable_as_the_command_does(capsys, pushed):
    _, ref = pushed
    result = ocibridge.k8s_check(ref)
    assert result.will_mount and result.kind == "artifact" and result.reasons == ()
    assert result.runtime == "cri-o" and result.runtime_label.startswith("cri-o@")
    assert {e.path for e in result.tree if e.type == "file"} >= {"model.safetensors", "scripts/run.sh"}
    assert "not evaluated" in result.node_policy and not result.node_policy_refused
    assert json.loads(_cli(capsys, "k8s", "check", ref, "--json")) == result.as_dict()

    refused = ocibridge.k8s_check(ref, runtime="containerd")
    assert not refused.will_mount and "not an image tar layer" in refused.reasons[0]


def test_check_with_a_node_policy_that_rejects(tmp_path, pushed):
    _, ref = pushed
    node = tmp_path / "node-policy.json"
    node.write_text(json.dumps({"default": [{"type": "reject"}]}))
    result = ocibridge.k8s_check(ref, node_policy=node)
    assert not result.will_mount and result.node_policy_refused
    assert result.reasons[-1] == result.node_policy and "CRI-O refuses the pull" in result.node_policy


def test_mount_lays_out_the_files_as_the_runtime_would(tmp_path, pushed):
    model, ref = pushed
    out = tmp_path / "mounted"
    done = ocibridge.k8s_mount(ref, out)
    assert done.directory == str(out) and "model.safetensors" in done.files
    assert (out / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    assert done.as_dict() == {"files": list(done.files), "notReproduced": list(done.not_reproduced)}
    # CRI-O mounts every layer blob as a file with mode 0644 (no executable bit)
    assert (out / "scripts" / "run.sh").stat().st_mode & 0o777 == 0o644

    car = ocibridge.k8s_modelcar(ref, ocibridge.ModelCarOptions(tag="car2"))
    image = tmp_path / "image"
    ocibridge.k8s_mount(ref.rsplit(":", 1)[0] + f"@{car.digest}", image, runtime="containerd")
    assert tree(image / "models") == tree(model)


def test_modelcar_with_kserve_pins_the_image(capsys, pushed, registry, unique_repo):
    _, ref = pushed
    done = ocibridge.k8s_modelcar(ref, kserve=ocibridge.KServeOptions("llm"),
                                  pull_secrets=ocibridge.PullSecrets(["regcred"]))
    [isvc] = done.kserve.documents if done.kserve else ()
    assert isvc["kind"] == "InferenceService"
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == f"oci+native://{registry.host}/{unique_repo}@{done.digest}"
    assert isvc["spec"]["predictor"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert done.as_dict() == {"digest": done.digest, "mediaType": done.media_type, "size": done.size,
                              "objects": [isvc]}
    assert yaml.safe_load(done.to_yaml()) == isvc and done.to_yaml().startswith("# KServe image-volume mode")
    printed = json.loads(_cli(capsys, "k8s", "modelcar", ref, "--kserve", "llm", "--image-pull-secret", "regcred",
                              "--json"))
    assert printed == done.as_dict()  # reproducible: the same image again


def test_prewarm_serve_and_policy_documents_have_the_kinds_expected(tmp_path, pushed, registry):
    _, ref = pushed
    prewarm = ocibridge.k8s_prewarm([ref], ocibridge.PrewarmOptions(selector={"kubernetes.io/arch": "amd64"},
                                                                   namespace="models"))
    [ds] = yaml.safe_load_all(prewarm.to_yaml())
    assert ds["kind"] == "DaemonSet" and ds == prewarm.as_dict()
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert prewarm.pinned[0].startswith(ref.rsplit(":", 1)[0] + "@sha256:")
    assert "kubectl rollout status ds/model-prewarm -n models" in prewarm.header

    serve = ocibridge.k8s_serve([f"{registry.host}/models"], ocibridge.K8sServeOptions(replicas=2))
    docs = list(yaml.safe_load_all(serve.to_yaml()))
    # two replicas: one writer (Recreate, its cache on a claim, reached by the readers only) and two
    # readers pointed at it (serve.md "One writer, many readers")
    assert [d["kind"] for d in docs] == ["PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy",
                                         "Deployment", "Service"]
    assert serve.as_dict()["kind"] == "List" and len(serve.as_dict()["items"]) == 6
    writer, readers = docs[1], docs[4]
    assert writer["spec"]["replicas"] == 1 and writer["spec"]["strategy"] == {"type": "Recreate"}
    assert readers["spec"]["replicas"] == 2
    reader = readers["spec"]["template"]["spec"]["containers"][0]
    assert "--writer" in reader["args"] and reader["image"] == f"ocibridge:{ocibridge.__version__}"
    assert "&" not in serve.to_yaml()  # the labels shared by Deployment and pods are written twice, no alias

    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({"default": [{"type": "reject"}], "transports": {"docker": {
        "reg.example.com/ml": [{"type": "sigstoreSigned", "keyPath": str(KEY)}]}}}))
    policy = ocibridge.k8s_policy(policy_file)
    kinds = [d["kind"] for d in yaml.safe_load_all(policy.to_yaml())]
    assert kinds[0] == "ClusterPolicy" and set(kinds[1:]) == {"ClusterImagePolicy"}
    assert policy.as_dict()["notes"] == list(policy.notes)
    # the public key, text of several lines, is a literal block
    assert "-----BEGIN PUBLIC KEY-----\n" in policy.to_yaml() and "\\n" not in policy.to_yaml()

    keyless = ocibridge.k8s_policy(ocibridge.AdmissionSigners(images=["reg.example.com"], identity="ci@example.com",
                                                              issuer="https://accounts.example.com"),
                                   policy_controller=False)
    assert [d["kind"] for d in keyless.documents] == ["ClusterPolicy"]


def test_options_are_checked_before_anything_is_opened(registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:absent"
    with pytest.raises(UsageError, match="--create-pull-secret needs --image-pull-secret"):
        ocibridge.k8s_volume(ref, pull_secrets=ocibridge.PullSecrets(create=True))
    with pytest.raises(UsageError, match="--selector"):
        ocibridge.k8s_prewarm([ref], ocibridge.PrewarmOptions(selector=["no-value"]))
    with pytest.raises(UsageError, match="a path on this machine"):
        ocibridge.k8s_serve(["oci:/nowhere"])
    with pytest.raises(UsageError, match="Kyverno policy, the policy-controller policies or both"):
        ocibridge.k8s_policy(ocibridge.AdmissionSigners(images=["x"]), kyverno=False, policy_controller=False)


def test_yaml_reads_back_what_was_written():
    docs = [{"a": "no", "b": "1", "c": "on", "d": "", "e": None, "f": True, "g": 3, "h": [], "i": {},
             "pem": "-----BEGIN-----\nabc\n-----END-----\n", "spaces": " leading\nand trailing \n"},
            {"second": ["x", {"y": "z"}]}]
    text = dump_all(docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert "\n---\n" in text and not text.startswith("---")
    assert "pem: |\n  -----BEGIN-----\n  abc\n" in text
    assert dump_all([{"k": "v"}]) == "k: v\n"
