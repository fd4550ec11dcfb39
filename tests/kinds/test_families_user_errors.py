"""What a platform engineer saw trying every family from the command line, against a real registry."""

from __future__ import annotations

import pytest

import ocibridge
from ocibridge.cli import main
from tests.modelcar_images import BASE, write_image


@pytest.mark.parametrize("command", [["pull", "{ref}", "{tmp}/out"],
                                     ["convert", "{ref}", "{ref}-kit", "--to", "modelkit"],
                                     ["k8s", "modelcar", "{ref}", "--tag", "car"]])
def test_a_container_image_is_refused_naming_the_reference_as_written(registry, unique_repo, tmp_path,
                                                                       capsys, command):
    """The line said '1 is a container image' (the tag alone) for registry/repo:1."""
    ref = f"{registry.host}/{unique_repo}:1"
    assert main(["copy", write_image(tmp_path / "img", "1", [BASE], docker=False), ref, "-q"]) == 0
    capsys.readouterr()
    assert main([part.format(ref=ref, tmp=tmp_path) for part in command]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"ocibridge: error: {ref} is a container image"), err


def test_k8s_modelcar_builds_from_a_modelkit_and_a_docker_model(registry, unique_repo, tmp_path, capsys):
    """`k8s check --runtime containerd` of a ModelKit says 'build one with `ocibridge k8s
    modelcar`', which answered 'not a ModelPack artifact'. It builds from the model's ModelPack
    form (stored beside it, untagged), as `convert --to modelcar` does: the same image."""
    from tests.modelgen import make_model, tree

    model = make_model(tmp_path / "m")
    repo = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{repo}:v1", "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "modelcar", f"{repo}:v1", "--tag", "car-v1", "--json"]) == 0
    from_modelpack = __import__("json").loads(capsys.readouterr().out)["digest"]
    for family in ("modelkit", "docker-model"):
        assert main(["convert", f"{repo}:v1", f"{repo}:{family}", "--to", family, "-q"]) == 0
        capsys.readouterr()
        assert main(["k8s", "modelcar", f"{repo}:{family}", "--tag", f"car-{family}", "--json"]) == 0, \
            capsys.readouterr().err
        built = __import__("json").loads(capsys.readouterr().out)["digest"]
        assert built == from_modelpack  # the way back restores the ModelPack form: the same image
        assert main(["k8s", "check", f"{repo}:car-{family}", "--runtime", "containerd"]) == 0
        out = tmp_path / f"out-{family}"
        assert main(["pull", f"{repo}:car-{family}", str(out), "-q"]) == 0
        assert {p: (out / p).read_bytes() for p in tree(out)} == {p: (model / p).read_bytes() for p in tree(model)}
        capsys.readouterr()
    # a ModelCar image given again: it reads as the artifact it was built from, the same image
    assert main(["k8s", "modelcar", f"{repo}:car-v1", "--tag", "car-again", "--json"]) == 0
    assert __import__("json").loads(capsys.readouterr().out)["digest"] == from_modelpack


def test_convert_to_modelcar_counts_the_image_it_uploaded(registry, unique_repo, tmp_path, capsys):
    """convert --to modelcar into a repository holding only the ModelPack artifact printed
    'already there: nothing to send' while it uploaded the image's layers, config and manifest."""
    import json

    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    repo = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{repo}:v1", "-q"]) == 0

    layers = len(ocibridge.inspect(f"{repo}:v1").layers)
    capsys.readouterr()
    assert main(["convert", f"{repo}:v1", f"{repo}:car", "--to", "modelcar", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["blobsCopied"] == layers + 1  # one tar layer per artifact layer, and the image config
    assert report["manifestsCopied"] == 1 and report["bytesCopied"] > 0
    assert main(["convert", f"{repo}:v1", f"{repo}:car", "--to", "modelcar"]) == 0  # again: nothing new
    assert "already there: nothing to send" in capsys.readouterr().out


def test_inspect_of_a_converted_model_reads_as_a_table_not_a_json_dump(registry, unique_repo, tmp_path, capsys):
    """inspect of a converted Docker model printed 'Artifact type: None' and the whole source
    manifest and config, one JSON line each, from the origin annotations convert writes. The text
    says there is no artifact type and names each record by size; --json keeps every value."""
    import json

    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    repo = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{repo}:v1", "-q"]) == 0
    assert main(["convert", f"{repo}:v1", f"{repo}:docker", "--to", "docker-model", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"{repo}:docker"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "Artifact type: -" in out
    origin = [line for line in out if line.startswith("annotation io.ocibridge.origin.")]
    assert len(origin) == 3 and all(len(line) < 200 for line in origin), origin
    assert any(line.startswith("annotation io.ocibridge.origin.modelpack-cnai.manifest: (") and
               "bytes" in line for line in origin), origin
    assert main(["inspect", f"{repo}:docker", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["artifactType"] is None
    assert json.loads(report["annotations"]["io.ocibridge.origin.modelpack-cnai.manifest"])["layers"]
