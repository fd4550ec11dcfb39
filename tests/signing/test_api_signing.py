"""Signing, verifying and the containers policy check from Python (issue 51): ``ocibridge.sign``,
``verify``, ``verify_dir``, ``verification`` and ``check_policy`` against real stores (a layout
in tmp_path, the registry fixture), each result's ``as_dict()`` being the command's ``--json``."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import ocibridge
from ocibridge.cli import main
from ocibridge.errors import DigestMismatch, SignatureError, UsageError
from tests.modelgen import make_model
from tests.signing_keys import key_pair
from tests.support.data import data

BUNDLE = data("signing", "bundle")
CONFORMANCE_ID = ("https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
                  ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main")
CONFORMANCE_ISSUER = "https://token.actions.githubusercontent.com"


@pytest.fixture
def layout(tmp_path) -> str:
    """A small model pushed into an OCI layout: its reference."""
    ref = f"oci:{tmp_path}/store:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref)
    return ref


@pytest.fixture
def keypair(tmp_path) -> tuple[Path, Path]:
    return key_pair(tmp_path / "k")


def _json(capsys, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- sign and verify ----------------------------------------------------------------------------
def test_sign_every_form_in_a_layout_and_verify(layout, keypair, capsys):
    private, public = keypair
    signed = ocibridge.sign(layout, ocibridge.SignOptions(key=private, claims={"team": "ml"}), form="all")
    assert signed.reference == layout and signed.digest.startswith("sha256:")
    assert set(signed.written) == {"classic", "bundle", "oms"} and signed.unchanged == ()
    assert signed.written["classic"] == f"sha256-{signed.digest[7:]}.sig"

    again = ocibridge.sign(layout, ocibridge.SignOptions(key=str(private), claims={"team": "ml"}), form="all")
    assert set(again.unchanged) == {"classic", "bundle", "oms"}  # RFC 6979: nothing new
    assert again.as_dict() == _json(capsys, ["sign", layout, "--key", str(private), "--form", "all",
                                             "-a", "team=ml"])

    result = ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public], claims={"team": "ml"}))
    assert result.digest == signed.digest and result.attestation_type is None
    # the manifest is used: the OMS signature covers the files only, so it does not count here
    assert sorted(s.form for s in result.signatures) == ["bundle", "classic"]
    assert all(s.signer == str(public) and s.claims == {"team": "ml"} for s in result.signatures)
    assert result.as_dict() == _json(capsys, ["verify", layout, "--key", str(public), "-a", "team=ml"])


def test_verify_refuses_unsigned_other_keys_and_missing_claims(layout, keypair, tmp_path):
    private, public = keypair
    with pytest.raises(SignatureError, match=r"is not signed \(no sha256-.*\.sig tag"):
        ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public]))
    ocibridge.sign(layout, ocibridge.SignOptions(key=private), form="classic")
    _, other = key_pair(tmp_path / "other", "other")
    with pytest.raises(SignatureError, match="none verifies with key") as refused:
        ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[other]))
    assert str(refused.value).startswith(f"{layout}: refused: ")
    with pytest.raises(SignatureError, match="claim stage=prod missing"):
        ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public], claims={"stage": "prod"}))
    with pytest.raises(SignatureError, match="needs a key"):
        ocibridge.verify(layout, ocibridge.VerifyOptions())
    with pytest.raises(UsageError, match="unknown signature form"):
        ocibridge.sign(layout, ocibridge.SignOptions(key=private), form="gpg")


def test_a_tampered_signature_or_store_fails(layout, keypair):
    """A signed claim changed after signing (a forged payload with the real signature) does not
    verify; a blob changed in the layout is caught by its digest before any signature is read."""
    import base64

    from ocibridge.signing import keys
    from ocibridge.signing.attach import attach_classic
    from ocibridge.signing.classic import signature_layer
    from ocibridge.signing.payload import simple_signing_payload
    from ocibridge.stores.layout import LayoutStore

    private, public = keypair
    root = Path(layout.removeprefix("oci:").rsplit(":", 1)[0])
    with LayoutStore(root) as store:
        subject = store.resolve("v1")
        signed = simple_signing_payload("example/model", subject.digest, {"stage": "dev"})
        forged = simple_signing_payload("example/model", subject.digest, {"stage": "prod"})
        signature = base64.b64encode(keys.sign(keys.load_private_key(private), signed)).decode()
        attach_classic(store, subject, signature_layer(forged, signature))
    with pytest.raises(SignatureError, match=r"refused: .*signature does not verify"):
        ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public]))

    ocibridge.sign(layout, ocibridge.SignOptions(key=private), form="classic")
    assert ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public])).signatures  # the real one
    (payload,) = [p for p in (root / "blobs" / "sha256").iterdir() if b'"stage":"prod"' in p.read_bytes()]
    payload.chmod(0o644)
    payload.write_bytes(payload.read_bytes().replace(b'"prod"', b'"test"'))
    with pytest.raises(DigestMismatch):
        ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[public]))


def test_an_encrypted_cosign_key_signs_with_its_password(layout, monkeypatch):
    """cosign's own key file (scrypt + secretbox), its password given or from $COSIGN_PASSWORD."""
    key, pub = data("signing", "cosign-key", "empty-password.key"), data("signing", "cosign-key", "empty-password.pub")
    monkeypatch.setenv("COSIGN_PASSWORD", "wrong")
    with pytest.raises(SignatureError, match="wrong password"):
        ocibridge.sign(layout, ocibridge.SignOptions(key=key))
    signed = ocibridge.sign(layout, ocibridge.SignOptions(key=key, password=""), form="bundle")
    assert list(signed.written) == ["bundle"]
    (found,) = ocibridge.verify(layout, ocibridge.VerifyOptions(keys=[pub])).signatures
    assert found.form == "bundle" and found.where == signed.written["bundle"]


def test_attest_takes_the_key_files_password_as_sign_does(layout, tmp_path, monkeypatch):
    """attest() and AttestOptions take the password of cosign's encrypted key file, as SignOptions
    does: a Python caller need not put it into the process environment."""
    key = data("signing", "cosign-key", "empty-password.key")
    monkeypatch.setenv("COSIGN_PASSWORD", "wrong")
    with pytest.raises(SignatureError, match="wrong password"):
        ocibridge.attest(layout, sbom=True, key=key)
    done = ocibridge.attest(layout, sbom=True, key=key, password="")
    assert list(done.written) == ["sbom"] and done.signed
    pushed = ocibridge.push(str(make_model(tmp_path / "m2")), f"oci:{tmp_path}/store:v2",
                            attest=ocibridge.AttestOptions(provenance=True, key=key, password=""))
    assert pushed.extra["evidence"]["signed"]


def test_sign_and_verify_in_a_registry(tmp_path, registry, unique_repo, keypair, capsys):
    private, public = keypair
    ref = f"{registry.host}/{unique_repo}:v1"
    ocibridge.push(str(make_model(tmp_path / "m")), ref)
    unsigned = f"{registry.host}/{unique_repo}-unsigned:v1"
    ocibridge.copy_reference(ref, unsigned)
    signed = ocibridge.sign(ref, ocibridge.SignOptions(key=private, identity=f"{registry.host}/{unique_repo}"))
    assert set(signed.written) == {"classic", "bundle"}
    result = ocibridge.verify(ref, ocibridge.VerifyOptions(keys=[public]))
    assert result.digest == signed.digest and len(result.signatures) == 2
    assert result.as_dict() == _json(capsys, ["verify", ref, "--key", str(public)])
    with pytest.raises(SignatureError, match=f"^{unsigned}: refused: .* is not signed"):
        ocibridge.verify(unsigned, ocibridge.VerifyOptions(keys=[public]))


def test_a_file_against_a_bundle_keyed_and_keyless(tmp_path, keypair, capsys):
    from ocibridge.signing import keys
    from ocibridge.signing.sigstorebundle import make_bundle, statement

    private, public = keypair
    artifact = tmp_path / "weights.bin"
    artifact.write_bytes(b"weights\n" * 1000)
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    bundle = tmp_path / "weights.sigstore.json"
    bundle.write_bytes(make_bundle(keys.load_private_key(private), statement("weights", digest, {})))
    result = ocibridge.verify(artifact, ocibridge.VerifyOptions(keys=[public]), bundle=bundle)
    assert result.digest == digest and [s.form for s in result.signatures] == ["bundle"]
    assert result.as_dict() == _json(capsys, ["verify", str(artifact), "--bundle", str(bundle), "--key", str(public)])

    keyless = ocibridge.VerifyOptions(certificate_identity=CONFORMANCE_ID, certificate_oidc_issuer=CONFORMANCE_ISSUER,
                                      trusted_root=BUNDLE / "public-good.trusted_root.json")
    found = ocibridge.verify(BUNDLE / "artifact", keyless, bundle=BUNDLE / "bundle.sigstore.json")
    assert found.signatures[0].signer == CONFORMANCE_ID
    with pytest.raises(SignatureError, match="refused: keyless bundle: .*digest mismatch"):
        ocibridge.verify(BUNDLE / "artifact.tampered", keyless, bundle=BUNDLE / "bundle.sigstore.json")


def test_verify_dir_on_a_pulled_directory(layout, keypair, tmp_path, capsys):
    private, public = keypair
    ocibridge.sign(layout, ocibridge.SignOptions(key=private), form="oms")
    out = tmp_path / "pulled"
    ocibridge.pull(layout, str(out), options=ocibridge.PullOptions(with_signatures=True))
    result = ocibridge.verify_dir(out, [public])
    assert result.files == len([p for p in out.rglob("*") if p.is_file()]) - 1  # all but model.sig
    assert result.signer == str(public) and result.model
    assert result.as_dict() == _json(capsys, ["verify-dir", str(out), "--key", str(public)])

    moved = shutil.move(out / "model.sig", tmp_path / "model.sig")
    with pytest.raises(UsageError, match="holds no model.sig"):
        ocibridge.verify_dir(out, [public])
    assert ocibridge.verify_dir(out, [public], signature=moved).files == result.files
    (out / "config.json").write_text("{}")  # a changed file
    with pytest.raises(SignatureError, match=f"^{out}: refused: .*config.json"):
        ocibridge.verify_dir(out, [public], signature=moved)


# -- the policy on use ----------------------------------------------------------------------------
def _policy(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    return path


def test_verification_is_what_pull_takes(layout, keypair, tmp_path):
    private, public = keypair
    assert ocibridge.verification() is None
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.pull(layout, str(tmp_path / "a"), verify=ocibridge.verification(keys=[public]))
    assert not (tmp_path / "a").exists()
    ocibridge.sign(layout, ocibridge.SignOptions(key=private))
    ocibridge.pull(layout, str(tmp_path / "b"), verify=ocibridge.verification(keys=[public]))
    reject = _policy(tmp_path, {"default": [{"type": "reject"}]})
    with pytest.raises(SignatureError, match="rejects it"):
        ocibridge.pull(layout, str(tmp_path / "c"), verify=ocibridge.verification(keys=[public], policy=reject))


def test_check_policy_rejects_with_its_reasons(layout, tmp_path):
    store = Path(layout.removeprefix("oci:").rsplit(":", 1)[0]).resolve()
    verdict = ocibridge.check_policy(layout, _policy(tmp_path, {
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"oci": {str(store.parent): [{"type": "reject"}]}}}))
    assert not verdict.allowed
    assert (verdict.scope, verdict.entry, verdict.digest) == (f"oci:{store}", f'oci "{store.parent}"', None)
    (check,) = verdict.requirements
    assert (check.type, check.satisfied) == ("reject", False)
    assert verdict.reasons == (f"{layout}: refused: the policy {tmp_path / 'policy.json'} "
                               f'(oci "{store.parent}") rejects it',)
    assert verdict.as_dict()["requirements"][0]["satisfied"] is False

    accepted = ocibridge.check_policy(layout, _policy(tmp_path, {"default": [{"type": "insecureAcceptAnything"}]}))
    assert accepted.allowed and accepted.entry == "default" and accepted.reasons == ("accepts anything",)


def test_check_policy_sigstore_signed_in_a_registry(tmp_path, registry, unique_repo, keypair):
    private, public = keypair
    repo = f"{registry.host}/{unique_repo}"
    ocibridge.push(str(make_model(tmp_path / "m")), f"{repo}:v1")
    ocibridge.copy_reference(f"{repo}:v1", f"{repo}:unsigned")
    policy = _policy(tmp_path, {"default": [{"type": "reject"}], "transports": {"docker": {
        repo: [{"type": "sigstoreSigned", "keyPath": str(public), "signedIdentity": {"type": "matchRepository"}}]}}})

    refused = ocibridge.check_policy(f"{repo}:unsigned", policy)
    assert not refused.allowed and refused.entry == f'docker "{repo}"' and refused.digest
    (reason,) = refused.reasons
    assert reason.startswith(f"{repo}:unsigned: refused by the policy") and "has none" in reason

    ocibridge.sign(f"{repo}:v1", ocibridge.SignOptions(key=private, identity=repo), form="classic")
    allowed = ocibridge.check_policy(f"{repo}:v1", policy)
    assert allowed.allowed and allowed.scope == f"docker:{repo}:v1"
    (check,) = allowed.requirements
    assert check.satisfied and check.signer == str(public) and check.type == "sigstoreSigned"
    assert allowed.as_dict()["allowed"] is True and allowed.as_dict()["policyFile"] == str(policy)

    # a signature naming another repository does not meet matchRepository
    other = f"{registry.host}/{unique_repo}-other"
    ocibridge.copy_reference(f"{repo}:v1", f"{other}:v1")
    ocibridge.sign(f"{other}:v1", ocibridge.SignOptions(key=private, identity=repo), form="classic")
    wrong = ocibridge.check_policy(f"{other}:v1", _policy(tmp_path, {"default": [
        {"type": "sigstoreSigned", "keyPath": str(public), "signedIdentity": {"type": "matchRepository"}}]}))
    assert not wrong.allowed and "is not accepted" in wrong.reasons[0]


def test_check_policy_reports_unchecked_requirements_and_no_file(layout, keypair, tmp_path, monkeypatch):
    _, public = keypair
    both = ocibridge.check_policy(layout, _policy(tmp_path, {"default": [
        {"type": "sigstoreSigned", "keyPath": str(public)}, {"type": "reject"}]}))
    assert not both.allowed and [c.satisfied for c in both.requirements] == [None, False]
    assert both.digest is None  # refused without reading the store
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(tmp_path / "policy.json"))
    assert not ocibridge.check_policy(layout).allowed  # the policy pull would find
    monkeypatch.delenv("OCIBRIDGE_POLICY")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("ocibridge.signing.policy_place.SYSTEM_POLICY", tmp_path / "none.json")
    free = ocibridge.check_policy(layout)
    assert free.allowed and free.policy_file is None and free.requirements == ()
