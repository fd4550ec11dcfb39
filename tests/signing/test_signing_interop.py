"""Signatures made by ocibridge checked by implementations that share nothing with it:
sigstore-js (@sigstore/verify, Node) for the bundle form, the OpenSSL command line for the
classic form's ECDSA signature over the simple-signing payload."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibridge.cli import main
from tests import cosign_spec
from tests.modelgen import make_model
from tests.signing import test_signing as _signing
from tests.signing_keys import key_pair
from tests.support.data import data

pushed = _signing.pushed  # the small artifact in a layout, shared

SIGSTORE_JS = Path(__file__).parents[1] / "interop" / "sigstore-js"
TRUSTED_ROOT = data("signing", "bundle", "public-good.trusted_root.json")


@pytest.fixture(scope="session")
def sigstore_js() -> Path:
    """The verifier script, its pinned packages installed (npm ci) on first use."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "Node.js and npm are needed (apt-get install nodejs npm; scripts/test does it)"
    if not (SIGSTORE_JS / "node_modules" / "@sigstore" / "verify").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SIGSTORE_JS, check=True,
                       timeout=300, capture_output=True)
    return SIGSTORE_JS / "verify_bundle.js"


@pytest.fixture
def signed(pushed, tmp_path):
    """A layout artifact signed in both forms: (layout, digest, public key, bundle bytes)."""
    layout, digest = pushed
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", f"oci:{layout}:v1", "--key", str(private), "-a", "team=ml"]) == 0
    (manifest,) = cosign_spec.referrers(layout, digest)
    bundle = cosign_spec.blob(layout, manifest["layers"][0]["digest"])
    return layout, digest, public, bundle


def _node(script: Path, bundle: Path, key: Path, subject_hex: str) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(script), str(bundle), str(key), str(TRUSTED_ROOT), subject_hex],
                          capture_output=True, text=True, timeout=60)


def test_sigstore_js_verifies_bundles_made_here(sigstore_js, signed, tmp_path):
    layout, digest, public, bundle = signed
    path = tmp_path / "bundle.json"
    path.write_bytes(bundle)
    done = _node(sigstore_js, path, public, digest[7:])
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr
    # the same checker refuses: another key, another subject, one byte of the signature changed
    _, other = key_pair(tmp_path / "o", "other")
    assert "not" in _node(sigstore_js, path, other, digest[7:]).stdout
    assert "does not name" in _node(sigstore_js, path, public, "00" + digest[9:]).stdout
    doc = json.loads(bundle)
    sig = bytearray(base64.b64decode(doc["dsseEnvelope"]["signatures"][0]["sig"]))
    sig[len(sig) // 2] ^= 0x01
    doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    path.write_text(json.dumps(doc))
    failed = _node(sigstore_js, path, public, digest[7:])
    assert failed.returncode == 1 and "SIGNATURE_ERROR" in failed.stdout


def test_openssl_verifies_classic_signatures_made_here(signed, tmp_path):
    layout, digest, public, _ = signed
    manifest = json.loads(cosign_spec.blob(layout, cosign_spec.tagged(layout, f"sha256-{digest[7:]}.sig")["digest"]))
    (layer,) = manifest["layers"]
    payload = tmp_path / "payload.json"
    payload.write_bytes(cosign_spec.blob(layout, layer["digest"]))
    signature = tmp_path / "sig.der"
    signature.write_bytes(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]))

    def openssl() -> subprocess.CompletedProcess:
        return subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(public), "-signature", str(signature),
                               str(payload)], capture_output=True, text=True, timeout=30)

    assert openssl().stdout.strip() == "Verified OK"
    assert json.loads(payload.read_bytes())["critical"]["image"]["docker-manifest-digest"] == digest
    payload.write_bytes(payload.read_bytes().replace(b'"team":"ml"', b'"team":"mL"'))
    assert openssl().returncode != 0


@pytest.mark.parametrize("evidence", ["--sbom", "--provenance"])
def test_sigstore_js_verifies_the_bom_and_provenance_attestations(sigstore_js, tmp_path, capsys, evidence):
    """The AI-BOM and the SLSA provenance, key-signed by push --attest-key, verify with
    sigstore-js against the key, name the pushed manifest as their subject and carry the
    predicate they claim; another key is refused by the same checker."""
    from ocibridge.signing.attest import CYCLONEDX, SLSA_PROVENANCE_V1, find_attestations
    from ocibridge.stores.layout import LayoutStore

    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", evidence, "--attest-key", str(private),
                 "--json", "-q"]) == 0
    digest = json.loads(capsys.readouterr().out)["digest"]
    store = LayoutStore(tmp_path / "store")
    (found,) = find_attestations(store, store.resolve(digest))
    wanted = CYCLONEDX if evidence == "--sbom" else SLSA_PROVENANCE_V1
    assert found.predicate_type == wanted
    path = tmp_path / "attestation.json"
    path.write_bytes(found.bundle)
    done = _node(sigstore_js, path, public, digest[7:])
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr
    payload = json.loads(base64.b64decode(json.loads(found.bundle)["dsseEnvelope"]["payload"]))
    assert payload["predicateType"] == wanted
    _, other = key_pair(tmp_path / "o", "other")
    refused = _node(sigstore_js, path, other, digest[7:])
    assert refused.returncode == 1 and "not" in refused.stdout
