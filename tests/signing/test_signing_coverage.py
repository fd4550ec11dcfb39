"""What a signature covers (issue 41, class 1): every decision that trusts something accepts
only a signature whose signed payload covers it (ocibridge/signing/coverage.py).

The attack: an OMS signature (file names and digests, nothing of the manifest) re-attached to a
copy of the manifest that differs only in ``io.ocibridge.chunks.digest``, binding a forged chunk
table. ``cat --verify-key`` must never print the forged bytes, ``verify --key`` and ``copy
--verify-key`` must refuse that manifest; ``pull --verify-key`` may still take the files, which
the OMS signature does cover (each checked by its layer digest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.faultproxy import corrupt, corrupt_at
from support.fixtures import new_repo

import ocibridge
from ocibridge.api import lazy_ops
from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, MIN_CHUNK_SIZE
from ocibridge.cli import main
from ocibridge.errors import OcibridgeError, SignatureError
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.signing.attach import attach_bundle, find_signatures
from ocibridge.signing.classic import signature_tag
from ocibridge.signing.coverage import COVERS, Form, Trusted, covers, require_cover
from ocibridge.signing.oms import OMS_PREDICATE_TYPE
from ocibridge.signing.verify import VerifyPolicy, is_oms, verify_artifact
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from tests.forged_tables import push_chunked, push_lookalike
from tests.modelgen import make_model
from tests.signing_keys import key_pair

CHUNK = MIN_CHUNK_SIZE
SIZE = 5 * CHUNK + 123


def _one_line(capsys, code: int) -> str:
    captured = capsys.readouterr()
    assert code != 0, captured
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocibridge: error: "), captured.err
    return lines[0]


# -- the table, cell by cell ------------------------------------------------------------------
def _expected(form: Form, trusted: Trusted) -> bool:
    if form is Form.OMS:
        return trusted is Trusted.FILES
    if form is Form.ATTESTATION:  # its subject only: what its predicate says, never a signature
        return trusted is Trusted.STATEMENT
    return trusted is not Trusted.STATEMENT  # a signature of the manifest is no attestation


EXPECTED = {(form, trusted): _expected(form, trusted) for form in Form for trusted in Trusted}


@pytest.mark.parametrize(("form", "trusted"), sorted(EXPECTED, key=str), ids=lambda v: str(v.value))
def test_every_cell_of_the_coverage_table(form, trusted):
    assert covers(form, trusted) is EXPECTED[form, trusted]
    assert covers(form.value, trusted) is EXPECTED[form, trusted]
    assert (trusted in COVERS[form]) is EXPECTED[form, trusted]


def test_an_unknown_form_covers_nothing_and_require_cover_says_why():
    assert not any(covers("keyless-v9", t) for t in Trusted)

    class V:
        def __init__(self, form: str) -> None:
            self.form, self.where = form, "sha256:" + "a" * 64

    with pytest.raises(SignatureError, match="no signature covers the chunk table.*OMS signature signs"):
        require_cover([V("oms")], Trusted.CHUNK_TABLE, "m")
    assert [v.form for v in require_cover([V("oms"), V("classic")], Trusted.CHUNK_TABLE, "m")] == ["classic"]


# -- each form, each object, on a real signed manifest and on a look-alike copy ----------------
def _lookalike(store: LayoutStore, subject: Descriptor, key: str, value: str) -> Descriptor:
    """The manifest ``subject`` with one annotation changed: same files, another digest."""
    doc = json.loads(store.fetch_bytes(subject))
    doc.setdefault("annotations", {})[key] = value
    data = json.dumps(doc).encode()
    desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    store.push_manifest(desc, data, "lookalike")
    return desc


def _reattach(store: LayoutStore, original: Descriptor, copy: Descriptor) -> None:
    """Every signature of ``original`` re-attached to ``copy``, as an attacker would."""
    found = find_signatures(store, original)
    for _, data in found.bundles:
        attach_bundle(store, copy, data, OMS_PREDICATE_TYPE if is_oms(data) else
                      "https://sigstore.dev/cosign/sign/v1")
    sig = store.resolve(signature_tag(original.digest)) if found.classic else None
    if sig is not None:
        store.tag(sig, signature_tag(copy.digest))


@pytest.mark.parametrize("form", [f.value for f in Form if f is not Form.ATTESTATION])  # sign's forms
@pytest.mark.parametrize("annotation", [ANNOTATION_DIGEST, "org.opencontainers.image.title", "x.anything"])
def test_a_signature_counts_only_for_what_it_covers(tmp_path, capsys, form, annotation):
    model = make_model(tmp_path / "m", seed=len(annotation))
    ref = f"oci:{tmp_path}/store:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", form]) == 0
    store = LayoutStore(str(tmp_path / "store"))
    subject = store.resolve("v1")
    forged = _lookalike(store, subject, annotation, "sha256:" + hashlib.sha256(annotation.encode()).hexdigest())
    _reattach(store, subject, forged)
    capsys.readouterr()
    line = _one_line(capsys, main(["verify", f"oci:{tmp_path}/store:lookalike", "--key", str(public)]))
    assert "refused" in line
    before = _snapshot(tmp_path / "copy")
    _one_line(capsys, main(["copy", f"oci:{tmp_path}/store:lookalike", f"oci:{tmp_path}/copy:v1",
                            "--verify-key", str(public), "-q"]))
    assert _snapshot(tmp_path / "copy") == before
    out = tmp_path / "out"
    code = main(["pull", f"oci:{tmp_path}/store:lookalike", str(out), "--verify-key", str(public), "-q"])
    if form == "oms":  # the files are what the OMS signature signs, each checked by its layer digest
        assert code == 0
        assert sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) == \
            sorted(p.relative_to(model) for p in model.rglob("*") if p.is_file())
    else:
        _one_line(capsys, code)
        assert not out.exists()
    policy = VerifyPolicy.from_files([str(public)])
    for trusted in Trusted:  # the signed manifest itself: every cell of the form's row
        if covers(form, trusted):
            assert verify_artifact(store, subject, policy, trusts=trusted)
        else:
            with pytest.raises(SignatureError, match=f"does not cover the {trusted.value}"):
                verify_artifact(store, subject, policy, trusts=trusted)
    for trusted in Trusted:  # the look-alike: only the files an OMS signature lists still match
        if form == "oms" and trusted is Trusted.FILES:
            assert verify_artifact(store, forged, policy, trusts=trusted)
        else:
            with pytest.raises(SignatureError):
                verify_artifact(store, forged, policy, trusts=trusted)


def _snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the attack on a registry: a forged bound table under an OMS signature ---------------------
@pytest.fixture(scope="module")
def oms_chunked(registry, tmp_path_factory):
    """A model whose manifest binds a table, OMS-signed: (repo, data, layer, public key, bundle)."""
    tmp = tmp_path_factory.mktemp("cover")
    repo = new_repo()
    data = push_chunked(registry, tmp / "model", repo, SIZE, CHUNK)
    private, public = key_pair(tmp / "k")
    assert main(["sign", f"{registry.host}/{repo}:v1", "--key", str(private), "--form", "oms"]) == 0
    with lazy_ops.open_model(f"{registry.host}/{repo}:v1", warn=None, cache=False) as model:
        layer = model.file("weights.bin").layer
        assert model.chain.table is not None  # the manifest binds a table
    return repo, data, layer, public


def _forge(registry, repo: str, layer: Descriptor, data: bytes, chunk: int, offset: int,
           algorithm: str = hashes.SHA256) -> tuple[str, bytes]:
    """Tag ``evil``: the signed manifest with its table binding replaced by a table (of the hash
    ``algorithm``) under which byte ``offset`` of chunk ``chunk``, flipped, verifies; the OMS
    signature re-attached."""
    def resign(store, subject, evil):  # the OMS signature, attached to the look-alike
        (oms,) = [b for _, b in find_signatures(store, subject).bundles]
        attach_bundle(store, evil, oms, OMS_PREDICATE_TYPE)

    with open_repository(host=registry.host, repository=repo) as store:
        evil, forged = push_lookalike(store, layer.digest, data, chunk * CHUNK + offset, CHUNK, algorithm, resign)
    return evil.digest, forged


@pytest.mark.parametrize(("chunk", "offset"), [(0, 5), (2, 0), (4, 4000), (5, 100)])
def test_a_forged_bound_table_under_an_oms_signature_never_yields_forged_bytes(
        oms_chunked, registry, fault_proxy, capsysbinary, tmp_path, monkeypatch, chunk, offset):
    repo, data, layer, public = oms_chunked
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    _, forged = _forge(registry, repo, layer, data, chunk, offset)
    start = chunk * CHUNK
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt(offset=offset), times=None)
    ref = f"{fault_proxy.host}/{repo}:evil"
    capsysbinary.readouterr()
    code = main(["cat", ref, "weights.bin", "--range", f"{start}-{start + 16}", "--verify-key", str(public)])
    captured = capsysbinary.readouterr()
    assert forged[start:start + 16] not in captured.out  # the attack: forged bytes, exit 0
    assert code != 0 and captured.out == b""
    err = captured.err.decode()
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    with pytest.raises(OcibridgeError):
        lazy_ops.cat(ref, "weights.bin", start, start + 16, verify=ocibridge.verification([public]), warn=None)
    # without the fault, the same read serves the real bytes, read whole and checked by the layer digest
    fault_proxy.clear()
    notes: list[str] = []
    assert lazy_ops.cat(ref, "weights.bin", start, start + 16, verify=ocibridge.verification([public]),
                        warn=notes.append) == data[start:start + 16]
    code = main(["verify", f"{registry.host}/{repo}:evil", "--key", str(public)])
    err = capsysbinary.readouterr().err.decode()
    assert code != 0 and err.count("\n") == 1 and "does not cover the manifest" in err, err


def test_a_pull_under_an_oms_signature_checks_the_files_by_digest_never_by_a_forged_table(
        oms_chunked, registry, fault_proxy, capsys, tmp_path, monkeypatch):
    """A pull into a directory checks a layer by the BLAKE3 table its manifest binds (issue 91),
    but not a pull a signature of the files vouched for: the OMS statement lists the layer's
    SHA-256, and a table from a look-alike manifest never speaks for it."""
    repo, data, layer, public = oms_chunked
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    at = 2 * CHUNK + 7
    _forge(registry, repo, layer, data, 2, 7, algorithm=hashes.BLAKE3)
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(at), times=None)  # the forged bytes, sent
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["pull", f"{fault_proxy.host}/{repo}:evil", str(out), "-q", "--verify-key", str(public)])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and layer.digest in err, err
    assert not (out / "weights.bin").exists()
    fault_proxy.clear()  # the real bytes: pulled, checked by their digest
    assert main(["pull", f"{fault_proxy.host}/{repo}:evil", str(out), "-q", "--verify-key", str(public)]) == 0
    assert (out / "weights.bin").read_bytes() == data
