"""`delete --force` removes every referrer of the manifest (issue 42): the sigstore bundle, the
OMS signature, the chunk table, attestations, a file attached, and their own signatures; on
Debian's docker-registry (no referrers API) found through the `sha256-<hex>` fallback index,
which goes too. Counted in the registry's storage: no manifest revision of the repository is
left. `--dry-run` lists the same; a layout alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.oci.models import Descriptor
from ocibridge.places.locate import open_target
from ocibridge.signing import keys
from ocibridge.signing.attach import attach_bundle
from ocibridge.signing.sigstorebundle import make_bundle
from tests.modelgen import make_model
from tests.signing.test_signing_attestations import _statement
from tests.signing_keys import key_pair

PROVENANCE = "https://slsa.dev/provenance/v1"


def cli_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def revisions(storage: Path, repo: str) -> set[str]:
    """The manifests the registry stores for ``repo`` (its revision links)."""
    root = storage / "docker/registry/v2/repositories" / repo / "_manifests/revisions/sha256"
    return {f"sha256:{link.parent.name}" for link in root.glob("*/link")}


def blob(storage: Path, digest: str) -> bytes:
    hexpart = digest.split(":")[1]
    return (storage / "docker/registry/v2/blobs/sha256" / hexpart[:2] / hexpart / "data").read_bytes()


def everything_attached(ref: str, tmp_path: Path, capsys, *, chunks: bool) -> tuple[str, set[str]]:
    """A model signed in every form, with an attestation, a file and a chunk table attached,
    and the bundle signature itself signed: (digest, the referrers' digests)."""
    assert main(["push", str(make_model(tmp_path / "m")), f"{ref}:v1", "-q"]) == 0
    capsys.readouterr()
    private, _ = key_pair(tmp_path / "k")
    digest = cli_json(capsys, "sign", f"{ref}:v1", "--key", str(private), "--form", "all")["digest"]
    target = open_target(f"{ref}:v1")
    subject = target.store.resolve(digest)
    attach_bundle(target.store, subject, make_bundle(keys.load_private_key(private), _statement(digest, PROVENANCE)))
    note = tmp_path / "card.md"
    note.write_text("# a model card\n")
    cli_json(capsys, "attach", f"{ref}:v1", str(note), "--artifact-type", "text/markdown")
    if chunks:
        cli_json(capsys, "chunks", f"{ref}:v1")
    found = {r.digest: r for r in target.store.referrers(subject)}
    bundle = next(d for d in found.values() if d.artifactType and "sigstore.bundle" in d.artifactType)
    cli_json(capsys, "sign", f"{ref}@{bundle.digest}", "--key", str(private), "--form", "bundle")
    below = {r.digest for r in target.store.referrers(bundle)}
    assert len(found) >= (5 if chunks else 4) and below, (found, below)
    return digest, set(found) | below


def test_delete_force_takes_every_referrer_from_a_registry_without_the_api(tmp_path, capsys, registry, unique_repo):
    storage = getattr(registry, "storage", None)
    assert storage is not None, "this test counts the storage of the suite's own docker-registry"
    ref = f"{registry.host}/{unique_repo}"
    digest, referrers = everything_attached(ref, tmp_path, capsys, chunks=True)
    before = revisions(storage, unique_repo)
    assert {digest, *referrers} <= before
    tags = cli_json(capsys, "tags", ref, "--all")
    fallback = f"sha256-{digest.split(':')[1]}"
    assert fallback in tags and f"{fallback}.sig" in tags  # no referrers API: the fallback index
    assert {f"ocibridge-ref-{r.split(':')[1]}" for r in referrers} <= set(tags)  # each referrer's own tag
    assert cli_json(capsys, "tags", ref) == ["v1"]  # ours and cosign's hidden

    assert main(["delete", f"{ref}:v1"]) == 1  # refused without --force, naming what goes
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "referrer(s)" in err and "--force" in err

    dry = cli_json(capsys, "delete", f"{ref}:v1", "--dry-run")
    assert dry["dryRun"] is True and set(dry["referrers"]) >= referrers
    assert revisions(storage, unique_repo) == before  # nothing deleted

    done = cli_json(capsys, "delete", f"{ref}:v1", "--force")
    assert set(done["referrers"]) == set(dry["referrers"])  # the dry run listed what went
    left = revisions(storage, unique_repo)
    assert not left & {digest, *referrers, *done["referrers"]}  # no model, referrer, .sig or fallback index
    for stale in left:  # only the fallback index as it was before each referrer was added: untagged, listing
        data = json.loads(blob(storage, stale))  # nothing that is still there
        assert data["mediaType"] == "application/vnd.oci.image.index.v1+json"
        assert {m["digest"] for m in data["manifests"]} <= referrers
    store = open_target(f"{ref}:x").store
    for gone in (digest, *referrers):
        assert not store.exists(Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json",
                                           digest=gone, size=1)), gone
        assert main(["resolve", f"{ref}@{gone}"]) == 1  # 404
        assert "not found" in capsys.readouterr().err
    main(["tags", ref, "--json", "--all"])
    assert json.loads(capsys.readouterr().out) == []  # no tag left either, the referrers' own gone with them


def test_delete_force_takes_every_referrer_from_a_layout(tmp_path, capsys):
    ref = f"oci:{tmp_path}/layout"
    digest, referrers = everything_attached(ref, tmp_path, capsys, chunks=False)
    dry = cli_json(capsys, "delete", f"{ref}:v1", "--dry-run")
    assert set(dry["referrers"]) >= referrers
    assert main(["delete", f"{ref}:v1", "--force"]) == 0
    out = capsys.readouterr().out
    assert all(f"  manifest {d}" in out for d in referrers)
    index = json.loads((tmp_path / "layout" / "index.json").read_text())
    assert index["manifests"] == []


@pytest.mark.parametrize("where", ["registry", "layout"])
def test_a_model_with_only_untagged_referrers_is_not_deleted_without_force(where, tmp_path, capsys, request):
    if where == "registry":
        ref = f"{request.getfixturevalue('registry').host}/{request.getfixturevalue('unique_repo')}"
    else:
        ref = f"oci:{tmp_path}/layout"
    assert main(["push", str(make_model(tmp_path / "m")), f"{ref}:v1", "-q"]) == 0
    note = tmp_path / "card.md"
    note.write_text("# card\n")
    capsys.readouterr()
    cli_json(capsys, "attach", f"{ref}:v1", str(note), "--artifact-type", "text/markdown")
    assert main(["delete", f"{ref}:v1"]) == 1 and "1 referrer(s)" in capsys.readouterr().err
    assert main(["resolve", f"{ref}:v1"]) == 0
