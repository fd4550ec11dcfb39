"""An Ollama model whose layer names make one path both a file and a directory (``cfg`` beside
``cfg/x``; the tensor ``w``, whose file is ``w.safetensors``, beside ``w.safetensors/inner``):
no pull can write what it would convert into, so no conversion writes it. Push and convert of
``ollama:NAME``, and push of the same model copied as it is into a layout, each say one error
line (pull's own, word for word), exit 1 and tag nothing; pull refuses the same input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ollama_fixtures import tensor_blob, write_store

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore

CLASHES = {
    "cfg": ([("json", b'{"b": 2}', {"name": "cfg"}), ("json", b'{"c": 3}', {"name": "cfg/x"})], "cfg"),
    "w.safetensors": ([("tensor", tensor_blob({"w": np.ones((2, 2), dtype=np.float32)}), {"name": "w"}),
                       ("json", b'{"a": 1}', {"name": "w.safetensors/inner"})], "w.safetensors"),
}


def clashing_store(root: Path, which: str) -> None:
    layers, _ = CLASHES[which]
    write_store(root, ("registry.ollama.ai", "library", "clash", "latest"), layers,
                config={"model_format": "safetensors", "capabilities": ["completion"]})


def said(capsys: pytest.CaptureFixture[str], which: str) -> str:
    err = capsys.readouterr().err
    assert err == f"ocibridge: error: the artifact holds {CLASHES[which][1]} as a file and as a directory\n"
    return err


def tags(layout: Path) -> list[str]:
    return LayoutStore(layout).tags() if (layout / "index.json").exists() else []


@pytest.mark.parametrize("which", sorted(CLASHES))
def test_push_and_convert_of_an_ollama_model_no_pull_could_write_are_refused(tmp_path, monkeypatch, capsys, which):
    clashing_store(tmp_path / "models", which)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "models"))
    assert main(["push", "ollama:clash", f"oci:{tmp_path}/pushed:clash"]) == 1
    said(capsys, which)
    assert tags(tmp_path / "pushed") == []
    assert main(["convert", "ollama:clash", f"oci:{tmp_path}/converted:clash", "--to", "modelpack"]) == 1
    said(capsys, which)
    assert tags(tmp_path / "converted") == []


@pytest.mark.parametrize("which", sorted(CLASHES))
def test_the_same_model_found_in_a_layout_is_refused_as_pull_refuses_it(tmp_path, monkeypatch, capsys, which):
    """Copied as it is (Ollama's own manifest), it is converted by what it is: refused by the
    same judgement, with the same line, as a pull of it."""
    clashing_store(tmp_path / "models", which)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "models"))
    assert main(["copy", "ollama:clash", f"oci:{tmp_path}/raw:clash"]) == 0
    capsys.readouterr()
    assert main(["pull", f"oci:{tmp_path}/raw:clash", str(tmp_path / "out")]) == 1
    pulled = said(capsys, which)
    assert not (tmp_path / "out").exists()
    assert main(["push", f"oci:{tmp_path}/raw:clash", f"oci:{tmp_path}/mp:clash"]) == 1
    assert said(capsys, which) == pulled
    assert tags(tmp_path / "mp") == []
