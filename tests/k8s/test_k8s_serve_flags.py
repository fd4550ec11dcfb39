"""``ocibridge k8s serve`` and serve's own flags: every flag of serve's parser is either carried to
the pods by ``k8s serve`` (given on its line, the value reaches the container's args, where serve's
parser reads it back) or decided in ocibridge/k8s/serveflags.py's table, with the ``k8s serve``
flag standing for it or why none does: a serve flag added without a decision fails here.

The carried ones: ``--verify-key`` and ``--policy`` in ConfigMaps mounted read-only on every pod;
the values passed as given, each to the pods it belongs to (the writer commits, the readers face
users); each value checked as serve checks it (a bad one is one error line, nothing printed;
test_k8s_serve_values.py holds the check to serve's own parser's and builders' words); the
documents pass the Kubernetes client's models and ``kubectl apply --dry-run=client``; serve
started from the emitted container accepts them all; and docs/serve-kubernetes.md's block runs as
printed."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import httpx
import pytest

import ocibridge.api.k8s as api_k8s
from ocibridge.cli import main
from ocibridge.cli.parser import command_parser
from ocibridge.errors import UsageError
from ocibridge.k8s.serveflags import COMMITTING, EVERY_POD, FACING, NOT_PASSED
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import ROOT, checked_list, doc_block_documents
from tests.serving import serve_as_process
from tests.signing_keys import key_pair

SOURCE = "registry.internal:5000/hub"
POLICY = '{"default": [{"type": "insecureAcceptAnything"}]}\n'
#: a sample value of serve's flags, by metavar (the files: by flag, made by the test)
BY_METAVAR = {"SIZE": "48M", "RATE": "20M", "N": "3", "SECONDS": "12", "URL": "https://hub.example",
              "CIDR": "10.0.0.0/8", "GLOB": "acme/*", "ID": "mit", "NAME": "acme", "TAG": "stable",
              "RFC3339": "2026-01-02T03:04:05Z", "DURATION": "30d", "N/PERIOD": "30/min"}
#: what a flag goes with on k8s serve's line (KEY: the private key's path)
CONTEXT = {"--scan-verify-key": ["--scan", "quarantine"], "--sign-form": ["--sign-key", "KEY"],
           "--sbom-time": ["--sbom"], "--attest-key": ["--sbom"],
           "--provenance-time": ["--provenance"], "--upstream-allow-gated": ["--token-secret", "hf-tokens"],
           "--upstream-allow-private": ["--token-secret", "hf-tokens"]}
#: the samples k8s serve gives serve in another spelling (30d in seconds, 48M in bytes)
RESPELLED = {"--upstream-keep": "2592000s", "--upstream-chunk-threshold": "50331648"}
#: every passed flag with a good value, as a user gives them together (--replicas puts each where it belongs)
GOOD = ["--concurrency", "3", "--part-size", "16M", "--parts", "2", "--limit-rate", "100M", "--upload-part-size",
        "8M", "--send-timeout", "20", "--compare-budget", "32M", "--xet-min-size", "4M", "--audit-log", "-",
        "--no-access-log", "--no-metrics", "--staging-budget", "1G", "--staging-expiry", "600",
        "--lfs-multipart-min", "off", "--lfs-part-size", "64M", "--trust-forwarded", "10.0.0.0/8",
        "--trust-forwarded", "fd00::/8", "--upstream", "http://127.0.0.1:9", "--upstream-max-size", "2G",
        "--upstream-quota-namespace", "proxied", "--sbom", "--sbom-time", "2026-01-02T03:04:05Z", "--provenance",
        "--provenance-time", "2026-01-02T03:04:05Z"]


def serve_parser() -> argparse.ArgumentParser:
    return command_parser("serve", "ocibridge serve")


def serve_actions() -> list[argparse.Action]:
    return [a for a in serve_parser()._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def long_flag(action: argparse.Action) -> str:
    return next(s for s in action.option_strings if s.startswith("--"))


def documents(line: list[str], capsys) -> list[dict]:
    capsys.readouterr()
    try:
        code = main(["k8s", "serve", *line, "--json"])
    except SystemExit as e:  # argparse: a flag k8s serve does not know
        code = e.code
    out, err = capsys.readouterr()
    assert code == 0, (line, err)
    return json.loads(out)["items"]


def containers(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]
            for d in docs if d["kind"] == "Deployment"}


@pytest.fixture
def files(tmp_path, monkeypatch) -> dict[str, str]:
    """The files serve's file flags name: a public key, a private key, a policy, a quotas file."""
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    private, public = key_pair(tmp_path, "signer")
    (tmp_path / "policy.json").write_text(POLICY)
    (tmp_path / "quotas.toml").write_text('[namespaces."*"]\nbytes = "1G"\n')
    return {"PUB": str(public), "KEY": str(private), "--policy": str(tmp_path / "policy.json"),
            "--quotas": str(tmp_path / "quotas.toml"), "--audit-log": "-"}


def sample(action: argparse.Action, files: dict[str, str]) -> list[str]:
    """A value serve takes for ``action``, one its default is not."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [next(c for c in action.choices if c != action.default)]
    flag = long_flag(action)
    value = files.get(flag) or files.get(action.metavar or "") or BY_METAVAR.get(action.metavar or "")
    if value is None and action.type in (int, float):
        value = "3"
    assert value is not None, f"{flag}: give the test a sample value for it"
    return [value]


def carries(args: list[str], action: argparse.Action, value: list[str], files: dict[str, str]) -> bool:
    """Whether a container's ``args`` give serve ``action``'s flag with ``value``: as given, or for a
    file of this machine, a path of the pod's that serve's parser reads back."""
    flag = long_flag(action)
    if value and value[0] in files.values():
        return vars(serve_parser().parse_args(args[1:]))[action.dest] != action.default
    given = [RESPELLED.get(flag, v) for v in value]
    return any(args[i:i + 1 + len(value)] == [flag, *given] for i in range(len(args)))


def test_the_table_names_serve_flags_only_and_none_twice():
    flags = {s for a in serve_actions() for s in a.option_strings}
    carried = [*EVERY_POD, *COMMITTING, *FACING]
    assert set(NOT_PASSED) <= flags and set(carried) <= flags
    assert len(set(carried)) == len(carried) and not set(carried) & set(NOT_PASSED)


def test_every_serve_flag_is_carried_or_decided(files, capsys):
    """For each flag of serve's parser: in the table, else k8s serve takes it, and serve's parser
    reads the value back from the container's args (of the writer or the readers: --replicas 2)."""
    undecided = []
    for action in serve_actions():
        flag = long_flag(action)
        if any(s in NOT_PASSED for s in action.option_strings):
            continue
        upstream = ["--upstream", "https://hub.example"] if flag.startswith("--upstream-") else []
        value = sample(action, files)
        context = [files.get(word, word) for word in CONTEXT.get(flag, [])]
        try:
            docs = documents([SOURCE, *upstream, *context, flag, *value, "--replicas", "2"], capsys)
        except AssertionError as e:
            undecided.append(f"{flag}: {e}")
            continue
        if not any(carries(c["args"], action, value, files) for c in containers(docs).values()):
            undecided.append(f"{flag}: no pod's args carry it")
    assert undecided == [], ("decide each in ocibridge/k8s/serveflags.py (NOT_PASSED) or carry it", undecided)


def test_each_flag_goes_to_the_pods_it_belongs_to(files, tmp_path, capsys):
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--verify-key", files["PUB"], "--policy", files["--policy"], *GOOD,
                 "--replicas", "2", "--namespace", "ml", "--validate"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    docs = checked_list(tmp_path, out)  # the client's models and kubectl apply --dry-run=client
    pods = containers(docs)
    writer = serve_parser().parse_args(pods["ocibridge-serve-writer"]["args"][1:])
    reader = serve_parser().parse_args(pods["ocibridge-serve"]["args"][1:])
    for parsed in (writer, reader):  # every pod
        assert (parsed.concurrency, parsed.part_size, parsed.parts_in_flight, parsed.limit_rate) == (3, "16M", 2,
                                                                                                    "100M")
        assert (parsed.upload_part_size, parsed.send_timeout, parsed.compare_budget) == ("8M", 20.0, "32M")
        assert (parsed.xet_min_size, parsed.audit_log, parsed.no_access_log, parsed.no_metrics) == ("4M", "-", True,
                                                                                                   True)
        assert (parsed.upstream_max_size, parsed.upstream_quota_namespace) == ("2G", "proxied")
        assert parsed.verify_key == ["/etc/ocibridge-verify-keys/signer.pub"]
        assert parsed.policy == "/etc/ocibridge-policy/policy.json"
    # the writer commits: it stages the uploads and attests the commits
    assert (writer.staging_budget, writer.staging_expiry, writer.lfs_multipart_min, writer.lfs_part_size) == (
        "1G", 600.0, "off", "64M")
    assert (writer.sbom_time, writer.provenance_time) == ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z")
    assert (reader.staging_budget, reader.staging_expiry, reader.lfs_multipart_min, reader.lfs_part_size) == (
        None, 3600.0, None, None)
    assert reader.sbom_time is None and reader.provenance_time is None
    # users reach the readers, behind the Ingress; the writer believes its readers only
    assert reader.trust_forwarded == ["10.0.0.0/8", "fd00::/8"]
    assert writer.trust_forwarded == ["0.0.0.0/0", "::/0"]
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    public = Path(files["PUB"]).read_text()
    for name in ("ocibridge-serve-writer", "ocibridge-serve"):
        assert maps[f"{name}-verify-keys"]["data"] == {"signer.pub": public}
        assert maps[f"{name}-policy"]["data"] == {"policy.json": POLICY}
        assert maps[f"{name}-policy"]["metadata"]["namespace"] == "ml"
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        mounts = {m["name"]: m for m in pods[name]["volumeMounts"]}
        for suffix, where in (("verify-keys", "/etc/ocibridge-verify-keys"), ("policy", "/etc/ocibridge-policy")):
            assert volumes[suffix]["configMap"] == {"name": f"{name}-{suffix}"}
            assert mounts[suffix] == {"name": suffix, "mountPath": where, "readOnly": True}


def test_bad_values_are_one_error_line_in_serves_words(files, tmp_path, capsys):
    (tmp_path / "junk.pub").write_text("not a key\n")
    (tmp_path / "broken.json").write_text('{"default": []}\n')
    for args, code, words in (
        (["--concurrency", "0"], 2, "--concurrency must be at least 1"),
        (["--concurrency", "x"], 2, "argument --concurrency: invalid int value: 'x'"),
        (["--parts", "0"], 2, "--parts must be at least 1"),
        (["--part-size", "big"], 2, "--part-size: 'big' is not a byte count"),
        (["--limit-rate", "fast"], 2, "--limit-rate: 'fast' is not a byte count"),
        (["--upload-part-size", "8Q"], 2, "--upload-part-size: '8Q' is not a byte count"),
        (["--send-timeout", "0"], 2, "--send-timeout 0.0: expected a number of seconds above 0"),
        (["--compare-budget", "lots"], 2, "--compare-budget: 'lots' is not a byte count"),
        (["--xet-min-size", "5Q"], 2, "--xet-min-size: '5Q' is not a byte count"),
        (["--staging-budget", "0"], 2, "--staging-budget"),
        (["--staging-expiry", "-1"], 2, "--staging-expiry -1.0: expected a number of seconds above 0"),
        (["--lfs-part-size", "0"], 2, "--lfs-part-size: '0' is under one byte"),
        (["--lfs-multipart-min", "huge"], 2, "--lfs-multipart-min: 'huge' is not a byte count"),
        (["--upstream-max-size", "1G"], 2, "--upstream-max-size and --upstream-quota-namespace go with --upstream"),
        (["--upstream", "https://hub.example", "--upstream-quota-namespace", "/"], 2,
         "--upstream-quota-namespace: expected a namespace's name"),
        (["--sbom-time", "2026-01-02T03:04:05Z"], 2, "--provenance-time go with --sbom or --provenance"),
        (["--trust-forwarded", "everyone"], 2, "--trust-forwarded 'everyone': expected an address or a network"),
        (["--audit-log", "/var/log/audit.jsonl"], 2, "--audit-log /var/log/audit.jsonl: in a pod, '-'"),
        (["--verify-key", str(tmp_path / "junk.pub")], 1, "junk.pub: not a PEM public key"),
        (["--verify-key", files["KEY"]], 1, "signer.key: not a PEM public key"),
        (["--verify-key", str(tmp_path / "missing.pub")], 1, "missing.pub: No such file or directory"),
        (["--policy", str(tmp_path / "broken.json")], 2, "broken.json"),
        (["--policy", files["PUB"]], 2, "not JSON"),
    ):
        capsys.readouterr()
        try:
            got = main(["k8s", "serve", SOURCE, *args])
        except SystemExit as e:  # argparse's refusal (serve's parser's, in k8s serve's name)
            got = e.code
        out, err = capsys.readouterr()
        assert (got, out) == (code, ""), (args, err)
        assert err.count("\n") == 1 and words in err and "Traceback" not in err, (args, err)


def test_the_python_api_takes_serves_flags_and_says_why_one_is_not_passed(files):
    done = api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(
        serve_flags=("--no-metrics", "--staging-budget=2G"), verify_keys=files["PUB"], policy=files["--policy"]))
    [deployment] = [d for d in done.documents if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-7:] == ["--verify-key", "/etc/ocibridge-verify-keys/signer.pub", "--policy",
                         "/etc/ocibridge-policy/policy.json", "--no-metrics", "--staging-budget", "2G"]
    for flags, words in ((["--cert", "tls.crt"], "TLS ends at the Ingress"),
                         (["--token-file", "t"], "k8s serve --token-secret"),
                         (["--bogus"], "not one of serve's flags that k8s serve passes"),
                         (["--concurrency"], "--concurrency: expected a value")):
        with pytest.raises(UsageError, match=words):
            api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(serve_flags=flags))


def test_a_policy_naming_key_files_by_path_is_warned_about(tmp_path, capsys):
    policy = tmp_path / "paths.json"
    policy.write_text('{"default": [{"type": "sigstoreSigned", "keyPath": "/etc/keys/signer.pub"}]}\n')
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--policy", str(policy)]) == 0
    assert "--policy names key files by path (keyPath, keyPaths)" in capsys.readouterr().err


def test_serve_starts_from_the_emitted_args(files, tmp_path, capsys, registry, unique_repo):
    """One pod's args, env and ConfigMaps laid out here (each mount a directory of the test): serve
    takes every carried flag at once, answers no /metrics, and writes a refused write's audit line
    on its stdout."""
    items = documents([f"{registry.host}/{unique_repo}", "--verify-key", files["PUB"], "--policy",
                       files["--policy"], *GOOD], capsys)
    pod = next(i for i in items if i["kind"] == "Deployment")["spec"]["template"]["spec"]
    maps = {i["metadata"]["name"]: i["data"] for i in items if i["kind"] == "ConfigMap"}
    [c] = pod["containers"]
    here = {m["mountPath"]: tmp_path / "pod" / m["name"] for m in c["volumeMounts"]}
    for volume in pod["volumes"]:
        [directory] = [here[m["mountPath"]] for m in c["volumeMounts"] if m["name"] == volume["name"]]
        directory.mkdir(parents=True)
        for key, text in maps.get(volume.get("configMap", {}).get("name"), {}).items():
            (directory / key).write_text(text)

    def local(text: str) -> str:
        for path, directory in here.items():
            if text == path or text.startswith(path + "/"):
                return str(directory) + text[len(path):]
        return text

    env = {**os.environ, "PYTHONPATH": str(ROOT), **{e["name"]: local(e["value"]) for e in c["env"]}}
    args = [local(a) for a in c["args"]]
    assert args[0] == "serve" and str(tmp_path / "pod" / "policy" / "policy.json") in args
    log = tmp_path / "serve.log"
    with serve_as_process(args[1:], env, log) as url:  # its --listen last
        assert httpx.get(f"{url}/metrics").status_code == 404  # --no-metrics
        refused = httpx.post(f"{url}/api/repos/create", json={"name": "acme/flags", "type": "model"})
        assert refused.status_code in (401, 403)
    audit = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert [(a["action"], a["outcome"]) for a in audit] == [("create_repo", "refused")]
    assert "GET /metrics" not in log.read_text()  # --no-access-log


def test_the_docs_settings_block_runs_as_printed(doc_env):  # noqa: F811
    work, docs = doc_block_documents(doc_env, "serve-kubernetes.md", "--verify-key", "serve-settings.yaml")
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    assert maps["ocibridge-serve-verify-keys"] == {"signers.pub": (work / "signers.pub").read_text()}
    assert maps["ocibridge-serve-policy"] == {"policy.json": (work / "pods-policy.json").read_text()}
    pods = containers(docs)
    assert "--staging-budget" in pods["ocibridge-serve-writer"]["args"]
    assert "--staging-budget" not in pods["ocibridge-serve"]["args"]
