"""The OpenSSF model signing cases of tests/signing/test_oms_conformance.py and what ocibridge does with
each (the table of docs/signing.md, "Conformance", is checked against :data:`VERIFY_CASES` and
:data:`ROUNDTRIP_CASES`): the specification's vectors and model-transparency's historical
signatures, copied into tests/data/oms (PROVENANCE.md there, both Apache-2.0), and the cases the
tests make themselves (tests/oms_generated.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "oms"
SPEC = DATA / "spec" / "v1.0"
#: sigstore/model-transparency's scripts/tests/: its historical signatures and test keys
MT = DATA / "model-transparency"
MT_KEYS = MT / "keys" / "certificate"
P384_PUB = MT_KEYS / "signing-key-pub.pem"
#: the two-file model (signme-1, signme-2, ignore-me) the specification's vectors sign
SPEC_MODEL = MT / "v1.1.0-elliptic-key"

VERIFIES, REFUSED, UNSUPPORTED = "verifies", "refused", "unsupported"
_CERT = "certificate OMS signatures"
_CA = "not an ECDSA key"  # a CA certificate given as the key: ocibridge has no certificate-chain method
_DSSE = "DSSE signature does not verify"

#: case -> (what ocibridge's verify-dir does, words its line must hold)
VERIFY_CASES: dict[str, tuple[str, str]] = {
    # the specification's own vectors (test-vectors/v1.0), against SPEC_MODEL and P384_PUB
    "spec/valid/key.bundle.json": (VERIFIES, "2 file(s)"),
    "spec/valid/certificate.bundle.json": (UNSUPPORTED, _CERT),
    "spec/valid/sigstore.bundle.json": (UNSUPPORTED, _CERT),
    "spec/invalid/empty.bundle.json": (REFUSED, "malformed sigstore bundle"),
    "spec/invalid/missing-envelope.bundle.json": (REFUSED, "neither a DSSE envelope"),
    "spec/invalid/missing-tlog-entries.bundle.json": (UNSUPPORTED, _CERT),
    "spec/invalid/missing-verification-material.bundle.json": (REFUSED, "malformed sigstore bundle"),
    "spec/invalid-payload/wrong-predicate.bundle.json": (REFUSED, _DSSE),
    # model-transparency's signatures made by each release of model_signing
    "model-transparency/v0.3.1-elliptic-key": (VERIFIES, "1 file(s)"),
    "model-transparency/v1.0.0-elliptic-key": (VERIFIES, "1 file(s)"),
    "model-transparency/v1.0.1-elliptic-key": (VERIFIES, "2 file(s)"),
    "model-transparency/v1.1.0-elliptic-key": (VERIFIES, "2 file(s)"),
    **{f"model-transparency/{v}-certificate": (UNSUPPORTED, _CA) for v in ("v0.2.0", "v0.3.1", "v1.0.0",
                                                                           "v1.0.1", "v1.1.0")},
    **{f"model-transparency/{v}-sigstore": (UNSUPPORTED, _CERT) for v in ("v0.3.1", "v1.0.0", "v1.0.1", "v1.1.0")},
    # made by the tests: model_signing signs a model of ours, then the case breaks something
    "generated/key-two-files": (VERIFIES, "2 file(s)"),
    "generated/key-multi-file": (VERIFIES, "3 file(s)"),
    "generated/key-single-file-directory": (VERIFIES, "1 file(s)"),
    "generated/key-single-file-model": (VERIFIES, "1 file(s)"),
    "generated/key-ignore-unsigned-files": (VERIFIES, "2 file(s)"),
    "generated/key-extra-file": (REFUSED, "not signed: injected.bin"),
    "generated/key-missing-file": (REFUSED, "missing: signme-2"),
    "generated/key-tampered-content": (REFUSED, "content differs: signme-1"),
    "generated/key-wrong-key": (REFUSED, _DSSE),
    "generated/key-verify-as-certificate": (UNSUPPORTED, _CA),
    "generated/bundle-garbage": (REFUSED, "malformed sigstore bundle"),
    "generated/bundle-truncated": (REFUSED, "malformed sigstore bundle"),
    "generated/bundle-empty": (REFUSED, "malformed sigstore bundle"),
    "generated/bundle-wrong-mediatype": (REFUSED, "not a sigstore bundle v0.3"),
    "generated/bundle-missing-envelope": (REFUSED, "neither a DSSE envelope"),
    "generated/bundle-no-signature": (REFUSED, _DSSE),
    # edited after signing: the signature no longer covers the statement
    **{f"generated/edited-{what}": (REFUSED, _DSSE) for what in (
        "empty-resources", "no-predicate", "no-subject", "wrong-payload-type", "wrong-predicate",
        "wrong-statement-type")},
    # edited and signed again with the same key: the statement's own checks refuse it
    "generated/resigned-empty-resources": (REFUSED, "lists no files"),
    "generated/resigned-no-predicate": (REFUSED, "OMS statement is malformed"),
    "generated/resigned-no-subject": (REFUSED, "exactly one subject"),
    # the signature verifies; the line names what is wrong: the payload type
    "generated/resigned-wrong-payload-type": (REFUSED, "is not an in-toto statement"),
    "generated/resigned-wrong-predicate": (REFUSED, "not an OMS signature"),
    "generated/resigned-wrong-statement-type": (REFUSED, "has type"),
    "generated/certificate-chain": (UNSUPPORTED, _CA),
    "generated/certificate-expired": (UNSUPPORTED, _CA),
    "generated/certificate-wrong-ca": (UNSUPPORTED, _CERT),  # an EC CA certificate: its key is read
    "generated/sigstore-tampered-content": (UNSUPPORTED, _CERT),
    "generated/sigstore-verify-as-key": (UNSUPPORTED, _CERT),
}

#: roundtrips (tests/oms_generated.py's ROUNDTRIPS): ocibridge signs (push, sign --form oms, pull
#: --with-signatures), then both ocibridge and model_signing verify
ROUNDTRIP_CASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("key-single-file", "key-default-ignores"), (VERIFIES, "1 file(s)")),
    **dict.fromkeys(("key-simple", "key-simple-deterministic", "key-p256", "key-p384", "key-p521",
                     "key-binary-content", "key-empty-file", "key-ignore-paths", "key-ignore-unsigned",
                     "key-sig-inside-model", "key-unicode-filename", "key-files-in-hidden-dir-ignored"),
                    (VERIFIES, "2 file(s)")),
    **dict.fromkeys(("key-multi-file", "key-dotfile-included", "key-special-chars-path"), (VERIFIES, "3 file(s)")),
    # push leaves .cache/ out (Hugging Face's download cache): the signature does not list it
    "key-files-in-hidden-dir": (REFUSED, "not signed: .cache/weights.bin"),
    "key-empty-model-rejected": (REFUSED, "no files"),
    "key-empty-directory-rejected": (REFUSED, "no files"),
    **dict.fromkeys(("key-symlink-default-rejected", "key-symlink-outside-root", "key-symlink-cycle"),
                    (REFUSED, "symlink")),
}


def mt_case(version: str, tmp: Path) -> tuple[Path, Path, Path, list[str]]:
    """(model, bundle, key, extra verify-dir flags) of a model-transparency directory, laid out
    as its scripts verify it: the files beside ``model.sig`` (copied to ``tmp``), or ``signme-1``
    alone where it is the only one (a single-file model); ``ignore-me`` left out where present;
    the CA certificate for a certificate signature, the P-384 key otherwise."""
    source = MT / version
    model = tmp / "model"
    shutil.copytree(source, model, ignore=shutil.ignore_patterns("model.sig"))
    if not (model / "signme-2").exists():
        model = model / "signme-1"
    flags = ["--ignore-paths", "ignore-me"] if (source / "ignore-me").exists() else []
    key = MT_KEYS / "ca-cert.pem" if version.endswith("-certificate") else P384_PUB
    return model, source / "model.sig", key, flags
