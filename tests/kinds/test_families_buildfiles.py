"""Build files as push input: modctl's Modelfile and KitOps' Kitfile drive what is packed."""

from __future__ import annotations

import json

import pytest

from ocibridge import PushOptions
from ocibridge.api import model_ops as api
from ocibridge.api.convert import convert
from ocibridge.cli import main
from ocibridge.kinds import identify
from ocibridge.oci.models import Manifest
from ocibridge.stores.layout import LayoutStore
from tests.kinds.test_families_metadata import _config, hf_model

MODELFILE = """# Model name
NAME llama-tiny
ARCH transformer
FAMILY llama3
FORMAT safetensors
PARAMSIZE 68k
PRECISION bf16
quantization none

CONFIG config.json
CONFIG tokenizer.json
MODEL *.safetensors
DOC README.md
"""

KITFILE = """manifestVersion: 1.0.0
package:
  name: llama-tiny
  version: 1.2.0
  description: a tiny llama
  authors: [Jane Doe]
  license: Apache-2.0
model:
  name: tiny
  path: model-00001-of-00002.safetensors
  framework: transformers
  format: safetensors
  parameters:
    context_length: 128
  parts:
    - path: model-00002-of-00002.safetensors
    - path: config.json
      type: config
code:
  - path: scripts
    description: helper scripts
datasets:
  - name: eval
    path: data/eval.jsonl
    license: CC-BY-4.0
docs:
  - path: README.md
"""


def _model(tmp_path):
    model = hf_model(tmp_path / "m")
    (model / "README.md").write_text("# tiny\n")
    (model / "notes.txt").write_text("not named by the build file\n")
    (model / "scripts").mkdir()
    (model / "scripts" / "run.py").write_text("print(1)\n")
    (model / "data").mkdir()
    (model / "data" / "eval.jsonl").write_text("{}\n")
    return model


def _layers(layout, tag):
    store = LayoutStore(layout)
    manifest = Manifest.model_validate_json(store.fetch_bytes(store.resolve(tag)))
    return manifest, {layer.annotations.get("org.cnai.model.filepath") or layer.annotations.get(
        "org.cncf.model.filepath"): layer.mediaType for layer in manifest.layers}


def test_a_modelfile_drives_a_push(tmp_path):
    model = _model(tmp_path)
    (tmp_path / "Modelfile").write_text(MODELFILE)
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-f", str(tmp_path / "Modelfile"), "-q"]) == 0
    manifest, layers = _layers(tmp_path / "out", "v1")
    assert layers == {
        "README.md": "application/vnd.cnai.model.doc.v1.raw",
        "config.json": "application/vnd.cnai.model.weight.config.v1.raw",
        "model-00001-of-00002.safetensors": "application/vnd.cnai.model.weight.v1.raw",
        "model-00002-of-00002.safetensors": "application/vnd.cnai.model.weight.v1.raw",
        "tokenizer.json": "application/vnd.cnai.model.weight.config.v1.raw",
    }
    config = _config(tmp_path / "out", "v1")
    assert config["descriptor"] == {"name": "llama-tiny", "family": "llama3"}
    assert config["config"] == {"architecture": "transformer", "format": "safetensors", "paramSize": "68k",
                                "precision": "bf16", "quantization": "none"}
    assert manifest.annotations["org.cncf.modctl.modelfile"] == MODELFILE


def test_a_kitfile_drives_a_push_and_its_fields_reach_a_modelkit(tmp_path):
    model = _model(tmp_path)
    (tmp_path / "Kitfile").write_text(KITFILE)
    api.push(str(model), f"oci:{tmp_path / 'out'}:v1", options=PushOptions(build_file=str(tmp_path / "Kitfile")))
    _, layers = _layers(tmp_path / "out", "v1")
    assert layers == {
        "README.md": "application/vnd.cnai.model.doc.v1.raw",
        "config.json": "application/vnd.cnai.model.weight.config.v1.raw",
        "data/eval.jsonl": "application/vnd.cnai.model.dataset.v1.raw",
        "model-00001-of-00002.safetensors": "application/vnd.cnai.model.weight.v1.raw",
        "model-00002-of-00002.safetensors": "application/vnd.cnai.model.weight.v1.raw",
        "scripts/run.py": "application/vnd.cnai.model.code.v1.raw",
    }
    d = _config(tmp_path / "out", "v1")["descriptor"]
    assert (d["name"], d["version"], d["authors"], d["licenses"]) == (
        "llama-tiny", "1.2.0", ["Jane Doe"], ["Apache-2.0", "CC-BY-4.0"])
    kit = convert(f"oci:{tmp_path / 'out'}:v1", f"oci:{tmp_path / 'out'}:kit", "modelkit")
    store = LayoutStore(tmp_path / "out")
    kitfile = json.loads(store.fetch_bytes(kit.conversion.store.manifest.config))
    assert kitfile["package"]["license"] == "Apache-2.0"
    assert kitfile["model"]["framework"] == "transformers"
    assert kitfile["model"]["parameters"] == {"context_length": 128}
    assert kitfile["model"]["path"] == "model-00001-of-00002.safetensors"
    assert kitfile["code"] == [{"path": "scripts/run.py", "description": "helper scripts",
                                "digest": kitfile["code"][0]["digest"], "diffId": kitfile["code"][0]["diffId"]}]
    assert kitfile["datasets"][0]["name"] == "eval" and kitfile["datasets"][0]["license"] == "CC-BY-4.0"
    assert identify(store, "kit").family.name == "modelkit"


def test_a_kitfile_push_can_write_a_modelkit_directly(tmp_path):
    model = _model(tmp_path)
    (tmp_path / "Kitfile").write_text(KITFILE)
    code = main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-f", str(tmp_path / "Kitfile"),
                 "--to", "modelkit", "-q"])
    assert code == 0
    assert identify(LayoutStore(tmp_path / "out"), "v1").family.name == "modelkit"


@pytest.mark.parametrize("text,message", [
    ("NAME x\nMODEL *.gguf\n", "'*.gguf' matches no file"),
    ("NAME x\nFROM llama\n", "unknown Modelfile command 'FROM'"),
    ("NAME x\n", "names no files"),
    ("manifestVersion: 1.0.0\nmodel:\n  path: nothing-here\n", "path 'nothing-here' matches no file"),
    ("manifestVersion: [\n", "not valid YAML"),
])
def test_a_bad_build_file_is_one_error_line(tmp_path, capsys, text, message):
    model = _model(tmp_path)
    (tmp_path / "build").write_text(text)
    code = main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-f", str(tmp_path / "build"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("ocibridge: error: ") and message in err[0], err


@pytest.mark.parametrize("name,text", [("Kitfile", KITFILE), ("Modelfile", MODELFILE)])
def test_a_top_level_build_file_is_used_by_default(tmp_path, name, text):
    """`push DIR` reads DIR/Kitfile or DIR/Modelfile as `kit pack .` and `modctl build .` do
    (issue 32): only the files it names are packed, and it is not itself a layer."""
    model = _model(tmp_path)
    (model / name).write_text(text)
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q"]) == 0
    manifest, layers = _layers(tmp_path / "out", "v1")
    assert name not in layers and "notes.txt" not in layers
    assert "model-00001-of-00002.safetensors" in layers
    assert _config(tmp_path / "out", "v1")["descriptor"]["name"] == "llama-tiny"
    if name == "Kitfile":
        import yaml

        assert json.loads(manifest.annotations["ml.kitops.modelkit.kitfile"]) == yaml.safe_load(text)
    else:
        assert manifest.annotations["org.cncf.modctl.modelfile"] == text


@pytest.mark.parametrize("name,text", [("Kitfile", KITFILE), ("Modelfile", MODELFILE)])
def test_no_build_file_packs_it_as_a_plain_file(tmp_path, name, text):
    model = _model(tmp_path)
    (model / name).write_text(text)
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "--no-build-file", "-q"]) == 0
    manifest, layers = _layers(tmp_path / "out", "v1")
    assert name in layers and "notes.txt" in layers
    assert "ml.kitops.modelkit.kitfile" not in (manifest.annotations or {})
    assert "org.cncf.modctl.modelfile" not in (manifest.annotations or {})


def test_a_top_level_build_file_that_does_not_parse_names_the_way_out(tmp_path, capsys):
    """An Ollama-style Modelfile (FROM …) is not modctl's: one line, which says --no-build-file."""
    model = _model(tmp_path)
    (model / "Modelfile").write_text("FROM ./model.gguf\n")
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--no-build-file" in err and "FROM" in err
    assert not (tmp_path / "out").exists()


def test_both_build_files_at_the_top_is_ambiguous(tmp_path, capsys):
    model = _model(tmp_path)
    (model / "Kitfile").write_text(KITFILE)
    (model / "Modelfile").write_text(MODELFILE)
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-q"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "-f FILE" in err
    assert main(["push", str(model), f"oci:{tmp_path / 'out'}:v1", "-f", str(model / "Kitfile"), "-q"]) == 0


def test_pyyaml_is_a_runtime_dependency():
    """`push -f Kitfile` must work after a plain `pip install ocibridge` (issue 32)."""
    from pathlib import Path

    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert any(d.lower().startswith("pyyaml") for d in project["dependencies"])
