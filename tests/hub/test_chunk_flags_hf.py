"""push's ``--no-chunks``, ``--chunk-threshold`` and ``--chunk-hash`` on ``copy`` and ``convert``
of an ``hf:`` source (the artifact they build is push's, so they take push's chunk flags), and
refused, one line, where the source is a store's artifact, copied or converted as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hubcache import offline_hub_cache
from test_hf_cache import COMMIT, stored_with_table, write_with_huggingface_hub

from ocibridge.cli import main
from tests.modelgen import make_bert_model

#: under make_bert_model's 16 KiB weights file, over its small text files: only the weights get a table
SMALL = "8K"


@pytest.fixture(autouse=True)
def hub(tmp_path, monkeypatch) -> Path:
    root = offline_hub_cache(tmp_path, monkeypatch)  # nothing here may reach the Hub
    write_with_huggingface_hub(root, "acme/source", make_bert_model(tmp_path / "src"), COMMIT)
    return root


def run_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def test_copy_hf_takes_push_s_chunk_flags(tmp_path, capsys):
    """A threshold under the weights' size gives them a table, as push with that threshold does
    (same manifest, table and referrer); the hash flag changes the table; left out, copy is
    push's default (no table for a small model: the digest it had)."""
    default = run_json(capsys, "push", "hf:acme/source", f"oci:{tmp_path / 'pushed'}:default")
    assert default.get("chunks") is None
    copied = run_json(capsys, "copy", "hf:acme/source", f"oci:{tmp_path / 'copied'}:default")
    assert copied["digest"] == default["digest"] and copied.get("chunks") is None

    pushed = run_json(capsys, "push", "hf:acme/source", f"oci:{tmp_path / 'pushed'}:small",
                      "--chunk-threshold", SMALL)
    copied = run_json(capsys, "copy", "hf:acme/source", f"oci:{tmp_path / 'copied'}:small",
                      "--chunk-threshold", SMALL)
    assert copied["chunks"]["layers"] == 1 and copied["chunks"] == pushed["chunks"]
    assert copied["digest"] == pushed["digest"] != default["digest"]
    assert stored_with_table(tmp_path / "copied", "small") == stored_with_table(tmp_path / "pushed", "small")

    sha = run_json(capsys, "copy", "hf:acme/source", f"oci:{tmp_path / 'copied'}:sha256",
                   "--chunk-threshold", SMALL, "--chunk-hash", "sha256")
    assert sha["chunks"]["layers"] == 1 and sha["digest"] not in (copied["digest"], default["digest"])


def test_convert_hf_takes_push_s_chunk_flags(tmp_path, capsys):
    """``convert hf: --chunk-threshold`` is convert of what push with that threshold stored."""
    default = run_json(capsys, "convert", "hf:acme/source", f"oci:{tmp_path / 'from-hf'}:default", "--to", "modelkit")
    assert default["chunks"] is None
    run_json(capsys, "push", "hf:acme/source", f"oci:{tmp_path / 'pushed'}:v1", "--chunk-threshold", SMALL)
    from_push = run_json(capsys, "convert", f"oci:{tmp_path / 'pushed'}:v1", f"oci:{tmp_path / 'from-push'}:v1",
                         "--to", "modelkit")
    from_hf = run_json(capsys, "convert", "hf:acme/source", f"oci:{tmp_path / 'from-hf'}:v1", "--to", "modelkit",
                       "--chunk-threshold", SMALL)
    assert from_hf["chunks"] is not None and from_hf["chunks"] == from_push["chunks"]
    assert from_hf["reference"].rsplit("@", 1)[1] == from_push["reference"].rsplit("@", 1)[1]
    assert from_hf["reference"].rsplit("@", 1)[1] != default["reference"].rsplit("@", 1)[1]


STORE = "registry.example/acme/model:v1"  # refused before anything is opened: no registry is asked
MISTAKES = [
    (["copy", STORE, "registry.example/acme/copy:v1", "--chunk-threshold", SMALL],
     "registry.example/acme/model:v1: copy keeps a stored artifact's bytes and digest, its chunk table with them: "
     "--no-chunks, --chunk-threshold and --chunk-hash are for an hf:ORG/NAME source, which copy builds"),
    (["copy", "oci:{tmp}/layout:v1", "oci:{tmp}/out:v1", "--no-chunks"], "copy keeps a stored artifact's bytes"),
    (["convert", STORE, "oci:{tmp}/out:v1", "--to", "modelkit", "--chunk-hash", "sha256"],
     "convert carries a stored artifact's chunk table as it is"),
    (["push", STORE, "oci:{tmp}/out:v1", "--chunk-threshold", SMALL],
     "registry.example/acme/model:v1: push takes a stored artifact's layers as they are, with their digests and "
     "any chunk table: --no-chunks, --chunk-threshold and --chunk-hash are for a model push builds from files "
     "(a directory, a file, hf:ORG/NAME)"),
    (["push", "oci:{tmp}/layout:v1", "oci:{tmp}/out:v1", "--no-chunks"], "push takes a stored artifact's layers"),
    (["push", "oci:{tmp}/layout:v1", "{tmp}/out/model.carton", "--chunk-hash", "sha256"],
     "push takes a stored artifact's layers"),
    (["copy", "hf:acme/source", "oci:{tmp}/out:v1", "--no-chunks", "--chunk-threshold", SMALL],
     "--chunk-threshold says which files get a chunk table: leave it out with --no-chunks"),
    (["convert", "hf:acme/source", "oci:{tmp}/out:v1", "--to", "modelkit", "--no-chunks", "--chunk-hash", "sha256"],
     "--chunk-hash says how a chunk table is hashed: leave it out with --no-chunks"),
    (["copy", "hf:acme/source", "oci:{tmp}/out:v1", "--chunk-threshold", "8Q"],
     "--chunk-threshold: '8Q' is not a byte count (use e.g. 500K, 20M, 1G)"),
]


@pytest.mark.parametrize("argv, words", MISTAKES, ids=[f"{m[0][0]}-{i}" for i, m in enumerate(MISTAKES)])
def test_chunk_flag_mistakes_are_one_line(tmp_path, capsys, argv, words):
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out").exists()
