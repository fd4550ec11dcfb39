"""``ocibridge k8s serve --sign-key-secret SECRET``: serve's commit signing from a Secret the
cluster already has (sealed-secrets, external-secrets, Vault keep keys out of Git). Its key
``sign.key`` is mounted read-only as serve's ``--sign-key``, its optional key ``password`` reaches
serve as $COSIGN_PASSWORD through an optional secretKeyRef, and the output holds nothing secret:
no Secret, no warning, no byte of the key or its password. With replicas under ``--scan
quarantine`` the readers cannot learn the writer's public half here, so ``--scan-verify-key`` is
required (one error line otherwise). The container, laid out here with the Secret that ``kubectl
create secret generic`` makes (as the docs say) at its mount, signs a commit published through
it with huggingface_hub, and ``ocibridge verify`` accepts it."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml

import ocibridge.api.k8s as api_k8s
from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from ocibridge.hubserver.repo.quarantined import trusted_keys
from ocibridge.signing.keys import load_public_key, public_pem
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import checked, checked_list, doc_block_run
from tests.k8s.test_k8s_serve_scan import keys_as_mounted
from tests.k8s.test_k8s_serve_sign import KEY_PATH, SOURCE, keygen, publish_through_the_pod, secret_material
from tests.signing_keys import key_pair

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

PASSWORD = "commit-key-password"


def kubectl_secret(tmp_path: Path, name: str, key: Path, password: str | None,
                   file: str = "sign.key") -> dict[str, bytes]:
    """The data of the Secret ``kubectl create secret generic`` makes, as the docs make it."""
    argv = ["kubectl", "create", "secret", "generic", name, f"--from-file={file}={key}",
            *([f"--from-literal=password={password}"] if password else []), "--dry-run=client", "-o", "yaml"]
    made = yaml.safe_load(subprocess.run(argv, check=True, capture_output=True, text=True, cwd=tmp_path).stdout)
    return {k: base64.b64decode(v) for k, v in made["data"].items()}


def assert_nothing_secret(text: str, key: Path, password: str | None) -> None:
    for secret in secret_material(key, password):
        assert secret not in text
    assert "PRIVATE KEY" not in text


def test_a_named_secret_is_mounted_and_nothing_secret_is_printed(tmp_path, capsys, monkeypatch):
    private, _ = keygen(tmp_path / "signer", PASSWORD)  # a key of this machine: none of it may leak
    monkeypatch.setenv("COSIGN_PASSWORD", PASSWORD)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key-secret", "commit-signer", "--sign-form", "bundle",
                 "--namespace", "ml"]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err and "private key" not in err
    assert_nothing_secret(out + err, private, PASSWORD)
    docs = checked(tmp_path, out)  # the client's models and kubectl apply --dry-run=client
    assert list(docs) == ["PersistentVolumeClaim", "Deployment", "Service"]  # no Secret printed
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    [c] = pod["containers"]
    parsed = build_parser(lazy=True).parse_args(c["args"])  # serve's own parser takes the pod's line
    assert parsed.sign_key == KEY_PATH and parsed.sign_form == "bundle"
    [volume] = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "commit-signer"]
    assert volume["secret"]["items"] == [{"key": "sign.key", "path": "sign.key"}]
    assert volume["secret"]["defaultMode"] & 0o007 == 0
    [mount] = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": "/etc/ocibridge-sign-key", "readOnly": True}
    [password] = [e for e in c["env"] if e["name"] == "COSIGN_PASSWORD"]
    assert password == {"name": "COSIGN_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "commit-signer", "key": "password", "optional": True}}}  # a plain key's Secret has none


def test_the_python_api_names_the_secret_and_holds_no_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("COSIGN_PASSWORD", PASSWORD)
    done = api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(sign_key_secret="commit-signer"))
    assert [d for d in done.documents if d["kind"] == "Secret"] == []
    assert not done.holds_credentials and done.closing_warnings == ()
    [deployment] = [d for d in done.documents if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][-2:] == ["--sign-key", KEY_PATH]
    assert PASSWORD not in yaml.safe_dump_all(list(done.documents))


def test_readers_under_quarantine_need_the_writers_public_key(tmp_path, capsys, monkeypatch):
    """One pod trusts its own reports; with --replicas the readers must be told the writer's key,
    which the Secret keeps from here: --scan-verify-key, else one error line and nothing printed."""
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key-secret", "commit-signer", "--scan", "quarantine",
                 "--replicas", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "--scan-verify-key PUB" in err and "--sign-key-secret" in err
    assert main(["k8s", "serve", SOURCE, "--sign-key-secret", "commit-signer", "--scan", "quarantine"]) == 0
    docs = checked(tmp_path, capsys.readouterr().out)
    assert "--scan-verify-key" not in docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]

    _, public = key_pair(tmp_path, "writer")
    assert main(["k8s", "serve", SOURCE, "--sign-key-secret", "commit-signer", "--scan", "quarantine",
                 "--scan-verify-key", str(public), "--replicas", "2"]) == 0
    docs_list = checked_list(tmp_path, capsys.readouterr().out)
    assert [d for d in docs_list if d["kind"] == "Secret"] == []
    deployments = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs_list if d["kind"] == "Deployment"}
    writer, readers = deployments["ocibridge-serve-writer"], deployments["ocibridge-serve"]
    assert build_parser(lazy=True).parse_args(writer["containers"][0]["args"]).sign_key == KEY_PATH
    assert "--sign-key" not in readers["containers"][0]["args"]
    assert all(v.get("secret", {}).get("secretName") != "commit-signer" for v in readers["volumes"])
    maps = {d["metadata"]["name"]: d for d in docs_list if d["kind"] == "ConfigMap"}
    here = tmp_path / "reader"
    here.mkdir()
    trusted = trusted_keys([str(p) for p in keys_as_mounted(readers, maps, here)], None)
    assert [public_pem(k) for _, k in trusted] == [public_pem(load_public_key(public))]


@pytest.mark.parametrize(("argv", "words"), [
    (["--sign-key", "{key}", "--sign-key-secret", "commit-signer"],
     "--sign-key and --sign-key-secret: one or the other"),
    (["--sign-key-secret", "Not_A_Name"], "--sign-key-secret 'Not_A_Name' is not a valid Kubernetes name"),
    (["--sign-form", "classic"], "--sign-form goes with --sign-key or --sign-key-secret"),
])
def test_a_wrong_combination_is_one_error_line(tmp_path, capsys, monkeypatch, argv, words):
    private, _ = key_pair(tmp_path, "signer")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, *(a.format(key=private) for a in argv)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err, err


@pytest.mark.parametrize("password", [PASSWORD, None], ids=["encrypted", "plain"])
def test_commits_published_through_the_emitted_container_are_signed(tmp_path, capsys, monkeypatch, registry,
                                                                     unique_repo, password):
    """The Secret kubectl makes from the key file (and the password of an encrypted one) laid out
    at the pod's mount, the pod's env read from it: serve signs a commit published through it,
    and verify accepts the branch's head with the public key. A plain key's Secret has no
    password, and the optional secretKeyRef leaves $COSIGN_PASSWORD unset."""
    prefix = f"{registry.host}/{unique_repo}"
    if password:
        private, public = keygen(tmp_path / "signer", password)
    else:
        private, public = key_pair(tmp_path, "signer")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", prefix, "--token-secret", "hf-tokens", "--sign-key-secret", "commit-signer"]) == 0
    out = capsys.readouterr().out
    assert_nothing_secret(out, private, password)
    docs = checked(tmp_path, out)
    secrets = {"commit-signer": kubectl_secret(tmp_path, "commit-signer", private, password),
               "hf-tokens": {"tokens": b"writer-token write * ci-bot\n"}}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    repo = f"acme/signed-{'encrypted' if password else 'plain'}"
    publish_through_the_pod(pod, secrets, tmp_path, monkeypatch, repo, expect_env={"COSIGN_PASSWORD": password})
    capsys.readouterr()
    assert main(["verify", f"{prefix}/{repo}:latest", "--key", str(public)]) == 0, capsys.readouterr().err
    other, _ = key_pair(tmp_path / "other", "other")
    assert main(["verify", f"{prefix}/{repo}:latest", "--key", str(other.with_suffix(".pub"))]) != 0


def test_the_docs_secret_block_runs_as_printed(doc_env):  # noqa: F811
    work = doc_block_run(doc_env, "serve-kubernetes-keys.md", "generic commit-signer")
    made = yaml.safe_load((work / "commit-signer-secret.yaml").read_text())
    assert made["kind"] == "Secret" and made["metadata"] == {"name": "commit-signer", "namespace": "ml",
                                                             "creationTimestamp": None}
    assert base64.b64decode(made["data"]["sign.key"]) == (work / "commit-signer.key").read_bytes()
    assert base64.b64decode(made["data"]["password"]) == b"commit-secret"
    for output in ("serve-sign-secret.yaml", "serve-sign-secret-ha.yaml"):
        text = (work / output).read_text()
        assert_nothing_secret(text, work / "commit-signer.key", "commit-secret")
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert [d for d in docs if d["kind"] == "Secret"] == []
        signing = [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"
                   and KEY_PATH in d["spec"]["template"]["spec"]["containers"][0]["args"]]
        assert signing == (["ocibridge-serve-writer"] if "ha" in output else ["ocibridge-serve"]), output
