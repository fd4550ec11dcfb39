"""Signed evidence (issue 44): the AI-BOM and SLSA provenance as in-toto attestations (DSSE in a
sigstore bundle, attached as a referrer, as cosign v3 attests), verified by ``verify
--attestation-type``; a tampered statement, another subject, another key: refused with one line.
An attestation covers its subject's statement only (signing/coverage.py), and travels as a
referrer (copy -r, save/load)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.errors import SignatureError
from ocibridge.signing import keys
from ocibridge.signing.attach import attach_bundle, find_signatures
from ocibridge.signing.attest import CYCLONEDX, SLSA_PROVENANCE_V1, find_attestations, statement
from ocibridge.signing.bom import model_bom
from ocibridge.signing.coverage import Trusted
from ocibridge.signing.sigstorebundle import make_bundle
from ocibridge.signing.verify import VerifyPolicy, verify_artifact
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model
from tests.signing_keys import key_pair


@pytest.fixture
def pushed(tmp_path, capsys):
    """(layout ref, layout dir, digest, private key path, public key path, other public key path)."""
    model = make_model(tmp_path / "m")
    layout = tmp_path / "store"
    assert main(["push", str(model), f"oci:{layout}:v1", "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o")
    capsys.readouterr()
    return f"oci:{layout}:v1", layout, LayoutStore(layout).resolve("v1").digest, private, public, other


def _one_line(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code != 0, captured
    assert captured.err.startswith("ocibridge: error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


def _payload(bundle: bytes) -> dict:
    return json.loads(base64.b64decode(json.loads(bundle)["dsseEnvelope"]["payload"]))


def test_attest_sbom_then_verify_it_by_type(pushed, capsys):
    ref, layout, digest, private, public, _ = pushed
    assert main(["attest", ref, "--sbom", "--key", str(private)]) == 0
    assert "already there" not in capsys.readouterr().out
    assert main(["attest", ref, "--sbom", "--key", str(private)]) == 0  # deterministic: nothing new
    assert "already there: sbom" in capsys.readouterr().out
    store = LayoutStore(layout)
    (found,) = find_attestations(store, store.resolve(digest))
    assert found.predicate_type == CYCLONEDX
    statement_doc = _payload(found.bundle)
    assert statement_doc["predicateType"] == CYCLONEDX
    assert statement_doc["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    assert statement_doc["predicate"] == json.loads(model_bom(store, store.resolve(digest)))
    for name in ("cyclonedx", CYCLONEDX):
        assert main(["verify", ref, "--key", str(public), "--attestation-type", name, "--json"]) == 0
        (verified,) = json.loads(capsys.readouterr().out)["signatures"]
        assert verified["form"] == "attestation"
    # an attestation is no signature: nothing that asks for one accepts it
    _one_line(capsys, main(["verify", ref, "--key", str(public)]))
    _one_line(capsys, main(["pull", ref, str(layout.parent / "out"), "--verify-key", str(public), "-q"]))
    assert not (layout.parent / "out").exists()
    assert main(["inspect", ref]) == 0
    assert f"attestation (signed): {CYCLONEDX}" in capsys.readouterr().out


def test_push_provenance_is_signed_reproducible_and_names_what_was_read(pushed, tmp_path, capsys):
    _, _, _, private, public, _ = pushed
    model = tmp_path / "m"
    ref = f"oci:{tmp_path}/prov:v1"
    argv = ["push", str(model), ref, "-q", "--provenance", "--sbom", "--attest-key", str(private), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["evidence"]["written"] == first["evidence"]["written"]
    assert sorted(second["evidence"]["unchanged"]) == ["provenance", "sbom"]  # same inputs, same statement
    assert main(["verify", ref, "--key", str(public), "--attestation-type", "slsaprovenance1"]) == 0
    capsys.readouterr()
    store = LayoutStore(tmp_path / "prov")
    (prov,) = [a for a in find_attestations(store, store.resolve("v1")) if a.predicate_type == SLSA_PROVENANCE_V1]
    body = _payload(prov.bundle)["predicate"]
    build = body["buildDefinition"]
    assert build["buildType"] == "https://ocibridge.dev/slsa/push/v1"
    assert build["externalParameters"]["source"] == str(model)
    deps = {d["name"]: d["digest"] for d in build["resolvedDependencies"]}
    assert deps["model.safetensors"]["sha256"] == hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
    assert set(deps) >= {"model.safetensors", "weights/part-2.bin", "config.json"}
    assert body["runDetails"]["builder"]["id"] == "https://ocibridge.dev/builder/cli"
    assert "metadata" not in body["runDetails"]  # no wall clock unless asked
    assert main([*argv[:-1], "--provenance-time", "2025-01-01T00:00:00Z"]) == 0
    times = [_payload(a.bundle)["predicate"]["runDetails"].get("metadata") for a in
             find_attestations(store, store.resolve("v1")) if a.predicate_type == SLSA_PROVENANCE_V1]
    assert {"startedOn": "2025-01-01T00:00:00Z"} in times


def test_push_reads_the_attestation_key_s_password_from_its_own_variable(pushed, tmp_path, capsys, monkeypatch):
    """push --scan-key and --attest-key are two keys: $OCIBRIDGE_ATTEST_PASSWORD is the attestation
    key's (a wrong one names --attest-key), $COSIGN_PASSWORD stays the other's."""
    import ocibridge

    attester = ocibridge.keygen(tmp_path / "attester", password="attest-pw")
    ref = f"oci:{tmp_path}/own-password:v1"
    argv = ["push", str(tmp_path / "m"), ref, "-q", "--provenance", "--attest-key", attester.private_key]
    monkeypatch.setenv("COSIGN_PASSWORD", "another key's")
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "wrong")
    capsys.readouterr()
    assert main(argv) == 1
    assert f"--attest-key {attester.private_key}: wrong password for the cosign key ($OCIBRIDGE_ATTEST_PASSWORD)" \
        in capsys.readouterr().err
    monkeypatch.setenv("OCIBRIDGE_ATTEST_PASSWORD", "attest-pw")
    assert main(argv) == 0, capsys.readouterr().err
    assert main(["verify", ref, "--key", attester.public_key, "--attestation-type", "slsaprovenance1"]) == 0


def _attach_statement(layout: Path, digest: str, key_path: Path, statement_bytes: bytes, kind: str) -> None:
    store = LayoutStore(layout)
    bundle = make_bundle(keys.load_private_key(key_path), statement_bytes)
    attach_bundle(store, store.resolve(digest), bundle, kind)


def test_tampered_statement_wrong_subject_other_key_are_refused(pushed, capsys):
    ref, layout, digest, private, public, other = pushed
    store = LayoutStore(layout)
    # tampered: a signed statement whose payload was changed after signing
    good = make_bundle(keys.load_private_key(private), statement("x/m", digest, CYCLONEDX, {"bomFormat": "CycloneDX"}))
    doc = json.loads(good)
    changed = statement("x/m", digest, CYCLONEDX, {"bomFormat": "CycloneDX", "evil": True})
    doc["dsseEnvelope"]["payload"] = base64.b64encode(changed).decode()
    attach_bundle(store, store.resolve(digest), json.dumps(doc).encode(), CYCLONEDX)
    err = _one_line(capsys, main(["verify", ref, "--key", str(public), "--attestation-type", "cyclonedx"]))
    assert "refused" in err and "does not verify" in err
    # wrong subject: signed by the key, about another digest
    _attach_statement(layout, digest, private, statement("x/m", "sha256:" + "0" * 64, CYCLONEDX, {}), CYCLONEDX)
    err = _one_line(capsys, main(["verify", ref, "--key", str(public), "--attestation-type", "cyclonedx"]))
    assert "does not name" in err
    # the right statement, but verified with another key
    _attach_statement(layout, digest, private, statement("x/m", digest, CYCLONEDX, {}), CYCLONEDX)
    err = _one_line(capsys, main(["verify", ref, "--key", str(other), "--attestation-type", "cyclonedx"]))
    assert "does not verify" in err
    assert main(["verify", ref, "--key", str(public), "--attestation-type", "cyclonedx"]) == 0


def test_an_attestation_covers_its_statement_only(pushed):
    _, layout, digest, private, public, _ = pushed
    _attach_statement(layout, digest, private, statement("x/m", digest, SLSA_PROVENANCE_V1, {}), SLSA_PROVENANCE_V1)
    store = LayoutStore(layout)
    subject = store.resolve(digest)
    policy = VerifyPolicy.from_files([str(public)], predicate_type=SLSA_PROVENANCE_V1)
    (verified,) = verify_artifact(store, subject, policy, trusts=Trusted.STATEMENT)
    assert verified.form == "attestation"
    for trusted in Trusted:
        if trusted is not Trusted.STATEMENT:
            with pytest.raises(SignatureError, match=f"does not cover the {trusted.value}"):
                verify_artifact(store, subject, policy, trusts=trusted)


def test_a_signature_does_not_stand_for_an_attestation(pushed):
    ref, layout, digest, private, public, _ = pushed
    assert main(["sign", ref, "--key", str(private)]) == 0
    store = LayoutStore(layout)
    policy = VerifyPolicy.from_files([str(public)])
    with pytest.raises(SignatureError, match="does not cover the attested statement"):
        verify_artifact(store, store.resolve(digest), policy, trusts=Trusted.STATEMENT)


def test_attestations_travel_with_copy_r_and_through_save_and_load(pushed, tmp_path, capsys):
    ref, layout, digest, private, public, _ = pushed
    assert main(["attest", ref, "--sbom", "--key", str(private)]) == 0
    assert main(["copy", "-r", ref, f"oci:{tmp_path}/copied:v1", "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{tmp_path}/copied:v1", "--key", str(public), "--attestation-type", "cyclonedx"]) == 0
    assert main(["copy", ref, f"oci:{tmp_path}/plain:v1", "-q"]) == 0  # without -r: the model only
    capsys.readouterr()
    _one_line(capsys, main(["verify", f"oci:{tmp_path}/plain:v1", "--key", str(public),
                            "--attestation-type", "cyclonedx"]))
    bundle = tmp_path / "models.tar"
    assert main(["save", ref, "-o", str(bundle)]) == 0
    assert main(["load", str(bundle), f"oci:{tmp_path}/loaded"]) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{tmp_path}/loaded:v1", "--key", str(public), "--attestation-type", "cyclonedx"]) == 0
    store = LayoutStore(tmp_path / "loaded")
    assert [a.predicate_type for a in find_attestations(store, store.resolve("v1"))] == [CYCLONEDX]
    assert not find_signatures(store, store.resolve("v1")).classic


def test_attest_needs_something_to_attest(pushed, capsys):
    ref, *_, private, _, _ = pushed
    err = _one_line(capsys, main(["attest", ref, "--key", str(private)]))
    assert "--sbom" in err
