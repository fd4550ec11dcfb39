"""``ocibridge k8s serve --sbom/--provenance --attest-key KEY | --attest-key-secret SECRET``: serve's
signed attestations on the pods, its key carried as ``--sign-key``'s is (printed in a Secret
``NAME-attest-key``, or a Secret the cluster has named, nothing secret printed), mounted read-only
at its own directory. serve reads the signing key's password from $COSIGN_PASSWORD and the
attestation key's from $OCIBRIDGE_ATTEST_PASSWORD (unset: $COSIGN_PASSWORD): each from its own
key's Secret, so the two keys may have two passwords. Under
``--scan quarantine`` serve signs its reports with the attestation key, so with replicas the readers
trust that key's public half, not the signing key's. The container laid out here with both named
Secrets signs a commit and attests its provenance, and ``ocibridge verify`` accepts each with its
own key only."""

from __future__ import annotations

import pytest

from ocibridge.cli import main
from ocibridge.cli.parser import build_parser
from ocibridge.hubserver.repo.quarantined import trusted_keys
from ocibridge.signing.keys import load_public_key, public_pem
from tests.docrun import doc_env, reader_venvs  # noqa: F401 - fixtures used by name
from tests.k8s.test_k8s_serve import checked, checked_list, doc_block_documents
from tests.k8s.test_k8s_serve_scan import keys_as_mounted
from tests.k8s.test_k8s_serve_secret import assert_nothing_secret, kubectl_secret
from tests.k8s.test_k8s_serve_sign import (
    KEY_PATH,
    SOURCE,
    assert_only_the_secret_holds,
    keygen,
    publish_through_the_pod,
    secret_data,
)
from tests.signing_keys import key_pair

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

ATTEST_PATH = "/etc/ocibridge-attest-key/attest.key"


def test_a_printed_attestation_key_goes_in_a_secret_of_its_own(tmp_path, capsys, monkeypatch):
    private, _ = key_pair(tmp_path, "attester")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--provenance", "--attest-key", str(private), "--namespace", "ml"]) == 0
    out, err = capsys.readouterr()
    assert "the output holds the private key of --attest-key" in err
    docs = checked(tmp_path, out)
    assert list(docs) == ["Secret", "PersistentVolumeClaim", "Deployment", "Service"]
    assert docs["Secret"]["metadata"]["name"] == "ocibridge-serve-attest-key"
    assert secret_data(docs["Secret"]) == {"attest.key": private.read_bytes()}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    [c] = pod["containers"]
    parsed = build_parser(lazy=True).parse_args(c["args"])
    assert parsed.provenance and not parsed.sbom and parsed.attest_key == ATTEST_PATH and parsed.sign_key is None
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "ocibridge-serve-attest-key"
    assert volume["secret"]["items"] == [{"key": "attest.key", "path": "attest.key"}]
    assert volume["secret"]["defaultMode"] & 0o007 == 0
    [mount] = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == "/etc/ocibridge-attest-key" and mount["readOnly"]
    assert all(e["name"] != "COSIGN_PASSWORD" for e in c["env"])
    assert_only_the_secret_holds(list(docs.values()), private, None)


def test_two_named_secrets_print_nothing_secret_and_a_password_each(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COSIGN_PASSWORD", "commit-key-password")
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key-secret", "signer", "--sbom", "--provenance",
                 "--attest-key-secret", "attester"]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err and "commit-key-password" not in out
    docs = checked(tmp_path, out)
    assert "Secret" not in docs
    [c] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    parsed = build_parser(lazy=True).parse_args(c["args"])
    assert (parsed.sign_key, parsed.attest_key, parsed.sbom, parsed.provenance) == (KEY_PATH, ATTEST_PATH, True, True)
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/etc/ocibridge-sign-key", "/etc/ocibridge-attest-key"} <= mounts
    passwords = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if e["name"].endswith("PASSWORD")}
    assert passwords == {"COSIGN_PASSWORD": {"name": "signer", "key": "password", "optional": True},
                         "OCIBRIDGE_ATTEST_PASSWORD": {"name": "attester", "key": "password", "optional": True}}


def test_two_printed_keys_with_two_passwords_each_reach_serve_from_their_own_secret(tmp_path, capsys, monkeypatch):
    signer, _ = keygen(tmp_path / "signer", "sign-pw")
    attester, _ = keygen(tmp_path / "attester", "attest-pw")
    monkeypatch.setenv("COSIGN_PASSWORD", "sign-pw")
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "attest-pw")
    argv = ["k8s", "serve", SOURCE, "--sign-key", str(signer), "--provenance", "--attest-key", str(attester)]
    capsys.readouterr()
    assert main(argv) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    secrets = {d["metadata"]["name"]: secret_data(d) for d in docs if d["kind"] == "Secret"}
    assert secrets["ocibridge-serve-sign-key"]["password"] == b"sign-pw"
    assert secrets["ocibridge-serve-attest-key"]["password"] == b"attest-pw"
    [pod] = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in pod["containers"][0]["env"]
           if e["name"].endswith("PASSWORD")}
    assert env == {"COSIGN_PASSWORD": {"name": "ocibridge-serve-sign-key", "key": "password"},
                   "OCIBRIDGE_ATTEST_PASSWORD": {"name": "ocibridge-serve-attest-key", "key": "password"}}

    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "wrong")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert f"--attest-key {attester}: wrong password for the cosign key ($OCIBRIDGE_ATTEST_PASSWORD)" in err


def test_a_plain_attestation_key_beside_an_encrypted_signing_key_gets_an_empty_password(tmp_path, capsys, monkeypatch):
    """Unset, serve would read the signing key's password for the plain key, which refuses one."""
    signer, _ = keygen(tmp_path / "signer", "sign-pw")
    attester, _ = key_pair(tmp_path, "attester")
    monkeypatch.setenv("COSIGN_PASSWORD", "sign-pw")
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "")
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key", str(signer), "--provenance", "--attest-key", str(attester)]) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    [pod] = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    [attest_env] = [e for e in pod["containers"][0]["env"] if e["name"] == "OCIBRIDGE_ATTEST_PASSWORD"]
    assert attest_env == {"name": "OCIBRIDGE_ATTEST_PASSWORD", "value": ""}


def test_the_readers_trust_the_key_serve_signs_its_reports_with(tmp_path, capsys, monkeypatch):
    """serve signs its scan reports with --attest-key, else --sign-key: with both printed, the
    readers trust the attestation key; with that key only named, --scan-verify-key is needed."""
    signer, _ = key_pair(tmp_path, "signer")
    attester, attester_pub = key_pair(tmp_path, "attester")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, "--sign-key", str(signer), "--provenance", "--attest-key", str(attester),
                 "--scan", "quarantine", "--replicas", "2"]) == 0
    docs = checked_list(tmp_path, capsys.readouterr().out)
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Secret") == [
        "ocibridge-serve-attest-key", "ocibridge-serve-sign-key"]
    deployments = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    readers = deployments["ocibridge-serve"]
    reader_args = readers["containers"][0]["args"]
    assert not {"--attest-key", "--sign-key", "--provenance"} & set(reader_args)  # the readers commit nothing
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    here = tmp_path / "reader"
    here.mkdir()
    trusted = trusted_keys([str(p) for p in keys_as_mounted(readers, maps, here)], None)
    assert [public_pem(k) for _, k in trusted] == [public_pem(load_public_key(attester_pub))]

    assert main(["k8s", "serve", SOURCE, "--sign-key", str(signer), "--provenance", "--attest-key-secret",
                 "attester", "--scan", "quarantine", "--replicas", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "--attest-key-secret" in err and "--scan-verify-key PUB" in err and "attest.key" in err


@pytest.mark.parametrize(("argv", "words"), [
    (["--attest-key", "{key}"], "--attest-key and --attest-key-secret go with --sbom or --provenance"),
    (["--attest-key-secret", "attester"], "--attest-key and --attest-key-secret go with --sbom or --provenance"),
    (["--provenance", "--attest-key", "{key}", "--attest-key-secret", "attester"],
     "--attest-key and --attest-key-secret: one or the other"),
    (["--provenance", "--attest-key", "{junk}"], "--attest-key {junk}: not a PEM private key"),
])
def test_a_wrong_attestation_key_is_one_error_line(tmp_path, capsys, monkeypatch, argv, words):
    private, _ = key_pair(tmp_path, "attester")
    junk = tmp_path / "junk.key"
    junk.write_text("not a key\n")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", SOURCE, *(a.format(key=private, junk=junk) for a in argv)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words.format(junk=junk) in err and "Traceback" not in err, err


def test_commits_published_through_the_emitted_container_are_signed_and_attested(
        tmp_path, capsys, monkeypatch, registry, unique_repo):
    """Both keys encrypted, each with its own password, each in a Secret kubectl makes with its
    password, laid out at the pod's mounts: the commit's signature verifies with the signing key,
    its provenance attestation with the attestation key, and neither with the other's."""
    prefix = f"{registry.host}/{unique_repo}"
    signer, signer_pub = keygen(tmp_path / "signer", "one-password")
    attester, attester_pub = keygen(tmp_path / "attester", "another-password")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["k8s", "serve", prefix, "--token-secret", "hf-tokens", "--sign-key-secret", "signer",
                 "--provenance", "--attest-key-secret", "attester"]) == 0
    out = capsys.readouterr().out
    assert_nothing_secret(out, signer, "one-password")
    assert_nothing_secret(out, attester, "another-password")
    docs = checked(tmp_path, out)
    signer_secret = kubectl_secret(tmp_path, "signer", signer, "one-password")
    attester_secret = kubectl_secret(tmp_path, "attester", attester, "another-password", file="attest.key")
    secrets = {"signer": signer_secret, "attester": attester_secret,
               "hf-tokens": {"tokens": b"writer-token write * ci-bot\n"}}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    publish_through_the_pod(pod, secrets, tmp_path, monkeypatch, "acme/attested",
                            expect_env={"COSIGN_PASSWORD": "one-password",
                                        "OCIBRIDGE_ATTEST_PASSWORD": "another-password"})
    ref = f"{prefix}/acme/attested:latest"
    capsys.readouterr()
    assert main(["verify", ref, "--key", str(signer_pub)]) == 0, capsys.readouterr().err
    assert main(["verify", ref, "--key", str(attester_pub), "--attestation-type", "slsaprovenance1"]) == 0, \
        capsys.readouterr().err
    assert main(["verify", ref, "--key", str(signer_pub), "--attestation-type", "slsaprovenance1"]) != 0
    assert main(["verify", ref, "--key", str(attester_pub)]) != 0


def test_the_docs_attest_block_runs_as_printed(doc_env):  # noqa: F811
    _, docs = doc_block_documents(doc_env, "serve-kubernetes-keys.md", "--attest-key", "serve-attest.yaml")
    assert [d for d in docs if d["kind"] == "Secret"] == []
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    parsed = build_parser(lazy=True).parse_args(deployment["spec"]["template"]["spec"]["containers"][0]["args"])
    assert (parsed.sign_key, parsed.attest_key, parsed.provenance) == (KEY_PATH, ATTEST_PATH, True)
