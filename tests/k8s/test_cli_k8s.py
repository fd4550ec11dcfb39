"""The k8s commands through the CLI, on a layout and on the real registry."""

import json

import yaml

from ocibridge.cli import main
from tests.modelgen import make_model, tree


def test_k8s_commands_end_to_end(tmp_path, capsys, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "check", ref, "--json"]) == 0
    crio = json.loads(capsys.readouterr().out)
    assert crio["willMount"] is True and crio["reference"] == ref
    assert {e["path"] for e in crio["tree"] if e["type"] == "file"} >= {"model.safetensors", "scripts/run.sh"}
    assert main(["k8s", "check", ref, "--runtime", "containerd"]) == 1
    assert "not an image tar layer" in capsys.readouterr().out
    assert main(["k8s", "modelcar", ref, "--tag", "v1-car", "--index", "--json"]) == 0
    car = json.loads(capsys.readouterr().out)
    # reproducible: the same artifact in a layout (read twice there; spooled once from the
    # registry) gives the same index digest
    assert main(["copy", ref, f"oci:{tmp_path / 'layout'}:v1", "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "modelcar", f"oci:{tmp_path / 'layout'}:v1", "--index", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == car["digest"]
    car_ref = f"{registry.host}/{unique_repo}:v1-car"
    assert main(["k8s", "check", car_ref, "--runtime", "containerd"]) == 0
    capsys.readouterr()
    assert main(["k8s", "volume", car_ref, "--runtime", "containerd"]) == 0
    pod = yaml.safe_load(capsys.readouterr().out)
    assert pod["kind"] == "Pod"
    volume = pod["spec"]["volumes"][0]["image"]
    assert volume["reference"] == f"{registry.host}/{unique_repo}@{car['digest']}"
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "models"
    # ModelPack readers of the same reference take the index's ModelPack entry: the artifact
    assert main(["inspect", car_ref, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == crio["manifest"]
    assert main(["pull", car_ref, "-o", str(tmp_path / "pulled"), "-q"]) == 0
    assert tree(tmp_path / "pulled") == tree(model)
    out = tmp_path / "mounted"
    assert main(["k8s", "mount", car_ref, str(out), "--runtime", "containerd"]) == 0
    assert (out / "models" / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()


def test_check_headline_names_layers_the_pod_will_not_see(tmp_path, capsys, registry, unique_repo):
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:grouped"
    assert main(["push", str(model), ref, "-q", "--group", "code", "--layer", "code=tar"]) == 0
    capsys.readouterr()
    assert main(["k8s", "check", ref]) == 0
    out = capsys.readouterr().out
    headline = f"{ref}: will mount on cri-o@1.36 (artifact), but 1 layer(s) will not be visible (see warnings)"
    assert out.splitlines()[0] == headline
    assert "(scripts/run.sh) is skipped by cri-o@1.36" in out and "  scripts/run.sh" not in out
    assert main(["k8s", "check", ref, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layersHidden"] == 1
