"""Signing and verifying in OCI layouts: formats against the cosign specifications (checked by
tests/cosign_spec.py, which shares no code with ocibridge), real cosign signatures and a real
keyless bundle, one-byte tampering, keys, the policy on use, and copies keeping signatures."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from cryptography.exceptions import InvalidSignature

from ocibridge.cli import main
from ocibridge.errors import SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.signing import keys
from ocibridge.signing.classic import signature_layer, signature_manifest
from ocibridge.signing.payload import simple_signing_payload
from ocibridge.stores.layout import LayoutStore
from tests import cosign_spec
from tests.modelgen import make_model
from tests.signing_keys import key_pair
from tests.support.data import data

SIGNED = data("signing", "simplesigning", "dir-img-cosign-valid")
COSIGN_PUB = data("signing", "simplesigning", "cosign.pub")
REAL_DIGEST = "sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00"
BUNDLE = data("signing", "bundle")
CONFORMANCE_ID = ("https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
                  ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main")
CONFORMANCE_ISSUER = "https://token.actions.githubusercontent.com"


@pytest.fixture
def pushed(tmp_path, capsys):
    """A small ModelPack artifact at oci:<tmp>/store:v1; returns (layout path, digest)."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", "--json", "-q"]) == 0
    digest = json.loads(capsys.readouterr().out)["digest"]
    return tmp_path / "store", digest


def _sign(ref, key, *extra):
    return main(["sign", ref, "--key", str(key), *extra])


# -- formats ---------------------------------------------------------------------------------
def test_payload_and_sig_artifact_are_byte_identical_to_cosigns():
    """The payload cosign signed, and the .sig manifest and config it pushes, rebuilt here."""
    payload = (SIGNED / "payload.json").read_bytes()
    assert simple_signing_payload("192.168.64.2:5000/cosign-signed-single-sample", REAL_DIGEST) == payload
    signature = (SIGNED / "signature.b64").read_text().strip()
    layer = signature_layer(payload, signature)
    config_desc, _, desc, data_ = signature_manifest([layer.descriptor])
    layout = SIGNED / "cosign-sig-image-layout"
    assert config_desc.digest == "sha256:be321600a5bd794947dce257829a2f08c21b05dde3edf84706faf6f2ae0f5f60"
    assert desc.digest == cosign_spec.tagged(layout, f"sha256-{REAL_DIGEST[7:]}.sig")["digest"]
    assert data_ == cosign_spec.blob(layout, desc.digest)


def test_signatures_made_here_verify_by_the_spec(pushed, tmp_path, capsys):
    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    assert _sign(f"oci:{layout}:v1", private, "-a", "team=ml", "-a", "build=42") == 0
    out = capsys.readouterr().out
    assert f"sha256-{digest[7:]}.sig" in out
    (payload,) = cosign_spec.check_classic(layout, digest, public.read_bytes())
    assert payload["optional"] == {"build": "42", "team": "ml"}
    assert payload["critical"]["identity"]["docker-reference"] == f"oci:{layout}"
    (statement,) = cosign_spec.check_bundle(layout, digest, public.read_bytes())
    assert statement["subject"][0]["annotations"] == {"build": "42", "team": "ml"}
    # another key fails the independent check
    _, other = key_pair(tmp_path / "other")
    with pytest.raises(InvalidSignature):
        cosign_spec.check_classic(layout, digest, other.read_bytes())


def test_signing_is_reproducible_and_keeps_other_signatures(pushed, tmp_path, capsys):
    layout, digest = pushed
    first, first_pub = key_pair(tmp_path / "a", "a")
    second, second_pub = key_pair(tmp_path / "b", "b")
    assert _sign(f"oci:{layout}:v1", first) == 0
    index_before = (layout / "index.json").read_bytes()
    assert _sign(f"oci:{layout}:v1", first, "--json") == 0  # RFC 6979: same bytes, nothing new
    capsys.readouterr()
    assert (layout / "index.json").read_bytes() == index_before
    assert _sign(f"oci:{layout}:v1", second, "--form", "classic") == 0
    assert len(cosign_spec.check_classic(layout, digest, first_pub.read_bytes())) == 1
    assert len(cosign_spec.check_classic(layout, digest, second_pub.read_bytes())) == 1
    manifest = json.loads(cosign_spec.blob(layout, cosign_spec.tagged(layout, f"sha256-{digest[7:]}.sig")["digest"]))
    assert len(manifest["layers"]) == 2  # both keys' signatures, in one .sig manifest
    for pub in (first_pub, second_pub):
        assert main(["verify", f"oci:{layout}:v1", "--key", str(pub)]) == 0


def test_verify_reports_both_forms(pushed, tmp_path, capsys):
    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    assert _sign(f"oci:{layout}:v1", private, "-a", "stage=prod") == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["digest"] == digest
    assert sorted(s["form"] for s in result["signatures"]) == ["bundle", "classic"]
    assert all(s["claims"] == {"stage": "prod"} for s in result["signatures"])
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "-a", "stage=prod"]) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "-a", "stage=dev"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "claim stage=dev missing" in err


@pytest.mark.parametrize("form", ["classic", "bundle"])
def test_each_form_verifies_alone(pushed, tmp_path, capsys, form):
    layout, _ = pushed
    private, public = key_pair(tmp_path / "k")
    assert _sign(f"oci:{layout}:v1", private, "--form", form) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "--json"]) == 0
    assert [s["form"] for s in json.loads(capsys.readouterr().out)["signatures"]] == [form]


def test_unsigned_and_wrong_key_are_one_line_errors(pushed, tmp_path, capsys):
    layout, digest = pushed
    private, _ = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o", "o")
    assert main(["verify", f"oci:{layout}:v1", "--key", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1 and "is not signed" in err
    assert _sign(f"oci:{layout}:v1", private) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{layout}:v1", "--key", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none verifies" in err and "2 signature(s)" in err


# -- real cosign signatures, and tampering ------------------------------------------------------
def _real_signed_layout(tmp_path, payload: bytes | None = None, signature: str | None = None,
                        manifest: bytes | None = None):
    """A layout holding the real signed manifest (tag 'signed') and cosign's .sig artifact,
    with optionally one piece replaced."""
    store = LayoutStore(tmp_path / "real", create=True)
    body = manifest or (SIGNED / "manifest.json").read_bytes()
    subject = Descriptor.for_bytes("application/vnd.docker.distribution.manifest.v2+json", body)
    store.push_manifest(subject, body, "signed")
    payload = payload or (SIGNED / "payload.json").read_bytes()
    signature = signature or (SIGNED / "signature.b64").read_text().strip()
    layer = signature_layer(payload, signature)
    config_desc, config, desc, sig_manifest = signature_manifest([layer.descriptor])
    import io

    for d, b in ((layer.descriptor, payload), (config_desc, config)):
        store.push_blob(d, io.BytesIO(b))
    store.push_manifest(desc, sig_manifest, f"sha256-{REAL_DIGEST[7:]}.sig")
    return tmp_path / "real"


def test_real_cosign_signature_verifies(tmp_path, capsys):
    layout = _real_signed_layout(tmp_path)
    assert main(["verify", f"oci:{layout}:signed", "--key", str(COSIGN_PUB), "--json"]) == 0
    (sig,) = json.loads(capsys.readouterr().out)["signatures"]
    assert sig["form"] == "classic" and sig["signer"] == str(COSIGN_PUB)


def test_real_cosign_layout_copied_in_verifies(tmp_path, capsys):
    """cosign's .sig artifact as pushed (the reference layout), copied by ocibridge itself."""
    real = tmp_path / "real"
    LayoutStore(real, create=True).push_manifest(
        Descriptor.for_bytes("application/vnd.docker.distribution.manifest.v2+json",
                             (SIGNED / "manifest.json").read_bytes()),
        (SIGNED / "manifest.json").read_bytes(), "signed")
    sig_tag = f"sha256-{REAL_DIGEST[7:]}.sig"
    assert main(["copy", f"oci:{SIGNED / 'cosign-sig-image-layout'}:{sig_tag}", f"oci:{real}:{sig_tag}"]) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{real}:signed", "--key", str(COSIGN_PUB)]) == 0


@pytest.mark.parametrize("piece", ["payload", "signature", "manifest"])
def test_one_byte_change_fails(tmp_path, capsys, piece):
    if piece == "payload":
        layout = _real_signed_layout(tmp_path, payload=(SIGNED / "payload.tampered.json").read_bytes())
    elif piece == "signature":
        raw = bytearray(base64.b64decode((SIGNED / "signature.b64").read_text()))
        raw[len(raw) // 2] ^= 0x01
        layout = _real_signed_layout(tmp_path, signature=base64.b64encode(bytes(raw)).decode())
    else:
        body = (SIGNED / "manifest.json").read_bytes().replace(b'"size":1512', b'"size":1513')
        layout = _real_signed_layout(tmp_path, manifest=body)
    assert main(["verify", f"oci:{layout}:signed", "--key", str(COSIGN_PUB)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1
    assert ("is not signed" if piece == "manifest" else "none verifies") in err


@pytest.mark.parametrize("piece", ["statement", "signature"])
def test_bundle_one_byte_change_fails(pushed, tmp_path, capsys, piece):
    """A bundle whose signed statement or signature differs by one byte, attached as the only
    referrer of an unsigned copy, does not verify."""
    from ocibridge.signing.attach import attach_bundle

    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    assert _sign(f"oci:{layout}:v1", private, "--form", "bundle") == 0
    (manifest,) = cosign_spec.referrers(layout, digest)
    doc = json.loads(cosign_spec.blob(layout, manifest["layers"][0]["digest"]))
    envelope = doc["dsseEnvelope"]
    field_ = envelope if piece == "statement" else envelope["signatures"][0]
    name = "payload" if piece == "statement" else "sig"
    raw = bytearray(base64.b64decode(field_[name]))
    raw[len(raw) // 2] ^= 0x01
    field_[name] = base64.b64encode(bytes(raw)).decode()
    dst = tmp_path / "dst"
    assert main(["copy", f"oci:{layout}:v1", f"oci:{dst}:v1", "-q"]) == 0
    store = LayoutStore(dst)
    attach_bundle(store, store.resolve("v1"), json.dumps(doc).encode())
    capsys.readouterr()
    assert main(["verify", f"oci:{dst}:v1", "--key", str(public)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DSSE signature does not verify" in err


# -- keyless bundles (sigstore-python, offline) -------------------------------------------------
def _keyless(*args):
    return main(["verify", *args, "--bundle", str(BUNDLE / "bundle.sigstore.json"),
                 "--certificate-identity", CONFORMANCE_ID, "--certificate-oidc-issuer", CONFORMANCE_ISSUER,
                 "--trusted-root", str(BUNDLE / "public-good.trusted_root.json")])


def test_real_keyless_bundle_verifies_offline(capsys):
    assert _keyless(str(BUNDLE / "artifact")) == 0
    assert "bundle by " + CONFORMANCE_ID in capsys.readouterr().out


def test_real_keyless_bundle_refuses_tampered_artifact_and_other_identity(capsys):
    assert _keyless(str(BUNDLE / "artifact.tampered")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "digest mismatch" in err
    assert main(["verify", str(BUNDLE / "artifact"), "--bundle", str(BUNDLE / "bundle.sigstore.json"),
                 "--certificate-identity", "someone@example.com", "--certificate-oidc-issuer", CONFORMANCE_ISSUER,
                 "--trusted-root", str(BUNDLE / "public-good.trusted_root.json")]) == 1
    assert "ocibridge: error:" in capsys.readouterr().err


def test_keyless_needs_all_three_flags(capsys):
    assert main(["verify", str(BUNDLE / "artifact"), "--bundle", str(BUNDLE / "bundle.sigstore.json"),
                 "--certificate-identity", CONFORMANCE_ID]) == 1
    assert "--certificate-oidc-issuer, --trusted-root" in capsys.readouterr().err


# -- keys ------------------------------------------------------------------------------------
def test_real_cosign_key_file_signs(pushed, tmp_path, capsys, monkeypatch):
    layout, digest = pushed
    monkeypatch.setenv("COSIGN_PASSWORD", "")
    key = data("signing", "cosign-key", "empty-password.key")
    pub = data("signing", "cosign-key", "empty-password.pub")
    assert _sign(f"oci:{layout}:v1", key) == 0
    assert cosign_spec.check_classic(layout, digest, pub.read_bytes())
    monkeypatch.setenv("COSIGN_PASSWORD", "wrong")
    assert _sign(f"oci:{layout}:v1", key) == 1
    assert "wrong password" in capsys.readouterr().err


def test_cosign_key_file_round_trip_and_encrypted_pkcs8(tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "cosign.key"
    path.write_bytes(keys.encrypt_cosign_key(key, b"s3cret", n=1024))
    assert keys.load_private_key(path, b"s3cret").private_numbers() == key.private_numbers()
    enc = tmp_path / "enc.pem"
    enc.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"pw")))
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    with pytest.raises(SignatureError, match="encrypted"):
        keys.load_private_key(enc)
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    assert keys.load_private_key(enc).private_numbers() == key.private_numbers()


def test_bad_keys_are_one_line_errors(pushed, tmp_path, capsys):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    layout, _ = pushed
    p384 = tmp_path / "p384.pem"
    p384.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    for path, words in ((p384, "not P-256"), (junk, "not a PEM private key"), (tmp_path / "none", "No such file")):
        assert _sign(f"oci:{layout}:v1", path) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err


# -- policy on use ----------------------------------------------------------------------------
def test_pull_and_copy_refuse_unsigned_before_writing(pushed, tmp_path, capsys):
    layout, _ = pushed
    private, public = key_pair(tmp_path / "k")
    out, dst = tmp_path / "out", tmp_path / "dst"
    assert main(["pull", f"oci:{layout}:v1", str(out), "--verify-key", str(public)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused" in err and "is not signed" in err
    assert main(["copy", f"oci:{layout}:v1", f"oci:{dst}:v1", "--verify-key", str(public)]) == 1
    assert "refused" in capsys.readouterr().err
    assert not out.exists() and not dst.exists()
    assert _sign(f"oci:{layout}:v1", private) == 0
    assert main(["pull", f"oci:{layout}:v1", str(out), "--verify-key", str(public), "-q"]) == 0
    assert main(["copy", f"oci:{layout}:v1", f"oci:{dst}:v1", "--verify-key", str(public), "-q"]) == 0
    assert (out / "model.safetensors").exists() or any(out.iterdir())


def test_modelcar_refuses_badly_signed(pushed, tmp_path, capsys):
    layout, _ = pushed
    private, _ = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o", "o")
    assert _sign(f"oci:{layout}:v1", private) == 0
    before = (layout / "index.json").read_bytes()
    assert main(["k8s", "modelcar", f"oci:{layout}:v1", "--tag", "car", "--verify-key", str(other)]) == 1
    assert "none verifies" in capsys.readouterr().err
    assert (layout / "index.json").read_bytes() == before


def test_verify_before_use_is_reusable(pushed, tmp_path):
    from ocibridge.signing import VerifyPolicy, verify_before_use
    from ocibridge.signing.coverage import Trusted

    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    store = LayoutStore(layout)
    policy = VerifyPolicy.from_files([str(public)])
    with pytest.raises(SignatureError, match="refused"):
        verify_before_use(store, "v1", policy, trusts=Trusted.MANIFEST)
    assert verify_before_use(store, "v1", None, trusts=Trusted.MANIFEST) == []
    assert _sign(f"oci:{layout}:v1", private) == 0
    assert {v.form for v in verify_before_use(store, "v1", policy, trusts=Trusted.MANIFEST)} == {"classic", "bundle"}


# -- signatures travel ------------------------------------------------------------------------
def test_copy_r_keeps_every_signature(pushed, tmp_path, capsys):
    layout, digest = pushed
    a, a_pub = key_pair(tmp_path / "a", "a")
    b, b_pub = key_pair(tmp_path / "b", "b")
    assert _sign(f"oci:{layout}:v1", a) == 0
    dst = tmp_path / "dst"
    # the destination already has a signature by another key: both are kept
    assert main(["copy", f"oci:{layout}:v1", f"oci:{dst}:v1", "-q"]) == 0
    assert _sign(f"oci:{dst}:v1", b, "--form", "classic") == 0
    capsys.readouterr()
    assert main(["copy", "-r", f"oci:{layout}:v1", f"oci:{dst}:v1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["signatures"]) == 2  # the merged .sig tag and the bundle referrer
    assert len(cosign_spec.check_classic(dst, digest, a_pub.read_bytes())) == 1
    assert len(cosign_spec.check_classic(dst, digest, b_pub.read_bytes())) == 1
    sig = json.loads(cosign_spec.blob(dst, cosign_spec.tagged(dst, f"sha256-{digest[7:]}.sig")["digest"]))
    assert len(sig["layers"]) == 2
    assert cosign_spec.check_bundle(dst, digest, a_pub.read_bytes())
    for pub in (a_pub, b_pub):
        assert main(["verify", f"oci:{dst}:v1", "--key", str(pub)]) == 0


def test_copy_without_r_leaves_signatures(pushed, tmp_path):
    layout, digest = pushed
    a, _ = key_pair(tmp_path / "a", "a")
    assert _sign(f"oci:{layout}:v1", a) == 0
    dst = tmp_path / "dst"
    assert main(["copy", f"oci:{layout}:v1", f"oci:{dst}:v1", "-q"]) == 0
    assert f"sha256-{digest[7:]}.sig" not in (dst / "index.json").read_text()
    shutil.rmtree(dst)


def test_mirror_job_verify_block_between_layouts(pushed, tmp_path):
    from ocibridge.mirror import load_job, run_job

    layout, digest = pushed
    private, _ = key_pair(tmp_path / "k")
    assert _sign(f"oci:{layout}:v1", private, "-a", "team=ml") == 0

    def job(verify: str):
        path = tmp_path / "job.toml"
        path.write_text(f'[[sync]]\nsource = "oci:{layout}"\ntarget = "oci:{tmp_path}/mirror"\nverify = {verify}\n')
        return run_job(load_job(path))

    missing = job('{ keys = ["nope.pub"] }')
    assert not missing.ok and "nope.pub: No such file" in missing.artifacts[0].reason
    wrong_claim = job('{ keys = ["k/cosign.pub"], annotations = { team = "ops" } }')
    (failed,) = wrong_claim.artifacts
    assert failed.status == "failed" and "claim team=ops missing" in failed.reason
    index = tmp_path / "mirror" / "index.json"  # the mirror opens (creates) an empty target layout
    assert not index.exists() or json.loads(index.read_text())["manifests"] == []
    done = job('{ keys = ["k/cosign.pub"], annotations = { team = "ml" } }')
    (copied,) = done.artifacts
    assert copied.status == "copied" and copied.digest == digest and copied.signatures == 2
    assert cosign_spec.check_classic(tmp_path / "mirror", digest, (tmp_path / "k" / "cosign.pub").read_bytes())


def test_keyless_bundle_referrer_reaches_sigstore_python(pushed, capsys):
    """A certificate bundle attached to an artifact is verified by sigstore-python over the
    manifest bytes: the real conformance bundle (which signs another file) is refused with the
    library's digest mismatch, not skipped or mistaken for a key signature."""
    from ocibridge.signing.attach import attach_bundle

    layout, _ = pushed
    store = LayoutStore(layout)
    attach_bundle(store, store.resolve("v1"), (BUNDLE / "bundle.sigstore.json").read_bytes())
    assert main(["verify", f"oci:{layout}:v1", "--certificate-identity", CONFORMANCE_ID,
                 "--certificate-oidc-issuer", CONFORMANCE_ISSUER,
                 "--trusted-root", str(BUNDLE / "public-good.trusted_root.json")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "keyless bundle: Bundle message digest mismatch" in err
