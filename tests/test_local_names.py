"""Issue 32 C: one name rule for every command. A bare ``NAME[:TAG]`` that names a model in the
local store means that model in every command that takes a reference; the commands are
enumerated from the parser, so a new one without a case here fails."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from tests.signing_keys import key_pair

#: commands that take no model reference (hosts, a job file, a layout path)
NO_REFERENCE = {("login",), ("logout",), ("mirror",), ("list",), ("ls",), ("prune",), ("k8s",),
                ("load",),  # load: a bundle file and a registry prefix or oci:DIR
                ("verify-dir",), ("check-registry",), ("cache",)}  # a directory, a host, the cache

#: argv per command, with {name} (the local model), {tmp} and {key}/{pub}; "ok" when it must
#: succeed, else it must fail for a reason other than the name (a registry-only operation)
CASES: dict[tuple[str, ...], tuple[list[str], bool]] = {
    ("push",): (["push", "{name}", "oci:{tmp}/pushed:v1"], True),  # a store as source: copied
    ("pull",): (["pull", "{name}", "{tmp}/out"], True),
    ("copy",): (["copy", "{name}", "oci:{tmp}/copied:v1"], True),
    ("cp",): (["cp", "{name}:latest", "oci:{tmp}/cp:v1"], True),
    ("convert",): (["convert", "{name}", "--to", "modelcar", "oci:{tmp}/car:v1"], True),
    ("inspect",): (["inspect", "{name}"], True),
    ("validate",): (["validate", "{name}"], True),
    ("tags",): (["tags", "{name}"], True),
    ("k8s", "check"): (["k8s", "check", "{name}", "--runtime", "cri-o"], False),
    ("k8s", "modelcar"): (["k8s", "modelcar", "{name}"], False),
    ("k8s", "volume"): (["k8s", "volume", "{name}"], False),
    ("k8s", "mount"): (["k8s", "mount", "{name}", "{tmp}/mounted"], True),
    ("sign",): (["sign", "{name}", "--key", "{key}"], True),
    ("verify",): (["verify", "{name}", "--key", "{pub}"], True),
    ("tag",): (["tag", "{name}:latest", "v2"], True),
    ("resolve",): (["resolve", "{name}"], True),
    ("attach",): (["attach", "{name}", "{tmp}/note.txt", "--artifact-type", "application/x-note"], True),
    ("discover",): (["discover", "{name}"], True),
    ("delete",): (["delete", "{name}"], False),
    ("save",): (["save", "{name}", "-o", "{tmp}/bundle.tar"], True),
    ("path",): (["path", "{name}"], True),
    ("cat",): (["cat", "{name}", "config.json"], False),  # lazy reads are of registry models
    ("chunks",): (["chunks", "{name}"], False),
    ("rm",): (["rm", "{name}"], True),
}
#: what a name taken for something else shows
WRONG_READINGS = ("docker.io", "local path, not a store", "not an OCI image layout", "tag not found")


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add((*prefix, name))
                found |= _commands(sub, (*prefix, name))
    return found


def test_every_command_is_covered():
    commands = _commands(build_parser())
    missing = commands - NO_REFERENCE - set(CASES)
    assert not missing, f"commands without a local-name case: {sorted(missing)}"


@pytest.fixture()
def local_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "tiny-llama"
    model.mkdir()
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 400)
    (model / "config.json").write_text('{"hidden": 4}\n')
    assert main(["push", str(model), "-q"]) == 0  # into the local store, tagged by its name
    (tmp_path / "note.txt").write_text("a note\n")
    return "tiny-llama"


@pytest.mark.parametrize("command", sorted(CASES), ids=" ".join)
def test_a_local_name_means_the_local_model(command, local_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path / "store")  # nowhere the name is a path
    key, pub = key_pair(tmp_path)
    argv, ok = CASES[command]
    args = [a.format(name=local_model, tmp=tmp_path, key=key, pub=pub) for a in argv]
    if command == ("verify",):
        assert main(["sign", local_model, "--key", str(key)]) == 0
    code = main(args)
    err = capsys.readouterr().err
    assert not any(w in err for w in WRONG_READINGS), err
    if ok:
        assert code == 0, err
    if command == ("tag",):
        assert main(["inspect", "v2"]) == 0  # the new local name too
    assert Path(tmp_path / "store").is_dir()


def test_ls_shows_name_and_tag_as_they_are_typed(local_model, capsys):
    capsys.readouterr()
    assert main(["ls"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:2] == ["tiny-llama", "latest"], row  # not the name again in the TAG column
    assert main(["inspect", f"{row[0]}:{row[1]}"]) == 0
