"""Exit codes and output as documented (issue 42): every usage mistake exits 2 (a table of
them, a malformed reference and a bad flag value included), `--debug` prints the traceback of
a handled error above its line, every command's `--json` keys are camelCase (walked
recursively over real output), counts are singular for one, `cat --json` is refused, `tags` of
an emptied repository exits 0, and a notice does not land on the bar's line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair

USAGE_MISTAKES = [
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--limit-rate", "abc"],
    ["pull", "oci:{tmp}/l:v1", "{tmp}/out", "--part-size", "lots"],
    ["pull", "oci:{tmp}/l:v1", "{tmp}/out", "--parts", "0"],
    ["copy", "oci:{tmp}/l:v1", "oci:{tmp}/c:v1", "--limit-rate", "-5"],
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--concurrency", "0"],
    ["inspect", "Bad//Ref"],  # malformed references: InvalidReference
    ["inspect", "registry.example/team/m:bad tag"],
    ["pull", "localhost:5000/a:b:c", "{tmp}/out"],
    ["copy", "registry.example/team/m@sha256:zz", "oci:{tmp}/c:v1"],
    ["resolve", "registry.example/UPPER/case:v1"],
    ["cat", "registry.example/team/m:v1", "README.md", "--json"],  # refused: stdout is the file
    ["verify-dir", "{tmp}/m", "--key", "{tmp}/k/cosign.pub"],  # no --signature and no model.sig
    ["cache", "prune"],
    ["cache", "prune", "--older-than", "soon"],
    ["inspect", "oci:{tmp}/l:v1", "--bogus"],
    ["pull"],
]


def _code(argv: list[str]) -> Any:
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("args", USAGE_MISTAKES, ids=lambda a: " ".join(a)[:60])
def test_every_usage_mistake_exits_2(tmp_path, capsys, args):
    make_model(tmp_path / "m")
    key_pair(tmp_path / "k")
    assert main(["push", str(tmp_path / "m"), f"oci:{tmp_path}/l:v1", "-q"]) == 0
    capsys.readouterr()
    code = _code([a.format(tmp=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("ocibridge: error:") and err.count("\n") == 1, (code, err)


def _run_cli(*args: str) -> tuple[int, str]:
    """The CLI in a process of its own (--debug installs a log handler on stderr for good)."""
    import subprocess
    import sys

    child = "import sys; from ocibridge.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", child, *args], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


def test_debug_prints_the_traceback_of_a_handled_error(tmp_path):
    code, plain = _run_cli("inspect", f"oci:{tmp_path}/nowhere:v1")
    assert code == 1 and "Traceback" not in plain and plain.count("\n") == 1
    code, err = _run_cli("--debug", "inspect", f"oci:{tmp_path}/nowhere:v1")
    assert code == 1 and err.startswith("Traceback (most recent call last):"), err
    assert err.splitlines()[-1] == plain.strip()
    code, err = _run_cli("inspect", "Bad//Ref", "--debug")
    assert code == 2 and "Traceback" in err and "InvalidReference" in err


CAMEL = re.compile(r"[a-z][a-zA-Z0-9]*\Z")
#: fields whose keys are data, not ocibridge's names: annotations, labels, file paths, configs
#: and manifests as their authors wrote them, digests
DATA_FIELDS = {"annotations", "labels", "files", "config", "claims", "manifest", "index", "env"}


def bad_keys(doc: Any, where: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if not CAMEL.match(key):
                found.append(f"{where}.{key}")
            if key not in DATA_FIELDS:
                found += bad_keys(value, f"{where}.{key}")
    elif isinstance(doc, list):
        for n, item in enumerate(doc):
            found += bad_keys(item, f"{where}[{n}]")
    return found


def test_json_keys_are_camel_case_over_every_command(tmp_path, capsys, monkeypatch, registry, unique_repo):
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    reg = f"{registry.host}/{unique_repo}"
    layout = f"oci:{tmp_path}/layout"
    card = tmp_path / "card.md"
    card.write_text("# card\n")
    commands = [
        ["push", str(model), f"{reg}:v1", "-q"],
        ["push", str(model), f"{layout}:v1", "-q"],
        ["push", str(model), "mine:v1", "-q"],
        ["pull", f"{reg}:v1", str(tmp_path / "pulled"), "-q"],
        ["copy", f"{reg}:v1", f"{layout}:copied", "-q"],
        ["convert", f"{layout}:v1", f"{layout}:kit", "--to", "modelkit"],
        ["inspect", f"{reg}:v1"],
        ["validate", f"{reg}:v1"],
        ["tags", reg],
        ["list"],
        ["ls", layout],
        ["tag", f"{layout}:v1", "v2"],
        ["resolve", f"{layout}:v2"],
        ["attach", f"{reg}:v1", str(card), "--artifact-type", "text/markdown"],
        ["discover", f"{reg}:v1"],
        ["sign", f"{reg}:v1", "--key", str(private), "--form", "all"],
        ["verify", f"{reg}:v1", "--key", str(public)],
        ["pull", f"{reg}:v1", str(tmp_path / "signed"), "-q", "--with-signatures"],
        ["verify-dir", str(tmp_path / "signed"), "--key", str(public)],
        ["chunks", f"{reg}:v1"],
        ["path", f"{reg}:v1"],
        ["cache", "dir"],
        ["cache", "prune", "--older-than", "30d"],
        ["save", f"{reg}:v1", "-o", str(tmp_path / "b.tar"), "-q"],
        ["load", "--list", str(tmp_path / "b.tar")],
        ["load", str(tmp_path / "b.tar"), f"oci:{tmp_path}/loaded", "-q"],
        ["check-registry", reg],
        ["k8s", "volume", f"{reg}:v1"],
        ["rm", f"{layout}:v2"],
        ["delete", f"{layout}:copied", "--dry-run"],
        ["prune", layout, "--dry-run"],
    ]
    seen: dict[str, list[str]] = {}
    for argv in commands:
        code = _code([*argv, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, (argv, err)
        seen[" ".join(argv[:2])] = bad_keys(json.loads(out))
    assert {name: keys for name, keys in seen.items() if keys} == {}


def test_one_is_singular(tmp_path, capsys, registry, unique_repo):
    model = tmp_path / "one"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    assert main(["push", str(model), f"oci:{tmp_path}/l:v1", "--no-auto-group"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\b1 blobs\b", out) is None
    reg = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{reg}:v1", "-q"]) == 0
    assert main(["save", f"{reg}:v1", "-o", str(tmp_path / "b.tar"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "bundled 1 model (0 signatures)" in out, out
    assert main(["load", str(tmp_path / "b.tar"), f"oci:{tmp_path}/back", "-q"]) == 0
    assert "loaded 1 model (0 signatures)" in capsys.readouterr().out


def test_tags_of_an_emptied_repository_is_nothing_and_of_an_unknown_one_an_error(tmp_path, capsys, registry,
                                                                                  unique_repo):
    ref = f"{registry.host}/{unique_repo}"
    assert main(["push", str(make_model(tmp_path / "m")), f"{ref}:v1", "-q"]) == 0
    assert main(["delete", f"{ref}:v1"]) == 0
    capsys.readouterr()
    assert main(["tags", ref]) == 0 and capsys.readouterr() == ("", "")
    assert main(["tags", ref, "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    assert main(["tags", f"{ref}-never-pushed"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such repository" in err
    empty = Path(tmp_path / "empty")
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(empty, create=True)
    assert main(["tags", f"oci:{empty}"]) == 0 and capsys.readouterr().out == ""


def test_a_notice_on_a_terminal_clears_the_bars_line_first(monkeypatch, capsys):
    """The resume notice was printed where the bar's cursor stood: onto the bar's line."""
    import sys

    from ocibridge.cli import entry

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    entry._notice_to_stderr("resumed sha256:abc at 48%")
    assert capsys.readouterr().err == "\r\x1b[Kocibridge: resumed sha256:abc at 48%\n"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    entry._notice_to_stderr("resumed sha256:abc at 48%")
    assert capsys.readouterr().err == "ocibridge: resumed sha256:abc at 48%\n"
