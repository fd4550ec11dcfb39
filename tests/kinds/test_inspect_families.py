"""inspect names the family in words, shows its own fields, and fills each layer's kind and path
for ModelKit and Docker model layers (issue 32), on the real reference artifacts in tests/data
(built by kit and by Docker's model-distribution) and a model pushed by ocibridge."""

from __future__ import annotations

import json
import shutil

from support.data import data

from ocibridge.cli import main
from tests.kinds.test_families_pairs import DOCKER_DIGEST, KIT_DIGEST
from tests.modelgen import make_model


def _inspect_committed(capsys, tmp_path, layout: tuple[str, str], digest: str) -> tuple[str, str]:
    """(the reference, what ``inspect`` prints of it) of a copy of a committed layout's artifact."""
    shutil.copytree(data(*layout), tmp_path / "layout")
    ref = f"oci:{tmp_path / 'layout'}@{digest}"
    assert main(["inspect", ref]) == 0
    return ref, capsys.readouterr().out


def _layer_rows(out: str) -> list[list[str]]:
    table = out.split("\n\n", 1)[1].splitlines()
    assert table[0].split()[:4] == ["KIND", "VARIANT", "SIZE", "PATH"]
    return [line.split() for line in table[1:]]


def test_a_kitops_modelkit_is_named_with_its_kitfile_and_layer_paths(tmp_path, capsys):
    ref, out = _inspect_committed(capsys, tmp_path, ("kitops", "kit-latest-tar"), KIT_DIGEST)
    assert out.splitlines()[0] == "Family:        KitOps ModelKit"
    for line in ("Kitfile package.name: tiny-llama-fixture", "Kitfile model.path: model/tiny-llama.gguf",
                 "Kitfile model.framework: llama.cpp", "Kitfile code[0]: ", "Kitfile datasets[0]: ",
                 "Kitfile docs[0]: "):
        assert line in out, line
    rows = {r[4]: (r[0], r[1]) for r in _layer_rows(out)}  # path → (kind, variant)
    assert rows == {"model/tiny-llama.gguf": ("weight", "tar"), "model/chat_template.jinja": ("weight.config", "tar"),
                    "src": ("code", "tar"), "data/eval.jsonl": ("dataset", "tar"), "README.md": ("doc", "tar")}
    assert main(["inspect", ref, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["family"] == "modelkit" and info["familyName"] == "KitOps ModelKit"
    assert "-" not in {layer["kind"] for layer in info["layers"]}


def test_a_docker_model_is_named_with_its_config_and_layer_paths(tmp_path, capsys):
    ref, out = _inspect_committed(capsys, tmp_path, ("docker-model", "gguf-dummy-v0.1"), DOCKER_DIGEST)
    assert out.splitlines()[0] == "Family:        Docker model"
    assert "Docker model config.format: gguf" in out and "Docker model config.architecture: llama" in out
    assert "Docker model config.context_size: 2048" in out
    rows = {r[4]: r[0] for r in _layer_rows(out)}
    assert rows == {"dummy.gguf": "weight", "license.txt": "doc", "template.jinja": "weight.config",
                    "dummy.mmproj": "weight"}


def test_a_modelpack_artifact_says_modelpack(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v1", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"oci:{tmp_path}/s:v1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Family:        ModelPack"
    assert "descriptor.name: m" in out  # ModelPack's own fields, as before


def test_a_modelcar_and_an_ollama_model_are_named(tmp_path, capsys, monkeypatch):
    from tests.ollama_fixtures import gguf_store

    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v1", "-q"]) == 0
    assert main(["convert", f"oci:{tmp_path}/s:v1", f"oci:{tmp_path}/s:car", "--to", "modelcar", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"oci:{tmp_path}/s:car"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Family:        ModelCar"
    gguf_store(tmp_path / "models", tmp_path)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "models"))
    assert main(["copy", "ollama:tiny", f"oci:{tmp_path}/o:tiny", "-q"]) == 0
    capsys.readouterr()
    assert main(["inspect", f"oci:{tmp_path}/o:tiny"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Family:        Ollama"
    assert "Ollama config model_family: llama" in out
