"""Conventions every command keeps (issue 18): examples in --help that parse as written,
--json everywhere (login and logout included, against a real htpasswd registry), exit 2 for
usage mistakes."""

from __future__ import annotations

import io
import json
import shlex

import pytest

from ocibridge.cli import main
from ocibridge.cli.help import EXAMPLES, subcommands
from ocibridge.cli.parser import build_parser


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
    assert not missing, f"commands without examples in ocibridge/cli/help.py: {missing}"
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
        if parser._subparsers is not None and name in ("k8s", "warm"):
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


def test_login_takes_a_url_and_logout_forgets_what_it_stored(tmp_path, capsys, monkeypatch, auth_registry):
    """``login https://HOST/v2/`` (as ``docker login`` takes a URL) keeps the credentials under
    HOST, and ``logout docker://HOST`` finds them there: before, logout said "not logged in" and
    left them in the file."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setattr("sys.stdin", io.StringIO(auth_registry.password + "\n"))
    url = f"https://{auth_registry.host}/v2/"
    assert main(["login", url, "-u", auth_registry.username, "--password-stdin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["host"] == auth_registry.host
    assert auth_registry.host in json.loads((tmp_path / "docker" / "config.json").read_text())["auths"]
    assert main(["logout", f"docker://{auth_registry.host}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"host": auth_registry.host, "removed": True}
    assert auth_registry.host not in json.loads((tmp_path / "docker" / "config.json").read_text()).get("auths", {})


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


def _usage_error(argv: list[str], capsys) -> tuple[object, str]:
    try:
        code: object = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(subcommands(build_parser())))
def test_a_usage_mistake_points_at_the_commands_own_help(name, capsys, tmp_path, monkeypatch):
    """An unknown flag after a command names that command's help, not the top-level one,
    whether or not its arguments are complete: one line, exit 2. (The parsers are built lazily:
    only the typed one.) Nothing runs: the flag fails the parse."""
    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    words = name.split()
    for extra in (["--bogus"], ["a", "b", "c", "d", "--bogus"]):
        code, err = _usage_error([*words, *extra], capsys)
        assert code == 2, (extra, err)
        assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
        assert err.endswith(f" (see 'ocibridge {name} --help')\n"), err


def test_an_unknown_flag_after_a_complete_command_is_named(tmp_path, capsys):
    code, err = _usage_error(["validate", f"oci:{tmp_path}/l:v1", "--bogus"], capsys)
    assert (code, err) == (2, "ocibridge: error: unrecognized arguments: --bogus (see 'ocibridge validate --help')\n")
    code, err = _usage_error(["k8s", "check", f"oci:{tmp_path}/l:v1", "--bogus"], capsys)
    assert (code, err) == (2, "ocibridge: error: unrecognized arguments: --bogus "
                              "(see 'ocibridge k8s check --help')\n")
    code, err = _usage_error(["validate", f"oci:{tmp_path}/l:v1", "stray"], capsys)
    assert (code, err) == (2, "ocibridge: error: unrecognized arguments: stray (see 'ocibridge validate --help')\n")
    code, err = _usage_error(["--bogus", "validate", f"oci:{tmp_path}/l:v1"], capsys)  # before the command
    assert (code, err) == (2, "ocibridge: error: unrecognized arguments: --bogus (see 'ocibridge --help')\n")


def test_mirror_without_a_job_names_only_the_job(capsys):
    """REPORT (the words after 'mirror report') is not a required argument of a job run."""
    code, err = _usage_error(["mirror"], capsys)
    assert (code, err) == (2, "ocibridge: error: the following arguments are required: JOB "
                              "(see 'ocibridge mirror --help')\n")


@pytest.mark.parametrize(("argv", "missing"), [
    (["sign"], "REF"), (["attest"], "REF"), (["verify-dir"], "DIR"), (["attach"], "REF"),
    (["convert"], "SRC, DST"), (["save"], "REF"), (["convert", "a"], "DST"),
    (["sign", "a"], "--key"), (["convert", "a", "b"], "--to"), (["save", "a"], "-o/--output"),
])
def test_a_missing_positional_is_named_before_a_missing_required_flag(argv, missing, capsys):
    """``ocibridge sign`` alone said '--key' is required, not the REF it signs: flags are parsed
    before positionals (intermixed), and argparse checked the required flags there. The
    positionals are now named first; a required flag once they are all given."""
    code, err = _usage_error(argv, capsys)
    assert (code, err) == (2, f"ocibridge: error: the following arguments are required: {missing} "
                              f"(see 'ocibridge {argv[0]} --help')\n")


@pytest.mark.parametrize(("argv", "said"), [
    (["sign", "a", "--bogus"], "unrecognized arguments: --bogus"),
    (["sign", "a", "--kye", "k"], "unrecognized arguments: --kye k; did you mean '--key'?"),
    (["sign", "--bogus"], "unrecognized arguments: --bogus"),
    (["convert", "--xyzzy"], "unrecognized arguments: --xyzzy"),
    (["convert", "a", "b", "--tto", "x"], "unrecognized arguments: --tto x; did you mean '--to'?"),
    (["sign", "a", "b"], "the following arguments are required: --key"),  # a word too many: after the flag
])
def test_an_unknown_flag_is_named_before_a_missing_argument(argv, said, capsys):
    """``ocibridge sign a --bogus`` said '--key' is required, not that --bogus is unknown, and
    ``sign --bogus`` that REF is: an unknown flag is the bigger mistake (perhaps --key misspelled),
    so it is named first; then a missing positional, then a missing required flag."""
    code, err = _usage_error(argv, capsys)
    assert (code, err) == (2, f"ocibridge: error: {said} (see 'ocibridge {argv[0]} --help')\n")


def test_a_required_flag_is_still_shown_required_in_the_usage(capsys):
    """The required flags are checked after the positionals; --help still shows them required."""
    with pytest.raises(SystemExit) as done:
        main(["sign", "--help"])
    usage = " ".join(capsys.readouterr().out.split("options:")[0].split())
    assert done.value.code == 0 and " --key KEY " in usage and "[--key KEY]" not in usage, usage


def test_the_package_ships_py_typed():
    from pathlib import Path

    import ocibridge

    root = Path(ocibridge.__file__).parent
    assert (root / "py.typed").is_file()
    import tomllib

    shipped = tomllib.loads((root.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in shipped["ocibridge"]
    # and serve's page templates and stylesheet (hubserver/web), which a wheel holds only when named
    for pattern in shipped["ocibridge"][1:]:
        assert list(root.glob(pattern)), pattern
    assert any(p.endswith("*.html") for p in shipped["ocibridge"])


def test_each_command_lives_in_its_group_module():
    """One module per command group (issue 27): every command's function is in a cli module
    that registers it through ``register(command)``, none in the parser, the entry point or the
    shared helpers, and every module with a ``register`` adds at least one command."""
    import importlib
    import pkgutil

    import ocibridge.cli

    homes = {name: func.__module__ for name, parser in subcommands(build_parser()).items()
             if (func := parser.get_default("func")) is not None}
    assert {"push", "tags", "login", "k8s check", "convert", "sign"} <= set(homes)
    groups = {f"ocibridge.cli.{m.name}" for m in pkgutil.iter_modules(ocibridge.cli.__path__)
              if hasattr(importlib.import_module(f"ocibridge.cli.{m.name}"), "register")}
    assert set(homes.values()) == groups
    assert not groups & {"ocibridge.cli.parser", "ocibridge.cli.entry", "ocibridge.cli.common"}
