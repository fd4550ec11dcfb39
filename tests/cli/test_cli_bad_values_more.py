"""More hostile values and combinations on the command line: each is one ``ocibridge: error:``
line and a usage exit, never a traceback, never a value taken silently."""

from __future__ import annotations

import pytest
from support.faultproxy import status

from ocibridge.cli import main
from tests.support.cli_run import one_error_line

#: an address serve refuses after its options: a line whose options pass never starts a server here
_NO_LISTEN = ["--listen", "127.0.0.1:99999"]


@pytest.mark.parametrize("command", [["serve", "oci:{tmp}/none"], ["k8s", "serve", "reg.example/team"]],
                         ids=["serve", "k8s serve"])
@pytest.mark.parametrize("value", ["-1", "nan"])
@pytest.mark.parametrize("with_upstream", [False, True], ids=["alone", "with --upstream"])
def test_upstream_fresh_of_no_number_of_seconds_is_refused_with_or_without_upstream(
        command, value, with_upstream, tmp_path, capsys):
    """A serve without --upstream ignored --upstream-fresh: -1 and nan were taken and serve ran."""
    argv = [word.format(tmp=tmp_path) for word in command] + _NO_LISTEN * (command[0] == "serve")
    argv += [f"--upstream-fresh={value}"] + ["--upstream", "http://127.0.0.1:9"] * with_upstream
    assert main(argv) == 2
    assert f"--upstream-fresh {float(value)}: expected a number of seconds, 0 or more" in one_error_line(capsys)


@pytest.mark.parametrize("command", [["serve", "oci:{tmp}/none"], ["k8s", "serve", "reg.example/team"]],
                         ids=["serve", "k8s serve"])
@pytest.mark.parametrize("flags", [["--upstream-fresh", "60"], ["--upstream-deny", "a/*"],
                                   ["--upstream-max-fetches", "3"]], ids=lambda flags: flags[0])
def test_an_upstream_flag_without_upstream_names_itself(command, flags, tmp_path, capsys):
    """A proxy's flag without --upstream is a usage error naming the flag (--upstream-fresh was
    taken silently by serve: the typo'd --upstrem line ran without its proxy)."""
    argv = [word.format(tmp=tmp_path) for word in command] + _NO_LISTEN * (command[0] == "serve")
    assert main([*argv, *flags]) == 2
    assert f"error: {flags[0]}: the --upstream-* flags go with --upstream URL" in one_error_line(capsys)


@pytest.mark.parametrize(("argv", "help_of"), [
    (["k8s", "serve", "reg.example/team", "--upstream-fresh", "60"], "k8s serve"),
    (["warm", "save", "oci:{tmp}/lay:v1", ""], "warm save"),
    (["serve", "oci:{tmp}/none", "--upstream-fresh", "60", *_NO_LISTEN], "serve"),
], ids=["k8s serve", "warm save", "serve"])
def test_a_subcommands_usage_error_points_at_its_own_help(argv, help_of, tmp_path, capsys):
    """A mistake the command finds (not its parser) pointed at the group's help ('ocibridge k8s
    --help'), which lists the subcommands but none of their flags."""
    assert main([word.format(tmp=tmp_path) for word in argv]) == 2
    assert one_error_line(capsys).endswith(f"(see 'ocibridge {help_of} --help')")


@pytest.mark.parametrize(("argv", "flag"), [
    (["sign", "oci:{tmp}/lay:v1", "--key", "{tmp}/k.key", "--identity", ""], "--identity"),
    (["warm", "save", "oci:{tmp}/lay:v1", "{tmp}", "--key", "{tmp}/k.key", "--identity", ""], "--identity"),
    (["push", "{tmp}/m", "oci:{tmp}/out:v1", "--created", ""], "--created"),
    (["push", "{tmp}/m", "oci:{tmp}/out:v1", "--sbom", "--sbom-time", ""], "--sbom-time"),
    (["attest", "oci:{tmp}/lay:v1", "--key", "{tmp}/k.key", "--sbom", "--sbom-time", ""], "--sbom-time"),
    (["push", "{tmp}/m", "oci:{tmp}/out:v1", "--provenance", "--provenance-time", ""], "--provenance-time"),
], ids=["sign --identity", "warm save --identity", "push --created", "push --sbom-time", "attest --sbom-time",
        "push --provenance-time"])
def test_an_explicitly_empty_value_is_no_flag_left_out(argv, flag, tmp_path, capsys):
    """``--identity "$REPO"`` with the variable unset was taken as no --identity (the signature
    named where REF is), --created '' as no createdAt, --sbom-time '' as no timestamp: silently."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "README.md").write_text("# m\n")
    with pytest.raises(SystemExit) as exited:  # the parser's refusal
        main([word.format(tmp=tmp_path) for word in argv])
    assert exited.value.code == 2
    line = one_error_line(capsys)
    assert f"argument {flag}: an empty value" in line, line
    assert not (tmp_path / "out").exists()


def test_serve_usage_of_a_registry_that_does_not_answer_is_an_error(capsys):
    """The catalog's failure was taken as a registry of no repositories: an empty table, exit 0."""
    assert main(["serve-usage", "127.0.0.1:9/team"]) == 1
    line = one_error_line(capsys)
    assert "registry 127.0.0.1:9: connection refused" in line, line


def test_serve_usage_of_a_registry_that_does_not_list_its_repositories_is_an_error(fault_proxy, capsys):
    """A registry answering /v2/ but refusing its catalog (Docker Hub's) cannot be counted:
    its table was empty, exit 0, as if no namespace held a byte."""
    fault_proxy.add("GET", r"/v2/_catalog", status(404), times=None)
    assert main(["serve-usage", f"{fault_proxy.host}/usage-team"]) == 1
    line = one_error_line(capsys)
    assert f"{fault_proxy.host}/usage-team: the registry does not list its repositories" in line, line
