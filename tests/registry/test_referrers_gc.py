"""Issue 76: what ocibridge attaches survives the registry's own garbage collection, and a
referrer the registry lost is skipped, not an error.

Debian's distribution 2.8 has no referrers API: a referrer is listed only by the ``sha256-<hex>``
fallback index, and an index protects nothing it lists (distribution#3004), so
``garbage-collect --delete-untagged`` used to delete every bundle, OMS signature, attestation
and chunk table. Each referrer the registry store writes now has a tag of its own,
``ocibridge-ref-<hex>`` (oci/bookkeeping.py). The registry here is this test's own: the
collection stops it and starts it again on the same storage and port.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from support import registry as registry_support
from support.registry import RegistryProcess, garbage_collect

from ocibridge.cli import main
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """One command in this process: (exit code, stdout, stderr); ``capsys`` is pytest's
    ``capsysbinary`` (``cat`` writes a file's bytes), stdout decoded byte for byte."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.decode("latin-1"), err.decode()


def ok(capsys, *argv: str) -> tuple[str, str]:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    return out, err


CHUNKS = "application/vnd.ocibridge.chunks.v1+json"
INDEX, MANIFEST = "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json"
GONE = "no longer in the registry"


def referrer_digests(capsys, ref: str) -> set[str]:
    out, _ = ok(capsys, "discover", ref, "--json")
    return {r["digest"] for r in json.loads(out)["referrers"]}


def collect_garbage(registry: RegistryProcess) -> RegistryProcess:
    """Stop the registry, ``garbage-collect --delete-untagged`` its storage, start it again on
    the same storage and port (the references, and the signatures' identities, stay as they were)."""
    port = registry.port
    garbage_collect(registry)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry_support, "free_port", lambda: port)
        return RegistryProcess(registry.workdir)


def policy_file(path: Path, public: Path) -> Path:
    path.write_text(json.dumps({"default": [{"type": "reject"}], "transports": {"docker": {"": [
        {"type": "sigstoreSigned", "keyPath": str(public), "signedIdentity": {"type": "matchRepository"}}]}}}))
    return path


def test_everything_attached_survives_garbage_collection(tmp_path, capsysbinary):
    """A model pushed with a chunk table, an AI-BOM and provenance, signed by a cosign key
    (classic and bundle) and with OMS by a P-256 and a P-384 key: after the registry's
    ``garbage-collect --delete-untagged``, ``verify --key``, ``pull --verify-key`` (cosign's key
    and each OMS key), a pull under a sigstoreSigned policy, the attestations, a lazy read with
    the table and ``discover`` are all as before."""
    from cryptography.hazmat.primitives.asymmetric import ec

    registry = RegistryProcess(tmp_path / "registry")
    try:
        model = make_model(tmp_path / "m")
        ref = f"{registry.host}/acme/kept:v1"
        cosign_key, cosign_pub = key_pair(tmp_path / "keys")
        p256_key, p256_pub = key_pair(tmp_path / "keys", "p256")
        p384_key, p384_pub = key_pair(tmp_path / "keys", "p384", curve=ec.SECP384R1())
        out, _ = ok(capsysbinary, "push", str(model), ref, "-q", "--json", "--chunk-threshold", "100K",
                    "--sbom", "--provenance", "--attest-key", str(cosign_key))
        pushed = json.loads(out)
        assert pushed["chunks"]["layers"] >= 1 and sorted(pushed["evidence"]["written"]) == ["provenance", "sbom"]
        ok(capsysbinary, "sign", ref, "--key", str(cosign_key))  # classic and bundle
        ok(capsysbinary, "sign", ref, "--key", str(p256_key), "--form", "oms")
        ok(capsysbinary, "sign", ref, "--key", str(p384_key), "--form", "oms")
        before = referrer_digests(capsysbinary, ref)
        assert len(before) == 6  # the chunk table, the AI-BOM, the provenance, the bundle, two OMS
        out, _ = ok(capsysbinary, "tags", ref, "--all", "--json")
        assert {f"ocibridge-ref-{d[7:]}" for d in before} <= set(json.loads(out))
        assert json.loads(ok(capsysbinary, "tags", ref, "--json")[0]) == ["v1"]  # ours and cosign's hidden

        registry = collect_garbage(registry)

        assert referrer_digests(capsysbinary, ref) == before
        out, err = ok(capsysbinary, "verify", ref, "--key", str(cosign_pub), "--json")
        assert {s["form"] for s in json.loads(out)["signatures"]} == {"classic", "bundle"}
        assert GONE not in err
        for kind in ("cyclonedx", "slsaprovenance1"):
            ok(capsysbinary, "verify", ref, "--key", str(cosign_pub), "--attestation-type", kind)
        for number, public in enumerate((cosign_pub, p256_pub, p384_pub)):
            ok(capsysbinary, "pull", ref, str(tmp_path / f"out{number}"), "-q", "--verify-key", str(public))
            assert (tmp_path / f"out{number}" / "model.safetensors").read_bytes() == \
                (model / "model.safetensors").read_bytes()
        policy = policy_file(tmp_path / "policy.json", cosign_pub)
        ok(capsysbinary, "pull", ref, str(tmp_path / "by-policy"), "-q", "--policy", str(policy))
        out, err = ok(capsysbinary, "cat", ref, "model.safetensors", "--range", "1000-1016")
        assert out.encode("latin-1") == (model / "model.safetensors").read_bytes()[1000:1016]
        assert "whole blob" not in err and "chunk table" not in err, err  # read by its table, as before
    finally:
        registry.stop()


def test_a_referrer_written_before_referrers_had_a_tag_gets_it_when_written_again(tmp_path, capsysbinary,
                                                                                   monkeypatch):
    """A chunk table and a bundle written as ocibridge wrote them before (by digest, listed only by
    the fallback index): pushing and signing again (the same bytes: "already there") tag each
    of them, and the garbage collection then keeps them."""
    from ocibridge.stores.registry import store as registry_store

    registry = RegistryProcess(tmp_path / "registry")
    try:
        model = make_model(tmp_path / "m")
        ref = f"{registry.host}/acme/old:v1"
        private, public = key_pair(tmp_path / "k")
        push = ("push", str(model), ref, "-q", "--chunk-threshold", "100K")
        with monkeypatch.context() as before_tags:  # the write of the release before: by digest
            before_tags.setattr(registry_store, "referrer_tag", lambda digest: digest)
            ok(capsysbinary, *push)
            ok(capsysbinary, "sign", ref, "--key", str(private))
        listed = referrer_digests(capsysbinary, ref)
        assert len(listed) == 2
        out, _ = ok(capsysbinary, "tags", ref, "--all", "--json")
        assert not [t for t in json.loads(out) if t.startswith("ocibridge-ref-")]

        ok(capsysbinary, *push)
        ok(capsysbinary, "sign", ref, "--key", str(private))
        out, _ = ok(capsysbinary, "tags", ref, "--all", "--json")
        assert {f"ocibridge-ref-{d[7:]}" for d in listed} <= set(json.loads(out))

        registry = collect_garbage(registry)
        assert referrer_digests(capsysbinary, ref) == listed
        out, _ = ok(capsysbinary, "verify", ref, "--key", str(public), "--json")
        assert {s["form"] for s in json.loads(out)["signatures"]} == {"classic", "bundle"}
    finally:
        registry.stop()


def test_tags_and_serves_refs_hide_ocibridges_and_cosigns_tags(tmp_path, capsysbinary, registry, unique_repo):
    """A signed model's repository holds cosign's ``sha256-<hex>`` (the fallback index) and
    ``.sig`` and the bundle's ``ocibridge-ref-<hex>``: ``tags`` and serve's ``refs`` list the
    model's tags only; ``tags --all`` lists every one."""
    from serving import serving

    repo = f"{registry.host}/{unique_repo}/acme/m"
    ok(capsysbinary, "push", str(make_model(tmp_path / "m")), f"{repo}:latest", "-q")
    ok(capsysbinary, "tag", f"{repo}:latest", "v1")
    private, _ = key_pair(tmp_path / "k")
    ok(capsysbinary, "sign", f"{repo}:v1", "--key", str(private))
    assert json.loads(ok(capsysbinary, "tags", repo, "--json")[0]) == ["latest", "v1"]
    every = json.loads(ok(capsysbinary, "tags", repo, "--json", "--all")[0])
    assert len(every) == 5 and {t.split("-")[0] for t in every} == {"latest", "v1", "sha256", "ocibridge"}
    with serving([f"{registry.host}/{unique_repo}"]) as served:
        refs = httpx.get(f"{served.url}/api/models/acme/m/refs").json()
    assert [b["name"] for b in refs["branches"]] == ["main"] and [t["name"] for t in refs["tags"]] == ["v1"]


def test_a_referrer_the_registry_lost_is_skipped_with_a_notice(tmp_path, capsysbinary, caplog, registry,
                                                             unique_repo):
    """The bundle's manifest deleted by hand (the fallback index still lists it): ``verify``,
    ``pull --verify-key``, a policy-checked pull, a lazy read checked by a key, serve checking
    by a key and ``discover`` skip it, saying so once, and the classic signature that remains
    verifies."""
    from serving import serving

    from ocibridge.signing.verify import VerifyPolicy

    ref = f"{registry.host}/{unique_repo}/acme/m:v1"
    repository = f"{registry.url}/v2/{unique_repo}/acme/m/manifests"
    out, _ = ok(capsysbinary, "push", str(make_model(tmp_path / "m")), ref, "-q", "--json", "--chunk-threshold", "100K")
    digest = json.loads(out)["digest"]
    private, public = key_pair(tmp_path / "k")
    bundle = json.loads(ok(capsysbinary, "sign", ref, "--key", str(private), "--json")[0])["written"]["bundle"]
    assert httpx.delete(f"{repository}/{bundle}").status_code == 202
    index = httpx.get(f"{repository}/sha256-{digest[7:]}", headers={"Accept": INDEX})
    assert bundle in {m["digest"] for m in index.json()["manifests"]}  # still listed: dangling

    out, err = ok(capsysbinary, "verify", ref, "--key", str(public), "--json")
    assert [s["form"] for s in json.loads(out)["signatures"]] == ["classic"]
    notices = [line for line in err.splitlines() if GONE in line]
    assert len(notices) == 1 and bundle in notices[0] and "skipped" in notices[0], err
    _, err = ok(capsysbinary, "pull", ref, str(tmp_path / "out"), "-q", "--verify-key", str(public))
    assert bundle in err and GONE in err
    policy = policy_file(tmp_path / "policy.json", public)
    ok(capsysbinary, "pull", ref, str(tmp_path / "by-policy"), "-q", "--policy", str(policy))
    ok(capsysbinary, "cat", ref, "README.md", "--verify-key", str(public))
    with caplog.at_level(logging.INFO, logger="ocibridge"), \
            serving([f"{registry.host}/{unique_repo}"], verify=VerifyPolicy.from_files([str(public)])) as served:
        readme = httpx.get(f"{served.url}/acme/m/resolve/v1/README.md")
    assert readme.status_code == 200 and readme.text == "# test model\n"
    # the notice is serve's log line: a log record, or serve's stderr where an earlier serve of this
    # process set its logging up (uvicorn's configuration, which stops records reaching caplog)
    said = [r.getMessage() for r in caplog.records] + capsysbinary.readouterr().err.decode().splitlines()
    assert [line for line in said if bundle in line and GONE in line], said[-20:]
    out, err = ok(capsysbinary, "discover", ref, "--json")
    found = [r["artifactType"] for r in json.loads(out)["referrers"]]
    assert found == [CHUNKS] and bundle in err  # the chunk table remains

    # with the classic signature gone too, only the dangling bundle is listed: unsigned, one line
    classic = httpx.head(f"{repository}/sha256-{digest[7:]}.sig", headers={"Accept": MANIFEST})
    assert httpx.delete(f"{repository}/{classic.headers['docker-content-digest']}").status_code == 202
    code, _, err = run(capsysbinary, "verify", ref, "--key", str(public))
    assert code == 1 and "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line], err


def test_a_model_published_through_serve_with_evidence_survives_garbage_collection(tmp_path, capsysbinary,
                                                                                   monkeypatch):
    """``serve --sign-key --sbom --provenance`` publishes a commit signed and attested; after the
    registry's ``garbage-collect --delete-untagged`` it verifies with its key, its attestations are
    discovered as before, and a serve with ``--verify-key`` serves its files."""
    from support.publishing import evidence_serve, model_dir, serve_process

    registry = RegistryProcess(tmp_path / "registry")
    try:
        prefix = f"{registry.host}/models"
        ref = f"{prefix}/acme/signed:latest"
        with evidence_serve(tmp_path, monkeypatch, prefix, "acme/signed", password="gc-key-password") as (api, key):
            api.upload_folder(repo_id="acme/signed", folder_path=model_dir(tmp_path / "model"))
        before = referrer_digests(capsysbinary, ref)
        assert len(before) >= 3  # the signature bundle, the AI-BOM and the provenance (and the table)
        registry = collect_garbage(registry)
        assert referrer_digests(capsysbinary, ref) == before
        ok(capsysbinary, "verify", ref, "--key", str(key.public_key))
        ok(capsysbinary, "verify", ref, "--key", str(key.public_key), "--attestation-type", "slsaprovenance1")
        with serve_process(tmp_path, prefix, "--verify-key", str(key.public_key)) as url:
            got = httpx.get(f"{url}/acme/signed/resolve/main/config.json",
                            headers={"Authorization": "Bearer reader-token"})
            assert got.status_code == 200, got.text
            assert got.content == (tmp_path / "model" / "config.json").read_bytes()
    finally:
        registry.stop()
