"""Attestations are not signatures (issue 34, item 3).

A DSSE bundle signed by the trusted key, whose in-toto statement names the artifact but carries
another predicate type (SLSA provenance, an SBOM, a vulnerability scan, anything), says something
*about* the artifact; it does not sign it. Each generated hostile bundle is attached as the only
referrer of an otherwise unsigned artifact and must be refused by ``verify``, by ``pull
--verify-key`` (before anything is written) and by ``verify FILE --bundle``.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from ocibridge.cli import main
from ocibridge.signing import keys
from ocibridge.signing.attach import attach_bundle
from ocibridge.signing.sigstorebundle import SIGN_PREDICATE_TYPE, STATEMENT_V1, make_bundle
from ocibridge.stores.layout import LayoutStore
from tests.signing import test_signing as _signing
from tests.signing_keys import key_pair

pushed = _signing.pushed  # the small artifact in a layout, shared

ATTESTATION_TYPES = [
    "https://slsa.dev/provenance/v0.2",
    "https://slsa.dev/provenance/v1",
    "https://spdx.dev/Document",
    "https://cyclonedx.org/bom",
    "https://cosign.sigstore.dev/attestation/vuln/v1",
    "https://in-toto.io/attestation/test-result/v0.1",
    SIGN_PREDICATE_TYPE + "/",  # near misses of the signature predicate
    SIGN_PREDICATE_TYPE.upper(),
    " " + SIGN_PREDICATE_TYPE,
    SIGN_PREDICATE_TYPE + "\nverified OK",
]
#: Statements whose predicate type is absent or not a string.
MISSING_TYPES: list[object] = [None, [SIGN_PREDICATE_TYPE], {"type": SIGN_PREDICATE_TYPE}, 1]


@pytest.fixture
def unsigned(pushed, tmp_path):
    """(layout, digest, private key, public key path): an artifact with no signature yet."""
    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    return layout, digest, keys.load_private_key(private), public


def _statement(digest: str, predicate_type: object, *, omit: bool = False) -> bytes:
    algorithm, hexpart = digest.split(":", 1)
    doc: dict[str, object] = {"_type": STATEMENT_V1,
                              "subject": [{"name": "example.test/m", "digest": {algorithm: hexpart}}],
                              "predicate": {"buildType": "https://example.test/build", "builder": {"id": "x"}}}
    if not omit:
        doc["predicateType"] = predicate_type
    return json.dumps(doc).encode()


def _attach(layout, digest: str, bundle: bytes) -> None:
    store = LayoutStore(layout)
    attach_bundle(store, store.resolve(digest), bundle)


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("predicate_type", ATTESTATION_TYPES)
def test_key_signed_attestation_is_not_a_signature(unsigned, tmp_path, capsys, predicate_type):
    layout, digest, private, public = unsigned
    _attach(layout, digest, make_bundle(private, _statement(digest, predicate_type)))
    err = _refused(capsys, ["verify", f"oci:{layout}:v1", "--key", str(public)])
    # counted as what it is (issue 53 item 11), never as a signature that fails
    assert "is not signed" in err and "1 attestation(s), which are no signatures" in err
    assert "signature(s), none verifies" not in err
    out = tmp_path / "out"
    err = _refused(capsys, ["pull", f"oci:{layout}:v1", str(out), "--verify-key", str(public)])
    assert "refused" in err and "1 attestation(s), which are no signatures" in err
    assert not out.exists()


@pytest.mark.parametrize("predicate_type", MISSING_TYPES)
def test_statement_without_a_string_predicate_type_is_refused(unsigned, capsys, predicate_type):
    layout, digest, private, public = unsigned
    payload = _statement(digest, predicate_type, omit=predicate_type is None)
    _attach(layout, digest, make_bundle(private, payload))
    err = _refused(capsys, ["verify", f"oci:{layout}:v1", "--key", str(public)])
    assert "not a signature" in err


def test_signature_predicate_naming_another_digest_is_refused(unsigned, capsys):
    layout, digest, private, public = unsigned
    other = "sha256:" + hashlib.sha256(b"another artifact").hexdigest()
    payload = _statement(other, SIGN_PREDICATE_TYPE)
    _attach(layout, digest, make_bundle(private, payload))
    err = _refused(capsys, ["verify", f"oci:{layout}:v1", "--key", str(public)])
    assert f"does not name {digest}" in err


def test_the_signature_predicate_still_verifies(unsigned, capsys):
    """The control: the same generated statement with cosign's signature predicate verifies."""
    layout, digest, private, public = unsigned
    _attach(layout, digest, make_bundle(private, _statement(digest, SIGN_PREDICATE_TYPE)))
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "--json"]) == 0
    (sig,) = json.loads(capsys.readouterr().out)["signatures"]
    assert sig["form"] == "bundle"


def test_attestation_beside_a_real_signature_does_not_count_but_does_not_hide_it(unsigned, tmp_path, capsys):
    layout, digest, private, public = unsigned
    _attach(layout, digest, make_bundle(private, _statement(digest, ATTESTATION_TYPES[0])))
    assert main(["sign", f"oci:{layout}:v1", "--key", str(tmp_path / "k" / "cosign.key"),
                 "--form", "bundle"]) == 0
    capsys.readouterr()
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["signatures"]) == 1


@pytest.mark.parametrize("predicate_type", ATTESTATION_TYPES[:3])
def test_verify_blob_refuses_an_attestation_bundle(tmp_path, capsys, predicate_type):
    """``verify FILE --bundle B``: a DSSE attestation about the file is not its signature."""
    private, public = key_pair(tmp_path / "k")
    artifact = tmp_path / "artifact.bin"
    artifact.write_bytes(b"model weights\n" * 100)
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    bundle = tmp_path / "b.json"
    bundle.write_bytes(make_bundle(keys.load_private_key(private), _statement(digest, predicate_type)))
    err = _refused(capsys, ["verify", str(artifact), "--bundle", str(bundle), "--key", str(public)])
    assert "not a signature" in err
    bundle.write_bytes(make_bundle(keys.load_private_key(private), _statement(digest, SIGN_PREDICATE_TYPE)))
    assert main(["verify", str(artifact), "--bundle", str(bundle), "--key", str(public)]) == 0


# -- asked for by type: verify --attestation-type TYPE ------------------------------------------
def test_attestation_verifies_only_when_asked_for_by_its_type(unsigned, tmp_path, capsys):
    layout, digest, private, public = unsigned
    slsa = ATTESTATION_TYPES[1]
    _attach(layout, digest, make_bundle(private, _statement(digest, slsa)))
    assert main(["verify", f"oci:{layout}:v1", "--key", str(public), "--attestation-type", slsa, "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["signatures"]
    assert found["form"] == "attestation"
    err = _refused(capsys, ["verify", f"oci:{layout}:v1", "--key", str(public),
                            "--attestation-type", ATTESTATION_TYPES[0]])
    assert f"attestation of type '{slsa}'" in err


def test_a_signature_is_no_attestation(unsigned, tmp_path, capsys):
    """Signed in both forms (.sig tag and DSSE bundle), the artifact still has no SLSA attestation."""
    layout, _, _, public = unsigned
    assert main(["sign", f"oci:{layout}:v1", "--key", str(tmp_path / "k" / "cosign.key")]) == 0
    capsys.readouterr()
    err = _refused(capsys, ["verify", f"oci:{layout}:v1", "--key", str(public),
                            "--attestation-type", ATTESTATION_TYPES[1]])
    assert "2 signature(s), none verifies" in err and "not an attestation" in err
