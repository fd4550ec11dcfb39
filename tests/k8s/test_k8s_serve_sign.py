"""``ocibridge k8s serve --sign-key KEY [--sign-form FORM]``: serve's commit signing reaches the
pods. The key is loaded here as serve loads it, carried in a Secret (never a ConfigMap) mounted
read-only, and named to serve by its mounted path; an encrypted key's password goes into the same
Secret and reaches serve as $COSIGN_PASSWORD through a secretKeyRef. Nothing of the key is in a
ConfigMap, an arg or an env value. With replicas only the writer holds it, and under ``--scan
quarantine`` the readers trust its public half. A bad key or a wrong password is one error line
and nothing printed. The container, laid out here with the Secret's files at their mounts, signs
a commit published through it with huggingface_hub, and ``ocibridge verify`` accepts it."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi

import ocibridge
import ocibridge.api.k8s as api_k8s
from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from ocibridge.hubserver.repo.quarantined import trusted_keys
from ocibridge.signing.keys import load_public_key, public_pem
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import ROOT, checked, checked_list, doc_block_documents
from tests.k8s.test_k8s_serve_scan import keys_as_mounted
from tests.serving import point_hub_at, serve_as_process
from tests.signing_keys import key_pair

SOURCE = "registry.internal:5000/hub"
KEY_PATH = "/etc/ocibridge-sign-key/sign.key"

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")


def keygen(prefix: Path, password: str) -> tuple[Path, Path]:
    """A cosign key file encrypted with ``password``, and its public key: (private, public)."""
    key = ocibridge.keygen(prefix, password=password)
    return Path(key.private_key), Path(key.public_key)


def strings(value: Any) -> Iterator[str]:
    """Every string in a document, keys and values."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, str):
        yield value


def secret_material(key: Path, password: str | None) -> list[str]:
    """What no document but the Secret may hold: the key file's lines, whole and base64, and the password."""
    text = key.read_text()
    found = [line for line in text.splitlines() if line and not line.startswith("-----")]
    found.append(base64.b64encode(key.read_bytes()).decode()[:40])
    return found + ([password] if password else [])


def assert_only_the_secret_holds(docs: list[dict], key: Path, password: str | None) -> None:
    for doc in docs:
        if doc["kind"] == "Secret":
            continue
        for text in strings(doc):
            for secret in secret_material(key, password):
                assert secret not in text, (doc["kind"], doc["metadata"]["name"])


def secret_data(secret: dict) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def test_the_key_and_its_password_go_in_a_secret_alone(tmp_path, capsys, monkeypatch):
    private, _ = keygen(tmp_path / "signer", "commit-key-password")  # cosign's encrypted key file
    monkeypatch.setenv("COSIGN_PASSWORD", "commit-key-password")
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key", str(private), "--sign-form", "bundle",
                 "--namespace", "ml"]) == 0
    out, err = capsys.readouterr()
    assert str(tmp_path) not in out  # no path of this machine goes to the cluster
    assert "the output holds the private key of --sign-key" in err
    docs = checked(tmp_path, out)  # the client's models and kubectl apply --dry-run=client
    assert list(docs) == ["Secret", "PersistentVolumeClaim", "Deployment", "Service"]
    secret = docs["Secret"]
    assert secret["metadata"]["name"] == "ocibridge-serve-sign-key" and secret["metadata"]["namespace"] == "ml"
    assert secret_data(secret) == {"sign.key": private.read_bytes(), "password": b"commit-key-password"}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    [c] = pod["containers"]
    parsed = build_parser(lazy=True).parse_args(c["args"])  # serve's own parser takes the pod's line
    assert parsed.sign_key == KEY_PATH and parsed.sign_form == "bundle"
    [volume] = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "ocibridge-serve-sign-key"]
    assert volume["secret"]["items"] == [{"key": "sign.key", "path": "sign.key"}]  # the password is not a file
    assert volume["secret"]["defaultMode"] & 0o007 == 0  # no one but the owner and the pod's group reads it
    [mount] = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": "/etc/ocibridge-sign-key", "readOnly": True}
    [password] = [e for e in c["env"] if e["name"] == "COSIGN_PASSWORD"]
    assert password == {"name": "COSIGN_PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": "ocibridge-serve-sign-key", "key": "password"}}}
    assert_only_the_secret_holds(list(docs.values()), private, "commit-key-password")


def test_a_plain_key_carries_no_password(tmp_path, capsys, monkeypatch):
    private, _ = key_pair(tmp_path, "signer")  # PKCS#8, not encrypted
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key", str(private)]) == 0
    docs = checked(tmp_path, capsys.readouterr().out)
    assert secret_data(docs["Secret"]) == {"sign.key": private.read_bytes()}
    [c] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert all(e["name"] != "COSIGN_PASSWORD" for e in c["env"])  # serve would refuse a password for it
    assert "--sign-form" not in c["args"]  # serve's default: both
    assert_only_the_secret_holds(list(docs.values()), private, None)


def test_the_writer_alone_signs_and_the_readers_trust_its_reports(tmp_path, capsys, monkeypatch):
    """--replicas: the writer commits, so it alone mounts the key; under --scan quarantine, with no
    --scan-verify-key, serve's own key is what releases a model, and every reader trusts it."""
    private, public = key_pair(tmp_path, "signer")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key", str(private), "--scan", "quarantine", "--replicas", "2"]) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"] == ["ocibridge-serve-sign-key"]
    deployments = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    writer, readers = deployments["ocibridge-serve-writer"], deployments["ocibridge-serve"]
    parsed = build_parser(lazy=True).parse_args(writer["containers"][0]["args"])
    assert parsed.sign_key == KEY_PATH and parsed.scan == "quarantine" and parsed.scan_verify_key is None
    reader_args = readers["containers"][0]["args"]
    assert "--sign-key" not in reader_args and all("sign-key" not in v.get("name", "") for v in readers["volumes"])
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    here = tmp_path / "reader"
    here.mkdir()
    laid_out = keys_as_mounted(readers, maps, here)
    trusted = trusted_keys([str(p) for p in laid_out], None)  # what the reader's --scan quarantine trusts
    assert [public_pem(k) for _, k in trusted] == [public_pem(load_public_key(public))]
    assert_only_the_secret_holds(docs, private, None)


def test_a_bad_key_or_a_wrong_password_is_one_error_line(tmp_path, capsys, monkeypatch):
    private, public = keygen(tmp_path / "signer", "right")
    (tmp_path / "junk.key").write_text("not a key\n")
    for password, path, words in (
        ("wrong", private, f"--sign-key {private}: wrong password for the cosign key"),
        ("right", public, f"--sign-key {public}: not a PEM private key"),
        ("right", tmp_path / "junk.key", f"--sign-key {tmp_path / 'junk.key'}: not a PEM private key"),
        ("right", tmp_path / "missing.key", f"--sign-key {tmp_path / 'missing.key'}:"),
    ):
        monkeypatch.setenv("COSIGN_PASSWORD", password)
        capsys.readouterr()
        assert main(["k8s", "serve", SOURCE, "--sign-key", str(path)]) == 2, path
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err, (path, err)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-form", "classic"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--sign-form goes with --sign-key" in err


def test_the_python_api_takes_the_same_options(tmp_path, monkeypatch):
    private, _ = key_pair(tmp_path, "signer")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    done = api_k8s.k8s_serve([SOURCE], api_k8s.K8sServeOptions(sign_key=str(private), sign_form="classic"))
    [secret] = [d for d in done.documents if d["kind"] == "Secret"]
    assert secret_data(secret) == {"sign.key": private.read_bytes()} and done.holds_credentials
    [deployment] = [d for d in done.documents if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][-4:] == [
        "--sign-key", KEY_PATH, "--sign-form", "classic"]


def test_commits_published_through_the_emitted_container_are_signed(tmp_path, capsys, monkeypatch, registry,
                                                                     unique_repo):
    """The Deployment's args, env and mounts laid out here (each mount a directory of the test,
    the Secrets' keys its files, the secretKeyRef read from the Secret): serve signs a commit
    huggingface_hub publishes through it, and verify accepts the branch's head with the public key."""
    prefix = f"{registry.host}/{unique_repo}"
    private, public = keygen(tmp_path / "signer", "commit-key-password")
    monkeypatch.setenv("COSIGN_PASSWORD", "commit-key-password")
    capsys.readouterr()
    assert main(["k8s", "serve", prefix, "--token-secret", "hf-tokens", "--sign-key", str(private),
                 "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    secrets = {i["metadata"]["name"]: secret_data(i) for i in items if i["kind"] == "Secret"}
    secrets["hf-tokens"] = {"tokens": b"writer-token write * ci-bot\n"}  # the Secret --token-secret names
    pod = [i for i in items if i["kind"] == "Deployment"][0]["spec"]["template"]["spec"]
    publish_through_the_pod(pod, secrets, tmp_path, monkeypatch, "acme/signed",
                            expect_env={"COSIGN_PASSWORD": "commit-key-password"})
    capsys.readouterr()
    assert main(["verify", f"{prefix}/acme/signed:latest", "--key", str(public)]) == 0, \
        capsys.readouterr().err
    other, _ = key_pair(tmp_path / "other", "other")
    assert main(["verify", f"{prefix}/acme/signed:latest", "--key", str(other.with_suffix(".pub"))]) != 0


def publish_through_the_pod(pod: dict, secrets: dict[str, dict[str, bytes]], tmp_path: Path, monkeypatch,
                            repo: str, expect_env: dict[str, str | None]) -> None:
    """serve started from ``pod``'s container as the kubelet starts it: each mount a directory of
    the test, the ``secrets``' keys its files, each env value set or read from its secretKeyRef
    (an optional one whose key is missing: unset); a token ``writer-token`` in ``hf-tokens``
    publishes ``repo`` through it with huggingface_hub. ``expect_env``: what the env must set."""
    [c] = pod["containers"]
    here = {m["mountPath"]: tmp_path / "pod" / m["name"] for m in c["volumeMounts"]}
    for volume in pod["volumes"]:
        [directory] = [here[m["mountPath"]] for m in c["volumeMounts"] if m["name"] == volume["name"]]
        directory.mkdir(parents=True)
        if "secret" in volume:
            data = secrets[volume["secret"]["secretName"]]
            for item in volume["secret"]["items"]:
                (directory / item["path"]).write_bytes(data[item["key"]])

    def local(text: str) -> str:
        for path, directory in here.items():
            if text == path or text.startswith(path + "/"):
                return str(directory) + text[len(path):]
        return text

    def value(e: dict) -> str | None:
        if "value" in e:
            return local(e["value"])
        ref = e["valueFrom"]["secretKeyRef"]
        if ref.get("optional") and ref["key"] not in secrets[ref["name"]]:
            return None
        return secrets[ref["name"]][ref["key"]].decode()

    environ = {k: v for k, v in os.environ.items()  # the pod's env alone sets them
               if k not in ("COSIGN_PASSWORD", "OCIBRIDGE_ATTEST_PASSWORD")}
    env = {**environ, "PYTHONPATH": str(ROOT),
           **{e["name"]: found for e in c["env"] if (found := value(e)) is not None}}
    assert {k: env.get(k) for k in expect_env} == expect_env
    args = [local(a) for a in c["args"]]
    assert args[0] == "serve"
    with serve_as_process([*args[1:], "--no-access-log"], env, tmp_path / "serve.log") as url:  # its --listen last
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo(repo)
        api.upload_file(path_or_fileobj=b"# signed in the pod\n", path_in_repo="README.md", repo_id=repo)


def test_the_docs_sign_block_runs_as_printed(doc_env):  # noqa: F811
    work, docs = doc_block_documents(doc_env, "serve-kubernetes-keys.md", "--sign-key signer", "serve-sign.yaml")
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert secret_data(secret)["sign.key"] == (work / "signer.key").read_bytes()
    assert "password" in secret["data"]
    assert_only_the_secret_holds(docs, work / "signer.key", None)
