"""Evidence on publish (issue 55): ``ocibridge serve --sign-key --sbom --provenance`` signs every
commit it pushes and attaches its AI-BOM and provenance (naming the parent commit and the
uploader) before the branch's tag moves, so ``verify`` and a containers policy requiring
``sigstoreSigned`` accept a model published with huggingface_hub alone; a commit whose signing
fails is refused with the tag where it was."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from support.publishing import evidence_serve, model_dir, tag_digest

import ocibridge
from ocibridge.cli import main

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

SLSA = "https://slsa.dev/provenance/v1"


def _provenance(out: Path) -> dict:
    """The signed provenance ``pull --with-attestations`` wrote beside the files: its statement."""
    folder = out / ".ocibridge" / "attestations"
    signed = next(p for p in folder.iterdir() if p.name.startswith("slsaprovenance1") and "sigstore" in p.name)
    envelope = json.loads(signed.read_bytes())["dsseEnvelope"]
    return json.loads(base64.b64decode(envelope["payload"]))


def test_commits_published_through_serve_are_signed_and_attested(tmp_path, registry, unique_repo, monkeypatch,
                                                                capsys):
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/signed:latest"
    with evidence_serve(tmp_path, monkeypatch, prefix, "acme/signed", password="commit-key-password") as (api, key):
        first = api.upload_folder(repo_id="acme/signed", folder_path=model_dir(tmp_path / "model"))
        second = api.upload_file(path_or_fileobj=b"# signed\n", path_in_repo="README.md", repo_id="acme/signed",
                                 commit_message="add a card")
    first_id, second_id = first.oid, second.oid
    assert tag_digest(ref).split(":")[1].startswith(second_id)
    capsys.readouterr()
    # the branch's head verifies with the public key, as `ocibridge sign` would have made it
    assert main(["verify", ref, "--key", str(key.public_key)]) == 0, capsys.readouterr().err
    # its attestations are discoverable: an AI-BOM and a provenance, each a signed attestation
    capsys.readouterr()
    assert main(["discover", ref, "--json"]) == 0
    found = json.dumps(json.loads(capsys.readouterr().out))
    assert "cyclonedx" in found and "slsa.dev/provenance" in found
    assert main(["verify", ref, "--key", str(key.public_key), "--attestation-type", "slsaprovenance1"]) == 0
    # the provenance names the parent commit and the uploader (the token's name)
    assert main(["pull", ref, str(tmp_path / "out"), "-q", "--with-attestations",
                 "--verify-key", str(key.public_key)]) == 0
    statement = _provenance(tmp_path / "out")
    assert statement["predicateType"] == SLSA
    build = statement["predicate"]["buildDefinition"]
    assert build["buildType"] == "https://ocibridge.dev/slsa/publish/v1"
    assert build["externalParameters"]["parentCommit"] == first_id
    assert build["externalParameters"]["uploader"] == "ci-bot"
    assert build["externalParameters"]["summary"] == "add a card"
    parent = next(d for d in build["resolvedDependencies"] if d.get("name") == "parent")
    assert parent["digest"]["sha256"].startswith(first_id)
    assert {d["name"] for d in build["resolvedDependencies"]} >= {"README.md", "model.safetensors", "parent"}
    # the containers policy of issue 44 accepts the published model with no second step
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "reject"}], "transports": {"docker": {
        prefix: [{"type": "sigstoreSigned", "keyPath": str(key.public_key),
                  "signedIdentity": {"type": "matchRepository"}}]}}}))
    verdict = ocibridge.check_policy(ref, policy)
    assert verdict.allowed, verdict
    assert main(["pull", ref, str(tmp_path / "admitted"), "-q", "--policy", str(policy)]) == 0
    # and the first commit was signed too: every head the branch has had
    assert main(["verify", f"{prefix}/acme/signed@{_first_digest(ref)}",
                 "--key", str(key.public_key)]) == 0


def _first_digest(ref: str) -> str:
    """The parent digest the head's manifest records (serve's annotation)."""
    from support.publishing import opened_store

    from ocibridge.hubserver.repo.commits import PARENT

    with opened_store(ref) as (store, tag):
        manifest = json.loads(store.fetch_bytes(store.resolve(tag)))
    return str(manifest["annotations"][PARENT])


def test_a_commit_that_cannot_be_signed_is_refused_and_moves_no_tag(tmp_path, registry, unique_repo, monkeypatch):
    """Signed before tagged: when signing fails the commit is refused (the Hub's error for a
    server fault, saying why) and the branch's tag stays where it was; serve then signs again."""
    from starlette.testclient import TestClient

    from ocibridge.api.options import SignOptions
    from ocibridge.api.serve import ServeOptions, create_app
    from ocibridge.errors import OcibridgeError
    from ocibridge.signing import sign as signing
    from tests.signing_keys import key_pair

    private, public = key_pair(tmp_path / "k")
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/fails:latest"
    app = create_app(prefix, options=ServeOptions(tokens=("writer-token write * ci-bot",)),
                     sign=SignOptions(key=private))

    def commit(client: TestClient, text: str) -> Any:
        lines = [{"key": "header", "value": {"summary": text}},
                 {"key": "file", "value": {"path": "notes.md", "content": base64.b64encode(text.encode()).decode(),
                                           "encoding": "base64"}}]
        answer = client.post("/api/models/acme/fails/commit/main", headers={"Authorization": "Bearer writer-token"},
                             content="\n".join(json.dumps(line) for line in lines))
        return answer

    real = signing.sign_artifact
    with TestClient(app) as client:
        assert client.post("/api/repos/create", json={"name": "fails", "organization": "acme"},
                           headers={"Authorization": "Bearer writer-token"}).status_code == 200
        assert commit(client, "first").status_code == 200
        head = tag_digest(ref)

        def broken(*args: object, **kwargs: object) -> object:
            raise OcibridgeError("the signature could not be written")

        monkeypatch.setattr(signing, "sign_artifact", broken)
        refused = commit(client, "second")
        assert refused.status_code == 502
        assert "the signature could not be written" in refused.text and "latest was not moved" in refused.text
        assert tag_digest(ref) == head  # the tag did not move to the unsigned commit
        monkeypatch.setattr(signing, "sign_artifact", real)
        assert commit(client, "third").status_code == 200
        assert tag_digest(ref) != head
    assert main(["verify", ref, "--key", str(public)]) == 0


def test_serve_refuses_bad_signing_settings_at_start(tmp_path, monkeypatch, capsys):
    key = ocibridge.keygen(tmp_path / "cosign", password="right")
    monkeypatch.setenv("COSIGN_PASSWORD", "wrong")
    assert main(["serve", "oci:" + str(tmp_path / "layout"), "--sign-key", str(key.private_key)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    monkeypatch.setenv("COSIGN_PASSWORD", "right")
    assert main(["serve", "oci:" + str(tmp_path / "layout"), "--sign-key", str(key.private_key)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not one" in err, err  # a layout holds no unsigned manifest untagged
    assert main(["serve", "oci:" + str(tmp_path / "layout"), "--sign-form", "classic"]) == 2
    assert "--sign-form goes with --sign-key" in capsys.readouterr().err


def test_deleting_the_last_file_commits_signed_and_attested(tmp_path, registry, unique_repo, monkeypatch, capsys):
    """The commit of no files that deleting the last one makes carries serve's evidence like any
    other: cosign's signatures over its manifest, an AI-BOM and a provenance naming its parent."""
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/emptied:latest"
    with evidence_serve(tmp_path, monkeypatch, prefix, "acme/emptied") as (api, key):
        first = api.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="acme/emptied")
        api.delete_file("config.json", repo_id="acme/emptied")
        api.delete_file(".gitattributes", repo_id="acme/emptied")
        assert api.list_repo_files("acme/emptied") == []
    capsys.readouterr()
    assert main(["verify", ref, "--key", str(key.public_key)]) == 0, capsys.readouterr().err
    assert main(["verify", ref, "--key", str(key.public_key), "--attestation-type", "slsaprovenance1"]) == 0
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "-q", "--with-attestations", "--verify-key", str(key.public_key)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".ocibridge"]
    build = _provenance(out)["predicate"]["buildDefinition"]
    assert build["externalParameters"]["parentCommit"] not in (None, first.oid)  # the commit deleting config.json


def test_the_attestation_key_reads_its_own_password_at_start(tmp_path, monkeypatch, capsys):
    """Both keys' passwords came from $COSIGN_PASSWORD, so two keys with two passwords could not
    serve together; $OCIBRIDGE_ATTEST_PASSWORD is the attestation key's, unset: $COSIGN_PASSWORD's."""
    signer = ocibridge.keygen(tmp_path / "signer", password="sign-pw").private_key
    attester = ocibridge.keygen(tmp_path / "attester", password="attest-pw").private_key
    argv = ["serve", "oci:" + str(tmp_path / "layout"), "--sign-key", signer, "--provenance", "--attest-key", attester]
    past_the_keys = "is not one"  # a layout is refused as where commits go: only once both keys are loaded

    def serve_says(cosign: str, attest: str | None) -> tuple[int, str]:
        monkeypatch.setenv("COSIGN_PASSWORD", cosign)
        if attest is None:
            monkeypatch.delenv("OCIBRIDGE_ATTEST_PASSWORD", raising=False)
        else:
            monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", attest)
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
        assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
        return code, err

    code, err = serve_says("sign-pw", "attest-pw")
    assert code == 2 and past_the_keys in err, err
    code, err = serve_says("sign-pw", "wrong")
    assert code == 1 and f"--attest-key {attester}: wrong password for the cosign key " \
                          "($OCIBRIDGE_ATTEST_PASSWORD)" in err, err
    code, err = serve_says("wrong", "attest-pw")
    assert code == 1 and f"--sign-key {signer}: wrong password for the cosign key ($COSIGN_PASSWORD)" in err, err
    code, err = serve_says("sign-pw", None)  # unset: the one password of both, which the attester's is not
    assert code == 1 and f"--attest-key {attester}: wrong password for the cosign key ($COSIGN_PASSWORD)" in err, err
    argv[argv.index(attester)] = signer  # one key for both, one password: as before
    code, err = serve_says("sign-pw", None)
    assert code == 2 and past_the_keys in err, err
