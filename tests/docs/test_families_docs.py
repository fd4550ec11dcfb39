"""The examples of docs/formats/{families,modelfile,kitfile,modelcar}.md, run as written."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from support.data import data

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore
from tests.kinds.test_families import DOCKER_DIGEST, KIT_DIGEST
from tests.kinds.test_families_buildfiles import KITFILE, MODELFILE, _model

DOCS = Path(__file__).resolve().parents[2] / "docs" / "formats"


def examples(name: str) -> list[str]:
    """``ocibridge …`` lines of the sh blocks that follow an ``<!-- example`` comment."""
    text = (DOCS / name).read_text()
    lines: list[str] = []
    for block in re.findall(r"<!-- example[^>]*-->\s*```sh\n(.*?)```", text, re.S):
        lines += [line for line in block.splitlines() if line.startswith("ocibridge ")]
    assert lines, f"no examples in {name}"
    return lines


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    for folder, source, digest in (("kit", ("kitops", "kit-latest-tar"), KIT_DIGEST),
                                   ("docker", ("docker-model", "gguf-dummy-v0.1"), DOCKER_DIGEST)):
        shutil.copytree(data(*source), tmp_path / folder)
        store = LayoutStore(tmp_path / folder)
        store.tag(store.resolve(digest), "v1")
    model = _model(tmp_path)
    model.rename(tmp_path / "llama-tiny")
    (tmp_path / "llama-tiny.Modelfile").write_text(MODELFILE)
    (tmp_path / "llama-tiny.Kitfile").write_text(KITFILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, line: str) -> str:
    code = main(shlex.split(line)[1:])
    out, err = capsys.readouterr()
    assert code == 0, f"{line}: {err}"
    return out


def test_families_examples(workspace, capsys):
    outputs = {line: _run(capsys, line) for line in examples("families.md")}
    lines = list(outputs)
    assert "(the original manifest, restored)" in outputs[lines[2]]
    assert LayoutStore(workspace / "out").resolve("kit").digest == KIT_DIGEST
    report = json.loads(outputs[lines[3]])
    assert report["from"] == "docker-model" and report["to"] == "modelkit" and report["keptForRoundTrip"]
    assert "lost: docker.context_size = 2048" in outputs[lines[4]]
    assert (workspace / "kit-files" / "model" / "tiny-llama.gguf").is_file()
    assert (workspace / "docker-files" / "dummy.gguf").read_bytes()[:4] == b"GGUF"
    assert LayoutStore(workspace / "out").resolve("from-car").digest == KIT_DIGEST


def test_modelfile_examples(workspace, capsys):
    for line in examples("modelfile.md"):
        _run(capsys, line)


def test_kitfile_examples(workspace, capsys):
    for line in examples("kitfile.md"):
        _run(capsys, line)
    store = LayoutStore(workspace / "out")
    from ocibridge.oci.models import Manifest

    manifest = Manifest.model_validate_json(store.fetch_bytes(store.resolve("kitfile-converted")))
    kitfile = json.loads(store.fetch_bytes(manifest.config))
    assert kitfile["model"]["framework"] == "transformers"


def test_modelcar_examples(workspace, capsys):
    from tests.modelcar_images import kserve_modelcar
    from tests.modelgen import tree

    model = workspace / "llama-tiny"
    files = {p.relative_to(model).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
             for p in sorted(model.rglob("*")) if p.is_file()}
    kserve_modelcar(workspace / "kserve", files)
    outputs = [_run(capsys, line) for line in examples("modelcar.md")]
    report = json.loads(outputs[0])
    assert report["from"] == "modelcar" and report["to"] == "modelpack-cnai"
    assert [loss["field"] for loss in report["lost"]] == ["image.base", "image.config.Env", "image.config.Cmd"]
    assert tree(workspace / "kserve-files") == tree(model)
    assert LayoutStore(workspace / "out").resolve("car-again")
