"""The containers policy file, read and judged as containers/image judges it: its own fixtures
and test expectations (tests/data/containers-policy/PROVENANCE.md), real cosign signatures, and
ocibridge's own signatures under ``sigstoreSigned``. skopeo parity and the commands that use a
model are in tests/k8s/test_containers_policy_commands.py."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
from pathlib import Path

import pytest

from ocibridge.errors import SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.scanning.policy import require_clean_scan
from ocibridge.signing.classic import signature_manifest, signature_tag
from ocibridge.signing.containers_policy import DockerName, IdentityRule, PolicyFileError, docker_scope, oci_scope
from ocibridge.signing.policy_eval import evaluate
from ocibridge.signing.policy_file import load_policy, parse_policy
from ocibridge.signing.policy_place import find_policy_file
from ocibridge.stores.layout import LayoutStore
from tests.support.data import data

FIXTURES = data("containers-policy")
TABLES = json.loads((FIXTURES / "reference-match-tables.json").read_text())
DOCKER_V2 = "application/vnd.docker.distribution.manifest.v2+json"
COSIGN_PUB, COSIGN2_PUB, REKOR_PUB = (str(FIXTURES / n) for n in ("cosign.pub", "cosign2.pub", "rekor.pub"))


def _policy(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    return path


def _name(text: str) -> DockerName | None:
    try:
        return DockerName.parse(text)
    except Exception:  # noqa: BLE001 - containers/image skips rows whose image reference is invalid
        return None


# -- where the file is ------------------------------------------------------------------------
def test_the_file_is_found_in_skopeos_order(tmp_path, monkeypatch):
    from ocibridge.signing import policy_place

    system = tmp_path / "etc-policy.json"
    monkeypatch.setattr(policy_place, "SYSTEM_POLICY", system)
    monkeypatch.delenv("OCIBRIDGE_POLICY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert find_policy_file() is None  # nothing anywhere: no policy, everything accepted as before
    system.write_text('{"default": [{"type": "reject"}]}')
    assert find_policy_file() == system
    user = tmp_path / "home" / ".config" / "containers" / "policy.json"
    user.parent.mkdir(parents=True)
    user.write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    assert find_policy_file() == user
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(tmp_path / "env.json"))
    assert find_policy_file() == tmp_path / "env.json"
    assert find_policy_file(str(tmp_path / "flag.json")) == tmp_path / "flag.json"
    with pytest.raises(PolicyFileError, match="env.json"):  # named but missing: an error, not "no policy"
        load_policy()


@pytest.mark.parametrize("doc, error", [
    ({}, 'has no "default"'),
    ({"default": []}, "non-empty list"),
    ({"default": [{"type": "acceptEverything"}]}, "unknown policy requirement type"),
    ({"default": [{"type": "reject", "keyPath": "x"}]}, "unknown field 'keyPath'"),
    ({"default": [{"type": "reject"}], "transport": {}}, "unknown field 'transport'"),
    ({"default": [{"type": "sigstoreSigned"}]}, "exactly one of keyPath"),
    ({"default": [{"type": "sigstoreSigned", "keyPath": "a", "keyData": "YQ=="}]}, "exactly one of keyPath"),
    ({"default": [{"type": "sigstoreSigned", "fulcio": {"caPath": "x"}}]}, "fulcio needs a Rekor public key"),
    ({"default": [{"type": "sigstoreSigned", "keyPath": "a", "signedIdentity": {"type": "matchAll"}}]},
     "unknown type 'matchAll'"),
    ({"default": [{"type": "sigstoreSigned", "keyPath": "a",
                   "signedIdentity": {"type": "exactReference", "dockerReference": "busybox"}}]},
     "neither a tag nor a digest"),
])
def test_a_malformed_policy_is_one_line_naming_the_file(tmp_path, doc, error):
    with pytest.raises(PolicyFileError, match=error) as e:
        parse_policy(json.dumps(doc).encode(), tmp_path / "p.json")
    assert str(e.value).startswith(f"policy file {tmp_path / 'p.json'}: ") and "\n" not in str(e.value)


def test_containers_image_fixture_policy_decides_as_it_does():
    policy = parse_policy((FIXTURES / "policy.json").read_bytes(), FIXTURES / "policy.json")

    def section(ref: str) -> str:
        return policy.decide(docker_scope(DockerName.parse(ref))).section

    assert section("example.com/playground/x:v1") == 'docker "example.com/playground"'
    assert policy.decide(docker_scope(DockerName.parse("example.com/playground:v1"))).accepts_anything
    assert section("registry.access.redhat.com/rhel7/rhel:7") == 'docker "registry.access.redhat.com"'
    assert section("foo.access.redhat.com/x:1") == 'docker "*.access.redhat.com"'
    assert section("foo.redhat.com/x:1") == 'docker "*.redhat.com"'
    assert section("other.com/x:1") == 'docker "*.com"'
    assert section("example.com/sigstore/key-path-example:v1") == 'docker "example.com/sigstore/key-path-example"'
    assert section("quay.io/x:1") == "default"
    assert section("bogus/key-data-example:1") == "default"  # docker.io/bogus/...: scopes are not normalised
    decision = policy.decide(docker_scope(DockerName.parse("example.com/production/x:1")))
    with pytest.raises(SignatureError, match=r"signedBy \(GPG\) signatures, which ocibridge does not verify") as e:
        decision.refuse_early("example.com/production/x:1")
    assert "\n" not in str(e.value)
    with pytest.raises(SignatureError, match="rejects it"):
        policy.decide(docker_scope(DockerName.parse("quay.io/x:1"))).refuse_early("quay.io/x:1")
    assert policy.decide(oci_scope("/tmp/x")).section == "default"  # no oci transport in the file


def test_most_specific_scope_wins():
    """containers/image signature/policy_eval_test.go TestPolicyContextRequirementsForImageRef."""
    scopes = ["", "unmatched", "deep.com", "*.very.deep.com", "*.deep.com", "deep.com/n1", "deep.com/n1/n2",
              "deep.com/n1/n2/n3", "deep.com/n1/n2/n3/repo", "deep.com/n1/n2/n3/repo:tag2"]
    doc = {"default": [{"type": "reject"}],
           "transports": {"docker": {s: [{"type": "insecureAcceptAnything"}] for s in scopes},
                          "atomic": {"unmatched": [{"type": "insecureAcceptAnything"}]}}}
    policy = parse_policy(json.dumps(doc).encode(), Path("p.json"))
    for ref, matched in [
        ("deep.com/n1/n2/n3/repo:tag2", "deep.com/n1/n2/n3/repo:tag2"),
        ("deep.com/n1/n2/n3/repo:nottag2", "deep.com/n1/n2/n3/repo"),
        ("deep.com/n1/n2/n3/notrepo:tag2", "deep.com/n1/n2/n3"),
        ("deep.com/n1/n2/notn3/repo:tag2", "deep.com/n1/n2"),
        ("deep.com/n1/notn2/n3/repo:tag2", "deep.com/n1"),
        ("deep.com/notn1/n2/n3/repo:tag2", "deep.com"),
        ("very.deep.com/n1/n2/n3/repo:tag2", "*.deep.com"),
        ("not.very.deep.com/n1/n2/n3/repo:tag2", "*.very.deep.com"),
        ("this.does-not/match:anything", ""),
    ]:
        assert policy.decide(docker_scope(DockerName.parse(ref))).section == f'docker "{matched}"', ref
    # a port is dropped before the wildcards, as containers/image drops it
    assert policy.decide(docker_scope(DockerName.parse("x.deep.com:5000/r:1"))).section == 'docker "*.deep.com"'


def test_oci_layouts_are_looked_up_by_directory(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    doc = {"default": [{"type": "reject"}],
           "transports": {"oci": {str(tmp_path / "a"): [{"type": "insecureAcceptAnything"}]}}}
    policy = parse_policy(json.dumps(doc).encode(), Path("p.json"))
    assert policy.decide(oci_scope(str(tmp_path / "a" / "b"))).accepts_anything
    assert not policy.decide(oci_scope(str(tmp_path / "c"))).accepts_anything


# -- signedIdentity, row for row --------------------------------------------------------------
def _symmetric(rule_of, rows, *, only=None):
    for a, b, expected in rows:
        if only is not None and expected is not only:
            continue
        for image, signed in ((a, b), (b, a)):
            parsed = _name(image)
            if parsed is None:
                continue
            assert rule_of(image).matches(parsed, signed) is expected, (image, signed)


def test_signed_identity_match_exact():
    _symmetric(lambda _: IdentityRule("matchExact"), TABLES["exact"])
    assert not IdentityRule("matchExact").matches(None, "busybox:latest")  # a layout has no Docker identity


def test_signed_identity_match_repository():
    _symmetric(lambda _: IdentityRule("matchRepository"), TABLES["repository"])


def test_signed_identity_match_repo_digest_or_exact():
    rule = IdentityRule("matchRepoDigestOrExact")
    _symmetric(lambda _: rule, TABLES["exact"], only=True)
    _symmetric(lambda _: rule, TABLES["repository"], only=False)
    for image, signed, expected in TABLES["repoDigestOrExact"]:
        assert rule.matches(DockerName.parse(image), signed) is expected, (image, signed)


def test_signed_identity_exact_reference_and_repository():
    for a, b, expected in TABLES["exact"]:
        for wanted, signed in ((a, b), (b, a)):
            assert IdentityRule("exactReference", docker_reference=wanted).matches(None, signed) is expected
    for a, b, expected in TABLES["repository"]:
        for wanted, signed in ((a, b), (b, a)):
            assert IdentityRule("exactRepository", docker_repository=wanted).matches(None, signed) is expected


def test_signed_identity_remap_prefix():
    for ref, prefix, expected in TABLES["remapPrefix"]:
        rule = IdentityRule("remapIdentity", prefix=prefix, signed_prefix="docker.io/library/signed-prefix")
        assert rule.prefix_matches(DockerName.parse(ref)) is expected, (ref, prefix)
    rule = IdentityRule("remapIdentity", prefix="private-mirror:5000/vendor-mirror", signed_prefix="vendor.example.com")
    image = DockerName.parse("private-mirror:5000/vendor-mirror/ns/app:v1")
    assert rule.matches(image, "vendor.example.com/ns/app:v1")
    assert not rule.matches(image, "private-mirror:5000/vendor-mirror/ns/app:v1")


# -- sigstoreSigned on containers/image's own signatures ---------------------------------------
def _read_signature(path: Path) -> tuple[str, bytes, dict[str, str]]:
    raw = path.read_bytes()
    head = b"\x00sigstore-json\n"
    assert raw.startswith(head)
    doc = json.loads(raw[len(head):])
    return doc["mimeType"], base64.b64decode(doc["payload"]), doc["annotations"]


def _layout_of(fixture: str, tmp_path: Path) -> tuple[LayoutStore, Descriptor]:
    """The fixture image (a containers/image ``dir:``) as cosign leaves it in a registry: the
    manifest and a ``sha256-<hex>.sig`` manifest with one layer per signature."""
    folder = FIXTURES / fixture
    store = LayoutStore(tmp_path / fixture, create=True)
    body = (folder / "manifest.json").read_bytes()
    subject = Descriptor.for_bytes(DOCKER_V2, body)
    store.push_manifest(subject, body, "image")
    layers = []
    for sig in sorted(folder.glob("signature-*")):
        mime, payload, annotations = _read_signature(sig)
        desc = dataclasses.replace(Descriptor.for_bytes(mime, payload), annotations=annotations)
        store.push_blob(desc, io.BytesIO(payload))
        layers.append(desc)
    if layers:
        config_desc, config, desc, manifest = signature_manifest(layers)
        store.push_blob(config_desc, io.BytesIO(config))
        store.push_manifest(desc, manifest, signature_tag(subject.digest))
    return store, subject


def _judge(tmp_path, fixture: str, image: str, requirement: dict) -> None:
    store, subject = _layout_of(fixture, tmp_path)
    doc = {"default": [{"type": "reject"}], "transports": {"docker": {"": [requirement]}}}
    decision = parse_policy(json.dumps(doc).encode(), tmp_path / "p.json").decide(docker_scope(DockerName.parse(image)))
    evaluate(decision, store, subject, image, clean_scan=require_clean_scan)


def _key(path=COSIGN_PUB, identity="matchRepository", **more) -> dict:
    req = {"type": "sigstoreSigned", "keyPath": path, **more}
    if identity:
        req["signedIdentity"] = {"type": identity}
    return req


SINGLE = "192.168.64.2:5000/cosign-signed-single-sample"
CASES = [  # (fixture, image, requirement, accepted): TestPRSigstoreSignedIsRunningImageAllowed
    ("dir-img-cosign-valid", SINGLE, _key(), True),
    ("dir-img-unsigned", "testing/manifest:latest", _key(), False),
    ("dir-img-cosign-other-attachment", "testing/manifest:latest", _key(), False),
    ("dir-img-cosign-valid", "testing/manifest:notlatest", _key(), False),
    ("dir-img-cosign-valid-2", SINGLE, _key(), True),
    ("dir-img-cosign-mixed", SINGLE, _key(), True),
    ("dir-img-cosign-valid-2", "this/does-not:match", _key(), False),
    ("dir-img-cosign-valid-with-tag", "192.168.64.2:5000/skopeo-signed:tag", _key(identity="matchExact"), True),
    ("dir-img-cosign-valid-with-tag", "192.168.64.2:5000/skopeo-signed:othertag", _key(identity="matchExact"), False),
    ("dir-img-cosign-valid", SINGLE, _key(identity="matchExact"), False),  # cosign signs the repository only
    # beyond that test, with the same fixtures
    ("dir-img-cosign-valid", SINGLE, _key(identity=None), False),  # default matchRepoDigestOrExact: the same
    ("dir-img-cosign-valid", f"{SINGLE}:v1", _key(COSIGN2_PUB), False),  # another key
    ("dir-img-cosign-valid", f"{SINGLE}:v1", {"type": "sigstoreSigned", "keyPaths": [COSIGN2_PUB, COSIGN_PUB],
                                              "signedIdentity": {"type": "matchRepository"}}, True),
    ("dir-img-cosign-valid", f"{SINGLE}:v1", {"type": "sigstoreSigned", "signedIdentity": {"type": "matchRepository"},
                                              "keyData": base64.b64encode(Path(COSIGN_PUB).read_bytes()).decode()},
     True),
    ("dir-img-cosign-valid", f"{SINGLE}:v1", {"type": "sigstoreSigned", "signedIdentity": {"type": "matchRepository"},
                                              "keyDatas": [base64.b64encode(Path(COSIGN2_PUB).read_bytes()).decode()]},
     False),
    ("dir-img-cosign-valid", "other.example/x:v1",
     _key(identity=None, signedIdentity={"type": "exactRepository", "dockerRepository": SINGLE}), True),
    ("dir-img-cosign-valid", "other.example/x:v1",
     _key(identity=None, signedIdentity={"type": "exactRepository", "dockerRepository": "other.example/x"}), False),
    ("dir-img-cosign-valid-with-tag", "mirror.example/skopeo-signed:tag",
     _key(identity=None, signedIdentity={"type": "remapIdentity", "prefix": "mirror.example",
                                         "signedPrefix": "192.168.64.2:5000"}), True),
    ("dir-img-cosign-valid", "mirror.example/cosign-signed-single-sample@sha256:" + "0" * 64,  # repository only
     _key(identity=None, signedIdentity={"type": "remapIdentity", "prefix": "mirror.example",
                                         "signedPrefix": "192.168.64.2:5000"}), False),
    ("dir-img-cosign-modified-manifest", SINGLE, _key(), False),  # names the original manifest's digest
    # key + Rekor SET (TestPRrSigstoreSignedIsSignatureAccepted, "Successful key+Rekor use" and its refusals)
    ("dir-img-cosign-key-rekor-valid", "192.168.64.2:5000/cosign-signed/key-1",
     _key(COSIGN2_PUB, rekorPublicKeyPath=REKOR_PUB), True),
    ("dir-img-cosign-key-rekor-valid", "192.168.64.2:5000/cosign-signed/key-1",
     _key(identity="matchRepository", keyPaths=[COSIGN_PUB, COSIGN2_PUB], rekorPublicKeyPaths=[COSIGN_PUB, REKOR_PUB])
     | {"keyPath": None}, True),
    ("dir-img-cosign-key-rekor-valid", "192.168.64.2:5000/cosign-signed/key-1",
     _key(COSIGN2_PUB, rekorPublicKeyPath=COSIGN_PUB), False),  # not rekor.pub: a key mismatch
    ("dir-img-cosign-valid", SINGLE, _key(rekorPublicKeyPath=REKOR_PUB), False),  # no SET annotation
]


@pytest.mark.parametrize("fixture, image, requirement, accepted", CASES)
def test_sigstore_signed_as_containers_image(tmp_path, fixture, image, requirement, accepted):
    requirement = {k: v for k, v in requirement.items() if v is not None}
    if accepted:
        _judge(tmp_path, fixture, image, requirement)
    else:
        with pytest.raises(SignatureError) as e:
            _judge(tmp_path, fixture, image, requirement)
        assert str(e.value).startswith(f"{image}: refused by the policy ") and "\n" not in str(e.value)


def test_a_tampered_rekor_set_is_refused(tmp_path):
    store, subject = _layout_of("dir-img-cosign-key-rekor-valid", tmp_path)
    sig_desc = store.resolve(signature_tag(subject.digest))
    manifest = json.loads(store.fetch_bytes(sig_desc))
    layer = manifest["layers"][0]
    bundle = json.loads(layer["annotations"]["dev.sigstore.cosign/bundle"])
    bundle["Payload"]["logIndex"] += 1
    layer["annotations"]["dev.sigstore.cosign/bundle"] = json.dumps(bundle)
    body = json.dumps(manifest).encode()
    store.push_manifest(Descriptor.for_bytes(sig_desc.mediaType, body), body, signature_tag(subject.digest))
    doc = {"default": [_key(COSIGN2_PUB, rekorPublicKeyPath=REKOR_PUB)]}
    decision = parse_policy(json.dumps(doc).encode(), tmp_path / "p.json").decide(
        docker_scope(DockerName.parse("192.168.64.2:5000/cosign-signed/key-1")))
    with pytest.raises(SignatureError, match="no Rekor SET"):
        evaluate(decision, store, subject, "x", clean_scan=require_clean_scan)


def test_fulcio_requirements_are_refused_with_one_line(tmp_path):
    store, subject = _layout_of("dir-img-cosign-valid", tmp_path)
    doc = {"default": [{"type": "sigstoreSigned", "fulcio": {"caPath": "ca.pem", "oidcIssuer": "https://x",
                                                             "subjectEmail": "a@b"}, "rekorPublicKeyPath": REKOR_PUB}]}
    policy = parse_policy(json.dumps(doc).encode(), tmp_path / "p.json")
    decision = policy.decide(docker_scope(DockerName.parse(SINGLE)))
    with pytest.raises(SignatureError, match="fulcio and pki .* are not verified by ocibridge"):
        evaluate(decision, store, subject, SINGLE, clean_scan=require_clean_scan)
