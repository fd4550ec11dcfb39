"""``k8s serve``'s values of serve's flags are checked once, for the command and the Python API
alike, in serve's own words: a value ``ocibridge serve`` refuses at start (what its parser and option
builders say, run here as serve runs them) is the same one error line from ``ocibridge k8s serve``
and the same :class:`UsageError` from ``k8s_serve(serve_flags=...)``, never documents whose pods
fail at start. And a proxy without tokens behind an Ingress is warned about: its anonymous clients
all come from the Ingress' address and share one per-client budget."""

from __future__ import annotations

from typing import NoReturn

import pytest

import ocibridge.api.k8s as api_k8s
from ocibridge.api.serve import check_serve_options
from ocibridge.cli import main
from ocibridge.cli.common import transfer_options
from ocibridge.cli.evidence_flags import attest_options
from ocibridge.cli.parser import command_parser
from ocibridge.cli.serve import serve_options
from ocibridge.errors import UsageError

SOURCE = "registry.internal:5000/hub"
UPSTREAM = "https://hub.example"
HELP = " (see 'ocibridge k8s serve --help')"
#: serve's flags as given on k8s serve's line, with what they go with (--upstream, --sbom), each refused
BAD = {
    "negative number": ["--concurrency", "-1"],
    "not a number": ["--parts", "two"],
    "seconds not above zero": ["--send-timeout", "-5"],
    "negative expiry": ["--staging-expiry", "-1"],
    "empty size": ["--staging-budget", ""],
    "empty number": ["--concurrency", ""],
    "not a size": ["--xet-min-size", "5Q"],
    "upstream flag without --upstream": ["--upstream-asks-per-client", "5/s"],
    "upstream size without --upstream": ["--upstream-max-size", "1G"],
    "a bad ask rate": ["--upstream", UPSTREAM, "--upstream-asks-per-client", "lots"],
    "an empty quota namespace": ["--upstream", UPSTREAM, "--upstream-quota-namespace", "/"],
    "not a network": ["--trust-forwarded", "everyone"],
    "a time without --sbom": ["--sbom-time", "2026-01-02T03:04:05Z"],
}


def serves_words(line: list[str]) -> str:
    """What ``ocibridge serve`` says of ``line`` at start: its own parser, then the builders of its
    options and their check, as cmd_serve runs them (nothing is served)."""
    parser = command_parser("serve", "ocibridge serve")

    def refuse(message: str) -> NoReturn:
        raise UsageError(message)

    parser.error = refuse  # type: ignore[method-assign]  # argparse's refusal as an exception, its words kept
    try:
        parsed = parser.parse_args([SOURCE, *line])
        transfer_options(parsed)
        attest_options(parsed, "serve")
        check_serve_options(serve_options(parsed))
    except UsageError as e:
        return str(e)
    raise AssertionError(f"serve takes {line}")


def api_options(line: list[str]) -> api_k8s.K8sServeOptions:
    """``line`` as the Python API takes it: --upstream and --sbom are k8s serve's, the rest serve's flags."""
    upstream = line[line.index("--upstream") + 1] if "--upstream" in line else None
    flags = [w for i, w in enumerate(line) if w != "--upstream" and (i == 0 or line[i - 1] != "--upstream")]
    return api_k8s.K8sServeOptions(upstream=upstream, serve_flags=tuple(flags))


@pytest.mark.parametrize("line", BAD.values(), ids=BAD.keys())
def test_the_api_refuses_what_the_command_refuses_in_serves_words(line, capsys):
    words = serves_words(line)
    capsys.readouterr()
    try:
        code = main(["k8s", "serve", SOURCE, *line])
    except SystemExit as e:  # a refusal by an argparse parser
        code = e.code
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"ocibridge: error: {words}{HELP}\n")
    with pytest.raises(UsageError) as refused:
        api_k8s.k8s_serve([SOURCE], api_options(line))
    assert str(refused.value) == words


def test_the_api_still_takes_good_values():
    line = ["--upstream", UPSTREAM, "--concurrency", "3", "--parts=2", "--send-timeout", "0.5", "--xet-min-size",
            "off", "--lfs-multipart-min", "None", "--upstream-asks-per-client", "off", "--trust-forwarded",
            "10.0.0.0/8", "--no-metrics"]
    done = api_k8s.k8s_serve([SOURCE], api_options(line))
    [deployment] = [d for d in done.documents if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-15:] == ["--concurrency", "3", "--parts", "2", "--send-timeout", "0.5", "--xet-min-size", "off",
                          "--upstream-asks-per-client", "off", "--no-metrics", "--lfs-multipart-min", "None",
                          "--trust-forwarded", "10.0.0.0/8"]


SHARED_BUDGET = "--upstream without --token-secret: serve tells anonymous clients apart by their address"


@pytest.mark.parametrize("line, warned", [(["--upstream", UPSTREAM], True),
                                          (["--upstream", UPSTREAM, "--token-secret", "hf-tokens"], False),
                                          ([], False)], ids=["anonymous proxy", "proxy with tokens", "no proxy"])
def test_an_anonymous_proxy_is_warned_of_its_shared_budget(line, warned, capsys):
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, *line]) == 0
    out, err = capsys.readouterr()
    assert "kind: Deployment" in out
    lines = [e for e in err.splitlines() if SHARED_BUDGET in e]
    assert len(lines) == int(warned), err
    if warned:
        assert lines[0].startswith("ocibridge: warning: ") and "--upstream-asks-per-client budget" in lines[0]


def test_every_number_flag_k8s_serve_passes_is_read_as_serve_reads_it() -> None:
    """The shared check reads numbers by its own table: a flag serve's parser takes as an int or a
    float, passed into the pods, with no entry there would go through unchecked."""
    from ocibridge.api.k8s_serve_values import NUMBERS
    from ocibridge.k8s.serveflags import COMMITTING, EVERY_POD, FACING

    passed = set(EVERY_POD) | set(COMMITTING) | set(FACING)
    parser = command_parser("serve", "ocibridge serve")
    typed = {flag: action.type for action in parser._actions if action.type in (int, float)
             for flag in action.option_strings if flag in passed}
    assert typed, "serve's parser names no number among the passed flags: the walk above is wrong"
    assert {flag: NUMBERS.get(flag) for flag in typed} == typed
