"""Conventions every command keeps (issue 18): examples in --help that parse as written,
--json everywhere (login and logout included, against a real htpasswd registry), exit 2 for
usage mistakes."""

from __future__ import annotations

import io
import json
import shlex

import pytest

from ocibridge.cli import build_parser, main
from ocibridge.cli_help import EXAMPLES, subcommands


def _argv(example: str) -> list[str]:
    """An example line as the shell would pass it: comment and redirections dropped."""
    words = shlex.split(example.split("  #")[0])
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("<", ">"):
            skip = True
        else:
            out.append(word)
    assert out[0] == "ocibridge"
    return out[1:]


def test_every_command_has_examples_in_its_help():
    commands = subcommands(build_parser())
    assert {"push", "pull", "copy", "list", "rm", "prune", "tag", "delete", "resolve", "attach",
            "discover", "k8s check"} <= set(commands)
    missing = sorted(set(commands) - set(EXAMPLES))
    assert not missing, f"commands without examples in ocibridge/cli_help.py: {missing}"
    for name, parser in commands.items():
        assert "examples:\n  ocibridge " in parser.format_help(), name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_help_example_parses(name):
    parser = build_parser()
    for line in EXAMPLES[name].splitlines():
        argv = _argv(line.strip())
        if "COMMAND" in argv:
            continue
        args = parser.parse_args(argv)  # a stale flag or a missing argument exits 2 here
        assert callable(getattr(args, "func", None)), line


def test_every_command_takes_json():
    for name, parser in subcommands(build_parser()).items():
        if parser._subparsers is not None and name == "k8s":
            continue  # a group: its commands take --json
        assert any("--json" in a.option_strings for a in parser._actions), name


def test_login_and_logout_json(tmp_path, capsys, monkeypatch, auth_registry):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setattr("sys.stdin", io.StringIO(auth_registry.password + "\n"))
    assert main(["login", auth_registry.host, "-u", auth_registry.username, "--password-stdin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "host": auth_registry.host, "username": auth_registry.username, "loggedIn": True, "settings": None}
    assert main(["logout", auth_registry.host, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"host": auth_registry.host, "removed": True}
    assert main(["logout", auth_registry.host, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] is False


def test_python_login(tmp_path, monkeypatch, auth_registry):
    import ocibridge

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    result = ocibridge.login(auth_registry.host, auth_registry.username, auth_registry.password)
    assert (result.host, result.username) == (auth_registry.host, auth_registry.username)
    assert auth_registry.host in (tmp_path / "docker" / "config.json").read_text()
    with pytest.raises(ocibridge.OcibridgeError):
        ocibridge.login(auth_registry.host, auth_registry.username, "wrong")


def test_k8s_volume_json(tmp_path, capsys, registry, unique_repo):
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    capsys.readouterr()
    assert main(["k8s", "volume", ref, "--json"]) == 0
    pod = json.loads(capsys.readouterr().out)  # the Pod itself, as JSON (kubectl takes it)
    assert pod["kind"] == "Pod" and "@sha256:" in pod["spec"]["volumes"][0]["image"]["reference"]


@pytest.mark.parametrize("args", [
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--concurrency", "0"],
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--layer", "weight=zip"],
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--kind", "x"],
    ["pull", "oci:{tmp}/l:v1"],
    ["copy", "oci:{tmp}/l:v1"],
    ["push", "{tmp}/m", "oci:{tmp}/l:v1", "--progress", "fancy"],
    ["sign", "oci:{tmp}/l:v1", "--key", "{tmp}/no-key.pem", "-a", "no-value"],
])
def test_usage_mistakes_exit_2(tmp_path, capsys, args):
    from tests.modelgen import make_model

    make_model(tmp_path / "m")
    try:
        code = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("ocibridge: error:") and err.count("\n") == 1, err


def test_the_package_ships_py_typed():
    from pathlib import Path

    import ocibridge

    root = Path(ocibridge.__file__).parent
    assert (root / "py.typed").is_file()
    pyproject = (root.parent / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\nocibridge = ["py.typed"]' in pyproject
