"""``ocibridge k8s serve --scan MODE --scan-verify-key PUB``: serve's content scan reaches the pods.
Each key is read and checked here, carried as its public PEM in a ConfigMap mounted read-only,
and named to serve by its mounted path; the writer and every reader get them (a reader holds a
quarantined model back too). The documents pass the Kubernetes client's models and ``kubectl
apply --dry-run=client``; the container's args parse with ocibridge's own serve parser and their
keys, laid out as the pod sees them, are the keys serve's quarantine trusts. ``--scan quarantine``
without a key is one error line, as serve refuses it at start; the Python API says the same;
docs/serve-kubernetes.md's block runs as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import ocibridge.api.k8s as api_k8s
from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from ocibridge.errors import UsageError
from ocibridge.hubserver.repo.quarantined import trusted_keys
from ocibridge.signing.keys import load_public_key, public_pem
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import ROOT, checked, checked_list, doc_block_configmap
from tests.serve.test_serve_cli import free_port
from tests.signing_keys import key_pair

SOURCE = "registry.internal:5000/hub"


def keys_as_mounted(pod: dict, config_maps: dict[str, dict], here: Path) -> list[Path]:
    """The files serve's --scan-verify-key args name, laid out under ``here`` from the ConfigMap
    mounted where they point (read-only, a directory of its own)."""
    [c] = pod["containers"]
    args = c["args"]
    named = [args[i + 1] for i, a in enumerate(args) if a == "--scan-verify-key"]
    volume = next(v for v in pod["volumes"] if v["name"] == "scan-keys")
    [mount] = [m for m in c["volumeMounts"] if m["name"] == "scan-keys"]
    assert mount["readOnly"] and "subPath" not in mount
    data = config_maps[volume["configMap"]["name"]]["data"]
    laid_out = []
    for path in named:
        directory, _, key = path.rpartition("/")
        assert directory == mount["mountPath"]
        (here / key).write_text(data[key])
        laid_out.append(here / key)
    assert len(laid_out) == len(data)  # every key carried is named to serve
    return laid_out


def test_quarantine_keys_reach_the_writer_and_every_reader(tmp_path, capsys):
    _, first = key_pair(tmp_path / "a", "release")
    _, second = key_pair(tmp_path / "b", "release")  # the same file name: each keeps its own key
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--scan", "quarantine", "--scan-verify-key", str(first),
                 "--scan-verify-key", str(second), "--replicas", "2", "--namespace", "ml"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    docs = checked_list(tmp_path, out)
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    assert set(maps) == {"ocibridge-serve-writer-scan-keys", "ocibridge-serve-scan-keys"}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert len(deployments) == 2
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        parsed = build_parser(lazy=True).parse_args(args)  # serve's own parser takes the pod's line
        assert parsed.scan == "quarantine" and len(parsed.scan_verify_key) == 2
        here = tmp_path / "pod" / deployment["metadata"]["name"]
        here.mkdir(parents=True)
        laid_out = keys_as_mounted(pod, maps, here)
        assert parsed.scan_verify_key == [str(p).replace(str(here), "/etc/ocibridge-scan-keys") for p in laid_out]
        trusted = trusted_keys([str(p) for p in laid_out], None)  # what serve's --scan quarantine trusts
        assert [public_pem(k) for _, k in trusted] == [public_pem(load_public_key(p)) for p in (first, second)]


def test_the_quarantining_container_starts_as_emitted(tmp_path, capsys, registry, unique_repo):
    """The Deployment's args, env and mounts, laid out here (each mount a directory of the test,
    the ConfigMap's keys its files): serve starts with --scan quarantine and its keys, and its
    probe answers (serve stops at start on a key it cannot read, or none to trust)."""
    _, public = key_pair(tmp_path / "keys", "release")
    capsys.readouterr()
    assert main(["k8s", "serve", f"{registry.host}/{unique_repo}", "--plain-http", "--scan", "quarantine",
                 "--scan-verify-key", str(public), "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    [config] = [i for i in items if i["kind"] == "ConfigMap"]
    [c] = [i for i in items if i["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["containers"]
    here = {m["mountPath"]: tmp_path / "pod" / m["name"] for m in c["volumeMounts"]}
    for directory in here.values():
        directory.mkdir(parents=True)
    for key, text in config["data"].items():
        (here["/etc/ocibridge-scan-keys"] / key).write_text(text)
    port = free_port()

    def local(text: str) -> str:
        for path, directory in here.items():
            if text == path or text.startswith(path + "/"):
                return str(directory) + text[len(path):]
        return f"127.0.0.1:{port}" if text == ":8080" else text

    env = {**os.environ, "PYTHONPATH": str(ROOT), **{e["name"]: local(e["value"]) for e in c["env"]}}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", *map(local, c["args"])], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_scan_refuse_passes_the_mode_and_carries_no_keys(tmp_path, capsys):
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--scan", "refuse"]) == 0
    docs = checked(tmp_path, capsys.readouterr().out)
    assert list(docs) == ["PersistentVolumeClaim", "Deployment", "Service"]
    [c] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert c["args"][-2:] == ["--scan", "refuse"] and "--scan-verify-key" not in c["args"]
    assert build_parser(lazy=True).parse_args(c["args"]).scan == "refuse"
    assert all(m["name"] != "scan-keys" for m in c["volumeMounts"])


def test_what_serve_would_refuse_at_start_is_one_error_line_here(tmp_path, capsys):
    _, public = key_pair(tmp_path, "release")
    private = tmp_path / "release.key"
    for args, words in (
        (["--scan", "quarantine"], "--scan quarantine releases a model on a signed scan report only: give k8s "
                                   "serve --scan-verify-key PUB"),
        (["--scan-verify-key", str(public)], "--scan-verify-key goes with --scan quarantine"),
        (["--scan", "refuse", "--scan-verify-key", str(public)], "--scan-verify-key goes with --scan quarantine"),
        (["--scan", "quarantine", "--scan-verify-key", str(private)], f"--scan-verify-key {private}: not a PEM "
                                                                      "public key"),
        (["--scan", "quarantine", "--scan-verify-key", str(tmp_path / "missing.pub")],
         f"--scan-verify-key {tmp_path / 'missing.pub'}:"),
    ):
        capsys.readouterr()
        assert main(["k8s", "serve", SOURCE, *args]) == 2, args
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err, (args, err)


def test_the_python_api_takes_the_same_options(tmp_path):
    _, public = key_pair(tmp_path, "release")
    done = api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(scan="quarantine", scan_verify_keys=[str(public)]))
    [config] = [d for d in done.documents if d["kind"] == "ConfigMap"]
    assert config["data"] == {"release.pub": public.read_text()}
    [deployment] = [d for d in done.documents if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--scan", "quarantine", "--scan-verify-key", "/etc/ocibridge-scan-keys/release.pub"]
    with pytest.raises(UsageError, match="--scan quarantine releases a model"):
        api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(scan="quarantine"))
    with pytest.raises(UsageError, match="--scan strict: one of refuse, quarantine, off"):
        api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(scan="strict"))


def test_the_image_has_the_scanner():
    """The pods' serve --scan needs ocibridge[scan]: the Containerfile's image installs it."""
    text = (ROOT / "Containerfile").read_text()
    assert re.search(r"/src\[[a-z,]*\bscan\b[a-z,]*\]", text)
    assert "import starlette, uvicorn, mfusepy, picklescan" in text  # the build fails without it


def test_the_image_has_the_evidence_extra():
    """The pods' serve --sbom needs ocibridge[evidence] (cyclonedx-python-lib, packageurl-python)."""
    text = (ROOT / "Containerfile").read_text()
    assert re.search(r"/src\[[a-z,]*\bevidence\b[a-z,]*\]", text)
    assert re.search(r"python3 -c 'import [a-z, ]*\bcyclonedx, packageurl'", text)  # the build fails without it


def test_the_docs_scan_block_runs_as_printed(doc_env):  # noqa: F811
    work, data = doc_block_configmap(doc_env, "--scan-verify-key", "serve-scan.yaml")
    assert data == {"releaser.pub": (work / "releaser.pub").read_text()}
