"""Signatures on real registries (docker-registry 2.8: no referrers API, so bundles go through
the OCI 1.1 fallback tag), checked by an independent reading of the formats (tests/cosign_spec.py
over plain HTTP). Copies and mirrors carry every signature; the policy on use refuses unsigned
artifacts before writing; the referrers API read path through the fault proxy."""

from __future__ import annotations

import json
import subprocess

import pytest
from cryptography.exceptions import InvalidSignature
from support.faultproxy import FaultProxy, status
from support.mirror_jobs import mirror_job

from ocibridge.cli import main
from ocibridge.mirror import load_job, run_job
from ocibridge.oci.mediatypes import OCI_INDEX
from ocibridge.oci.models import Index
from ocibridge.places.locate import open_target as open_store_target
from tests import cosign_spec
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def _push(tmp_path, capsys, ref: str) -> str:
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), ref, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)["digest"]


def test_skopeo_here_cannot_check_sigstore_signatures(tmp_path, capsys, registry, unique_repo):
    """Debian's skopeo 1.9 is built without sigstore support: a ``sigstoreSigned`` policy
    rejects every image, signed or not. Kept as a test so the day it changes is noticed (then
    skopeo becomes the second independent verifier of the .sig form)."""
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = _push(tmp_path, capsys, ref)
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private)]) == 0
    policy = {"default": [{"type": "reject"}], "transports": {"docker": {f"{registry.host}/{unique_repo}": [
        {"type": "sigstoreSigned", "keyPath": str(public), "signedIdentity": {"type": "matchRepoDigestOrExact"}}]}}}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    regd = tmp_path / "registries.d"
    regd.mkdir()
    (regd / "local.yaml").write_text(f"docker:\n  {registry.host}:\n    use-sigstore-attachments: true\n")
    done = subprocess.run(
        ["skopeo", "copy", "--policy", str(tmp_path / "policy.json"), "--registries.d", str(regd),
         "--src-tls-verify=false", f"docker://{ref.split(':v1')[0]}@{digest}", f"dir:{tmp_path / 'out'}"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "sigstore disabled" in done.stderr


def test_signatures_on_a_registry_verify_by_the_spec(tmp_path, capsys, registry, unique_repo):
    """Read back over HTTP by tests/cosign_spec.py (httpx + cryptography, no ocibridge code)."""
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = _push(tmp_path, capsys, ref)
    private, public = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o", "other")
    assert main(["sign", ref, "--key", str(private), "-a", "team=ml"]) == 0
    reader = cosign_spec.Registry(registry.host, unique_repo)
    (payload,) = reader.check_classic(digest, public.read_bytes())
    assert payload["optional"] == {"team": "ml"}
    assert payload["critical"]["identity"]["docker-reference"] == f"{registry.host}/{unique_repo}"
    (statement,) = reader.check_bundle(digest, public.read_bytes())
    assert statement["subject"][0]["annotations"] == {"team": "ml"}
    with pytest.raises(InvalidSignature):
        reader.check_classic(digest, other.read_bytes())


def test_bundle_goes_through_the_fallback_tag_and_verifies(tmp_path, capsys, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = _push(tmp_path, capsys, ref)
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)["written"]
    assert main(["tags", f"{registry.host}/{unique_repo}", "--json", "--all"]) == 0
    tags = json.loads(capsys.readouterr().out)
    assert f"sha256-{digest[7:]}" in tags and f"sha256-{digest[7:]}.sig" in tags
    assert f"ocibridge-ref-{written['bundle'][7:]}" in tags  # the bundle's own tag: kept by the registry's GC
    target = open_store_target(f"{registry.host}/{unique_repo}:sha256-{digest[7:]}")
    index = target.store.fetch_bytes(target.store.resolve(target.reference))
    assert written["bundle"] in index.decode()
    assert main(["verify", ref, "--key", str(public), "--json"]) == 0
    assert {s["form"] for s in json.loads(capsys.readouterr().out)["signatures"]} == {"classic", "bundle"}


def test_referrers_api_read_path(tmp_path, capsys, registry, unique_repo):
    """A registry with the referrers API: the bundle is found through it (the fallback tag is
    made to answer 404 by the proxy, so only the API can have found it)."""
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = _push(tmp_path, capsys, ref)
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private), "--form", "bundle"]) == 0
    capsys.readouterr()
    fallback = open_store_target(f"{registry.host}/{unique_repo}:sha256-{digest[7:]}")
    listing = fallback.store.fetch_bytes(fallback.store.resolve(fallback.reference))
    assert isinstance(Index.model_validate_json(listing), Index)
    with FaultProxy(registry) as proxy:
        proxy.add("GET", rf"/referrers/{digest}", status(200, body=listing, headers={"Content-Type": OCI_INDEX}),
                  times=10)
        proxy.add(None, rf"/manifests/sha256-{digest[7:]}$", status(404), times=10)
        assert main(["verify", f"{proxy.host}/{unique_repo}:v1", "--key", str(public), "--json"]) == 0
        assert [s["form"] for s in json.loads(capsys.readouterr().out)["signatures"]] == ["bundle"]
        assert proxy.requests_matching("GET", "/referrers/")
        assert not [r for r in proxy.requests_matching(None, f"/manifests/sha256-{digest[7:]}") if r.status == 200]


def test_copy_r_between_registries_keeps_signatures(tmp_path, capsys, registry, registry2,
                                                                    unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    digest = _push(tmp_path, capsys, ref)
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", ref, "--key", str(private)]) == 0
    dst = f"{registry2.host}/{unique_repo}:v1"
    capsys.readouterr()
    assert main(["copy", "-r", ref, dst, "--json", "--verify-key", str(public)]) == 0
    copied = json.loads(capsys.readouterr().out)
    assert len(copied["signatures"]) == 2
    assert main(["verify", dst, "--key", str(public), "--json"]) == 0
    assert {s["form"] for s in json.loads(capsys.readouterr().out)["signatures"]} == {"classic", "bundle"}
    reader = cosign_spec.Registry(registry2.host, unique_repo)
    assert reader.check_classic(digest, public.read_bytes()) and reader.check_bundle(digest, public.read_bytes())


def test_pull_refuses_unsigned_from_registry(tmp_path, capsys, registry, unique_repo):
    ref = f"{registry.host}/{unique_repo}:v1"
    _push(tmp_path, capsys, ref)
    _, public = key_pair(tmp_path / "k")
    out = tmp_path / "out"
    assert main(["pull", ref, str(out), "--verify-key", str(public)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{ref}: refused:" in err and "is not signed" in err
    assert not out.exists()


def test_mirror_verifies_carries_and_counts_signatures(tmp_path, capsys, registry, registry2, unique_repo):
    signed_ref = f"{registry.host}/{unique_repo}:signed"
    _push(tmp_path, capsys, signed_ref)
    unsigned_model = make_model(tmp_path / "u", seed=1)
    assert main(["push", str(unsigned_model), f"{registry.host}/{unique_repo}:unsigned", "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    assert main(["sign", signed_ref, "--key", str(private)]) == 0
    capsys.readouterr()
    job = mirror_job(tmp_path / "job.toml", {"source": f"{registry.host}/{unique_repo}",
                                             "target": f"{registry2.host}/{unique_repo}",
                                             "verify": {"keys": ["k/cosign.pub"]}},
                     plain_http=[registry.host, registry2.host])
    summary = run_job(load_job(job))
    by_tag = {a.source.rsplit(":", 1)[1]: a for a in summary.artifacts}
    assert set(by_tag) == {"signed", "unsigned"}  # the .sig and fallback tags are not artifacts
    assert by_tag["signed"].status == "copied" and by_tag["signed"].signatures == 2
    assert by_tag["unsigned"].status == "failed" and "refused" in by_tag["unsigned"].reason
    assert summary.totals()["signatures"] == 2 and "2 signature(s) carried" in summary.format_text()
    assert main(["tags", f"{registry2.host}/{unique_repo}", "--json"]) == 0
    tags = json.loads(capsys.readouterr().out)
    assert "unsigned" not in tags and "signed" in tags
    assert main(["verify", f"{registry2.host}/{unique_repo}:signed", "--key", str(public)]) == 0
    # signed again later (another key): a re-run carries the new signature to the mirrored artifact
    other, other_pub = key_pair(tmp_path / "k2", "second")
    assert main(["sign", signed_ref, "--key", str(other), "--form", "classic"]) == 0
    again = run_job(load_job(job))
    signed_again = next(a for a in again.artifacts if a.source.endswith(":signed"))
    assert signed_again.status == "copied" and signed_again.signatures >= 1
    capsys.readouterr()
    assert main(["verify", f"{registry2.host}/{unique_repo}:signed", "--key", str(other_pub)]) == 0
