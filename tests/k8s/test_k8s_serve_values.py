"""``k8s serve``'s values of serve's flags are checked once, for the command and the Python API
alike, in serve's own words: a value ``ocibridge serve`` refuses at start (what its parser and option
builders say, run here as serve runs them) is the same one error line from ``ocibridge k8s serve``
and the same :class:`UsageError` from ``k8s_serve(serve_flags=...)``, never documents whose pods
fail at start. And a proxy without tokens is warned about: its anonymous clients arriving from one
address (an Ingress', a node's, as the Service's exposure makes it) share one per-client budget,
unless the user accepts that (``--upstream-anonymous-shared-budget``)."""

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


#: where anonymous clients arrive from, as the warning says it for each exposure
ARRIVAL = {
    "ClusterIP": "the ClusterIP Service is reached from inside the cluster, each pod from its own address, but "
                 "through an Ingress or a proxy put in front of it every client arrives from that one's address",
    "NodePort": "through the NodePort Service every client from outside the cluster arrives from the address of the "
                "node it came in by",
    "LoadBalancer": "through the LoadBalancer Service every client arrives from the address of the node the load "
                    "balancer sent it to",
    "ClusterIP behind an Ingress ending TLS": "behind the Ingress that ends TLS for --public-url every client "
                                              "arrives from the Ingress controller's address",
}


def _exposure(name: str) -> list[str]:
    kind, _, ingress = name.partition(" ")
    return ["--service-type", kind] + (["--public-url", "https://hub.example.com"] if ingress else [])


@pytest.mark.parametrize("exposure", list(ARRIVAL))
def test_the_shared_budget_warning_says_where_clients_arrive_from_for_the_exposure(exposure, capsys):
    """It named the Ingress whatever the exposure: a LoadBalancer's clients come from the nodes."""
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--upstream", UPSTREAM, *_exposure(exposure)]) == 0
    [line] = [e for e in capsys.readouterr().err.splitlines() if SHARED_BUDGET in e]
    assert f"their address, and {ARRIVAL[exposure]}" in line, line
    assert ("Ingress" in line) == ("Ingress" in exposure or exposure == "ClusterIP"), line
    assert line.endswith("or pass --upstream-anonymous-shared-budget to accept it"), line
    [warning] = api_k8s.k8s_serve([SOURCE], _api_options(exposure)).warnings
    assert line == f"ocibridge: {warning}"


def _api_options(exposure: str, **more: object) -> api_k8s.K8sServeOptions:
    kind, _, ingress = exposure.partition(" ")
    return api_k8s.K8sServeOptions(upstream=UPSTREAM, service_type=kind,
                                   public_url="https://hub.example.com" if ingress else None, **more)  # type: ignore


@pytest.mark.parametrize("exposure", ["ClusterIP", "LoadBalancer"])
def test_a_user_who_accepts_the_shared_budget_silences_its_warning(exposure, capsys):
    capsys.readouterr()
    argv = ["k8s", "serve", SOURCE, "--upstream", UPSTREAM, *_exposure(exposure)]
    assert main([*argv, "--upstream-anonymous-shared-budget"]) == 0
    out, err = capsys.readouterr()
    assert "kind: Deployment" in out and err == "", err
    assert "--upstream-anonymous-shared-budget" not in out  # k8s serve's own: not passed to serve
    assert main(argv) == 0  # not accepted: warned
    assert SHARED_BUDGET in capsys.readouterr().err
    assert api_k8s.k8s_serve([SOURCE], _api_options(exposure, anonymous_shared_budget=True)).warnings == ()


@pytest.mark.parametrize("line, words", [
    ([], "--upstream-anonymous-shared-budget: the --upstream-* flags go with --upstream URL"),
    (["--upstream", UPSTREAM, "--token-secret", "hf-tokens"],
     "--upstream-anonymous-shared-budget goes with --upstream without --token-secret"),
], ids=["without --upstream", "with --token-secret"])
def test_accepting_a_shared_budget_there_is_not_is_a_usage_error(line, words, capsys):
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, *line, "--upstream-anonymous-shared-budget"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err, err
    with pytest.raises(UsageError, match=words.replace("*", r"\*")):
        api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(
            upstream=UPSTREAM if line else None, token_secret="hf-tokens" if line else None,
            anonymous_shared_budget=True))


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
