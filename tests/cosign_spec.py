"""An independent reading of the cosign formats, for tests: written from the specifications
(cosign's SIGNATURE_SPEC, DSSE's protocol, the OCI layout and image specs), sharing no code
with ocibridge.signing. Reads an OCI image layout directory with json and hashlib only and
checks signatures with ``cryptography`` directly."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def blob(layout: Path, digest: str) -> bytes:
    algorithm, hexpart = digest.split(":", 1)
    data = (layout / "blobs" / algorithm / hexpart).read_bytes()
    assert hashlib.sha256(data).hexdigest() == hexpart
    return data


def tagged(layout: Path, tag: str) -> dict:
    index = json.loads((layout / "index.json").read_text())
    for entry in index["manifests"]:
        if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return entry
    raise KeyError(tag)


class Registry:
    """The same reads from a distribution registry over plain HTTP, with httpx only (the
    referrers listing from the OCI 1.1 fallback tag ``sha256-<hex>``)."""

    ACCEPT = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json"

    def __init__(self, host: str, repository: str):
        self.base = f"http://{host}/v2/{repository}"

    def get(self, kind: str, ref: str) -> bytes:
        import httpx

        response = httpx.get(f"{self.base}/{kind}/{ref}", headers={"Accept": self.ACCEPT})
        response.raise_for_status()
        if ref.startswith("sha256:"):
            assert hashlib.sha256(response.content).hexdigest() == ref[7:]
        return response.content

    def check_classic(self, digest: str, pem: bytes) -> list[dict]:
        manifest = json.loads(self.get("manifests", digest.replace(":", "-") + ".sig"))
        return _classic_layers(manifest, lambda d: self.get("blobs", d), digest, pem)

    def check_bundle(self, digest: str, pem: bytes) -> list[dict]:
        index = json.loads(self.get("manifests", digest.replace(":", "-")))
        manifests = [json.loads(self.get("manifests", m["digest"])) for m in index["manifests"]]
        return _bundles(manifests, lambda d: self.get("blobs", d), digest, pem)


def public_key(pem: bytes) -> ec.EllipticCurvePublicKey:
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    return key


def check_classic(layout: Path, digest: str, pem: bytes) -> list[dict]:
    """The layers of ``sha256-<hex>.sig`` whose signature over the payload bytes verifies with
    the key; each payload must name ``digest``. Returns their payloads; raises if there is none."""
    entry = tagged(layout, digest.replace(":", "-") + ".sig")
    manifest = json.loads(blob(layout, entry["digest"]))
    return _classic_layers(manifest, lambda d: blob(layout, d), digest, pem)


def _classic_layers(manifest: dict, read, digest: str, pem: bytes) -> list[dict]:
    key = public_key(pem)
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    payloads = []
    for layer in manifest["layers"]:
        assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
        payload = read(layer["digest"])
        signature = base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"])
        try:
            key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        doc = json.loads(payload)
        assert doc["critical"]["type"] == "cosign container image signature"
        assert doc["critical"]["image"]["docker-manifest-digest"] == digest
        payloads.append(doc)
    if not payloads:
        raise InvalidSignature(f"no signature of {digest} verifies with the key")
    return payloads


def referrers(layout: Path, digest: str) -> list[dict]:
    index = json.loads((layout / "index.json").read_text())
    found = []
    for entry in index["manifests"]:
        manifest = json.loads(blob(layout, entry["digest"]))
        if manifest.get("subject", {}).get("digest") == digest:
            found.append(manifest)
    return found


def check_bundle(layout: Path, digest: str, pem: bytes) -> list[dict]:
    """Every sigstore bundle referrer of ``digest``: DSSE over PAE verifies with the key and the
    in-toto statement's subject is ``digest``. Returns the statements."""
    return _bundles(referrers(layout, digest), lambda d: blob(layout, d), digest, pem)


def _bundles(manifests: list[dict], read, digest: str, pem: bytes) -> list[dict]:
    key = public_key(pem)
    statements = []
    for manifest in manifests:
        if manifest.get("artifactType") != "application/vnd.dev.sigstore.bundle.v0.3+json":
            continue
        assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
        (layer,) = manifest["layers"]
        assert layer["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
        bundle = json.loads(read(layer["digest"]))
        assert bundle["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
        envelope = bundle["dsseEnvelope"]
        payload = base64.b64decode(envelope["payload"])
        kind = envelope["payloadType"].encode()
        pae = b"DSSEv1 " + str(len(kind)).encode() + b" " + kind + b" " + str(len(payload)).encode() + b" " + payload
        (sig,) = envelope["signatures"]
        key.verify(base64.b64decode(sig["sig"]), pae, ec.ECDSA(hashes.SHA256()))
        statement = json.loads(payload)
        assert statement["_type"] == "https://in-toto.io/Statement/v1"
        assert statement["predicateType"] == "https://sigstore.dev/cosign/sign/v1"
        assert [s["digest"]["sha256"] for s in statement["subject"]] == [digest.split(":")[1]]
        statements.append(statement)
    return statements
