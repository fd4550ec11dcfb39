"""Archive outputs (issue 53 items 3 and 4), the CLI as a process: ``pull REF out.carton`` never
replaces an unrelated file silently (refused unless --overwrite/--force; the same model's
archive is left as it is), and ``push``/``copy``/``convert`` into ``out.carton`` write the
archive, not a store model named ``out.carton:latest``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_run import run_cli
from support.data import data

from tests.modelgen import make_bert_model

CARTONS = sorted(data("carton").glob("*.carton"))


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("OCIBRIDGE_STORE", str(root))
    return root


def test_pull_into_an_existing_file_is_refused_unless_asked(tmp_path, store):
    for name, carton in zip(("one", "two"), CARTONS, strict=True):
        ran = run_cli("push", str(carton), f"{name}:v1", "-q")
        assert ran.code == 0, ran.err
    notes = tmp_path / "notes.carton"
    notes.write_text("my notes, not a model\n")
    line = run_cli("pull", "one:v1", str(notes)).one_error_line()
    assert "already there (not an archive); pass --overwrite (or --force) to replace it" in line
    assert notes.read_text() == "my notes, not a model\n"

    out = tmp_path / "one.carton"
    assert run_cli("pull", "one:v1", str(out), "-q").code == 0
    first = out.read_bytes()
    again = run_cli("pull", "one:v1", str(out), "--json")  # the same model's archive: left as it is
    assert again.code == 0, again.err
    assert out.read_bytes() == first
    line = run_cli("pull", "two:v1", str(out)).one_error_line()
    assert "already there (another archive than this model's)" in line
    assert out.read_bytes() == first and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert run_cli("pull", "two:v1", str(out), "--force", "-q").code == 0
    assert out.read_bytes() != first
    assert run_cli("pull", "one:v1", str(notes), "--overwrite", "-q").code == 0
    assert notes.read_bytes() == first


def test_push_and_copy_into_an_archive_name_write_the_archive(tmp_path, store):
    carton = CARTONS[0]
    out = tmp_path / "out.carton"
    pushed = run_cli("push", str(carton), str(out), "--json")
    assert pushed.code == 0, pushed.err
    assert json.loads(pushed.out)["reference"] == str(out) and out.is_file()
    assert run_cli("push", str(carton), "one:v1", "-q").code == 0
    copied = tmp_path / "copied.carton"
    assert run_cli("copy", "one:v1", str(copied), "-q").code == 0
    assert copied.read_bytes() == out.read_bytes()
    # a directory is no Carton model: one error line, and no model named out.carton in the store
    model = make_bert_model(tmp_path / "dir", weights=4)
    line = run_cli("push", str(model), str(tmp_path / "dir.carton")).one_error_line()
    assert "not a Carton artifact" in line
    converted = run_cli("convert", "one:v1", str(tmp_path / "kit.carton"), "--to", "modelkit")
    assert converted.code == 2 and converted.err.count("\n") == 1  # a usage mistake: one line
    assert "an archive file; convert writes a model of another family to a store" in converted.err
    listed = run_cli("ls", "--json")
    assert listed.code == 0 and "carton" not in listed.out, listed.out
    assert not (tmp_path / "dir.carton").exists() and not (tmp_path / "kit.carton").exists()
