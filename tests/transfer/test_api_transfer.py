"""push, copy and convert from Python with option objects (issue 51): one call builds, writes, signs
and attaches the evidence, into an OCI layout and a registry; the referrers it reports exist and
verify. Push's former keyword arguments still work for one release, with a DeprecationWarning
naming the option field. ``sbom``/``provenance``/``attest`` back the ``attest`` command."""

from __future__ import annotations

import json
import warnings

import pytest

import ocibridge
from ocibridge.api import choices
from ocibridge.cli import main
from ocibridge.errors import UsageError
from ocibridge.oci.models import Manifest
from ocibridge.signing.attest import CYCLONEDX, SLSA_PROVENANCE_V1, find_attestations
from ocibridge.signing.coverage import Trusted
from ocibridge.signing.verify import VerifyPolicy, verify_artifact
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_model
from tests.signing_keys import key_pair


def _signatures(store, digest: str, public, trusts: Trusted = Trusted.MANIFEST) -> set[str]:
    """The signature forms of ``digest`` that verify with ``public`` (and cover what ``trusts``)."""
    policy = VerifyPolicy.from_files([str(public)])
    return {v.form for v in verify_artifact(store, store.resolve(digest), policy, trusts=trusts)}


def _attestations(store, digest: str, public) -> set[str]:
    """The predicate types of the attestations of ``digest`` that verify with ``public``."""
    found = set()
    for predicate_type in (CYCLONEDX, SLSA_PROVENANCE_V1):
        policy = VerifyPolicy.from_files([str(public)], predicate_type=predicate_type)
        if verify_artifact(store, store.resolve(digest), policy, trusts=Trusted.STATEMENT):
            found.add(predicate_type)
    return found


def _push_signed_and_attested(tmp_path, dest: str):
    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new style warns about nothing
        result = ocibridge.push(
            str(model), dest,
            options=ocibridge.PushOptions(name="tiny", overrides={"version": "2.0"}, chunk_threshold=100_000,
                                          build=ocibridge.BuildOptions(annotations={"team": "ml"})),
            sign=ocibridge.SignOptions(key=str(private)),
            attest=ocibridge.AttestOptions(sbom=True, provenance=True, key=str(private)),
        )
    return result, public


def test_push_signs_and_attests_into_a_layout_in_one_call(tmp_path):
    layout = tmp_path / "store"
    result, public = _push_signed_and_attested(tmp_path, f"oci:{layout}:v1")
    digest = result.descriptor.digest
    assert result.reference == f"oci:{layout}:v1@{digest}"
    evidence, signed = result.extra["evidence"], result.extra["signed"]
    assert set(evidence["written"]) == {"sbom", "provenance"} and evidence["signed"] is True
    assert set(signed["written"]) == {"classic", "bundle"}
    assert result.as_dict()["evidence"] == evidence  # what push --json prints
    store = LayoutStore(layout)
    referrers = {r.digest for r in store.referrers(store.resolve(digest))}
    assert {evidence["written"]["sbom"], evidence["written"]["provenance"], signed["written"]["bundle"]} <= referrers
    assert _signatures(store, digest, public) == {"classic", "bundle"}
    assert _attestations(store, digest, public) == {CYCLONEDX, SLSA_PROVENANCE_V1}
    (provenance,) = [a for a in find_attestations(store, store.resolve(digest))
                     if a.predicate_type == SLSA_PROVENANCE_V1]
    assert result.extra["chunks"]["layers"] == 2  # the options reached the build: files from 100 kB
    manifest = json.loads(store.fetch_bytes(store.resolve(digest)))
    assert manifest["annotations"]["team"] == "ml"
    assert ocibridge.inspect(f"oci:{layout}:v1").digest == digest
    assert provenance.bundle


def test_push_signs_and_attests_into_a_registry_in_one_call(tmp_path, registry, unique_repo):
    result, public = _push_signed_and_attested(tmp_path, f"{registry.host}/{unique_repo}:v1")
    digest = result.descriptor.digest
    with open_repository(host=registry.host, repository=unique_repo) as store:
        subject = store.resolve(digest)
        referrers = {r.digest for r in store.referrers(subject)}
        assert set(result.extra["evidence"]["written"].values()) <= referrers
        assert result.extra["signed"]["written"]["bundle"] in referrers
        assert _signatures(store, digest, public) == {"classic", "bundle"}
    assert _attestations(store, digest, public) == {CYCLONEDX, SLSA_PROVENANCE_V1}
    # the model's files, pulled back: the options named it and set its version
    pulled = ocibridge.pull(result.reference, str(tmp_path / "out"))
    assert "model.safetensors" in pulled.files


def test_push_attaches_a_directory_s_oms_signature_and_leaves_it_out_of_the_files(tmp_path):
    import model_signing

    model = make_model(tmp_path / "m")
    private, public = key_pair(tmp_path / "k")
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(
        hashing).sign(model, model / "model.sig")
    layout = tmp_path / "store"
    result = ocibridge.push(str(model), f"oci:{layout}:v1",
                            options=ocibridge.PushOptions(oms_signature=model / "model.sig"))
    store = LayoutStore(layout)
    assert result.extra["signature"] in {r.digest for r in store.referrers(store.resolve(result.descriptor.digest))}
    assert _signatures(store, result.descriptor.digest, public, Trusted.FILES) == {"oms"}
    assert "model.sig" not in ocibridge.pull(f"oci:{layout}:v1", str(tmp_path / "out")).files


def test_a_bad_signature_form_or_key_is_refused_before_anything_is_written(tmp_path):
    model = make_model(tmp_path / "m")
    layout = tmp_path / "store"
    with pytest.raises(UsageError, match="signature form"):
        ocibridge.push(str(model), f"oci:{layout}:v1", sign=ocibridge.SignOptions(key="k", forms=("gpg",)))
    with pytest.raises(ocibridge.OcibridgeError):
        ocibridge.push(str(model), f"oci:{layout}:v1",
                       attest=ocibridge.AttestOptions(sbom=True, key=str(tmp_path / "missing.key")))
    assert not layout.exists()


def test_old_keywords_still_work_with_a_warning_naming_the_field(tmp_path):
    model = make_model(tmp_path / "m")
    with pytest.warns(DeprecationWarning) as caught:
        old = ocibridge.push(str(model), f"oci:{tmp_path / 'old'}:v1", chunks=False, name="tiny")
    # (pytest.warns records every warning: another test's socket collected meanwhile is a ResourceWarning)
    caught = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert sorted(str(w.message) for w in caught) == [
        "push(chunks=...) is deprecated: pass options=PushOptions(chunks=...)",
        "push(name=...) is deprecated: pass options=PushOptions(name=...)"]
    assert {w.filename for w in caught} == {__file__}  # pointing at the caller's line
    with pytest.warns(DeprecationWarning, match=r"PushOptions\(build=\.\.\.\)"):
        ocibridge.push(str(model), f"oci:{tmp_path / 'built'}:v1",
                       build_options=ocibridge.BuildOptions(annotations={"a": "b"}))
    new = ocibridge.push(str(model), f"oci:{tmp_path / 'new'}:v1",
                         options=ocibridge.PushOptions(chunks=False, name="tiny"))
    assert old.descriptor.digest == new.descriptor.digest  # the same artifact either way
    assert "chunks" not in old.extra
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        ocibridge.push(str(model), f"oci:{tmp_path / 'x'}:v1", colour="red")


def test_pull_takes_pull_options_and_its_old_keywords_with_a_warning(tmp_path):
    """pull(options=PullOptions(...)) as push has (issue 60); the keywords work one release more."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path / 'store'}:v1"
    ocibridge.push(str(model), ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new style warns about nothing
        new = ocibridge.pull(ref, str(tmp_path / "new"), options=ocibridge.PullOptions(include=("*.json",)))
    with pytest.warns(DeprecationWarning) as caught:
        old = ocibridge.pull(ref, str(tmp_path / "old"), include=["*.json"], on_existing="keep")
    assert sorted(str(w.message) for w in caught) == [
        "pull(include=...) is deprecated: pass options=PullOptions(include=...)",
        "pull(on_existing=...) is deprecated: pass options=PullOptions(on_existing=...)"]
    assert {w.filename for w in caught} == {__file__}  # pointing at the caller's line
    picked = sorted(p.name for p in (tmp_path / "new").rglob("*") if p.is_file())
    assert picked and all(name.endswith(".json") for name in picked)
    assert sorted(p.name for p in (tmp_path / "old").rglob("*") if p.is_file()) == picked
    assert old.digest == new.digest
    with pytest.raises(TypeError, match="pull\\(\\) got an unexpected keyword argument 'colour'"):
        ocibridge.pull(ref, str(tmp_path / "x"), colour="red")


def test_copy_and_convert_attach_evidence_in_the_same_call(tmp_path):
    model = make_model(tmp_path / "m")
    layout = tmp_path / "store"
    pushed = ocibridge.push(str(model), f"oci:{layout}:v1")
    copied = ocibridge.copy_reference(f"oci:{layout}:v1", f"oci:{tmp_path / 'copy'}:v1",
                                      attest=ocibridge.AttestOptions(provenance=True))
    assert copied.descriptor.digest == pushed.descriptor.digest
    assert set(copied.extra["evidence"]["written"]) == {"provenance"}
    store = LayoutStore(tmp_path / "copy")
    written = copied.extra["evidence"]["written"]["provenance"]
    assert {r.digest for r in store.referrers(store.resolve("v1"))} == {written}
    kit = ocibridge.convert(f"oci:{layout}:v1", f"oci:{tmp_path / 'kit'}:v1", "modelkit", overrides={"version": "3"},
                            attest=ocibridge.AttestOptions(provenance=True, parameters={"to": "modelkit"}))
    assert kit.conversion.target_family == "modelkit" and kit.as_dict()["evidence"] == kit.evidence
    kit_store = LayoutStore(tmp_path / "kit")
    (referrer,) = kit_store.referrers(kit_store.resolve(kit.reference.rsplit("@", 1)[1]))
    manifest = Manifest.model_validate_json(kit_store.fetch_bytes(referrer))
    doc = json.loads(kit_store.fetch_bytes(manifest.layers[0]))  # unsigned: the statement itself
    assert doc["predicate"]["buildDefinition"]["externalParameters"]["flags"] == {"to": "modelkit"}


def test_sbom_provenance_and_attest_from_python(tmp_path):
    model = make_model(tmp_path / "m")
    layout = tmp_path / "store"
    ref = f"oci:{layout}:v1"
    digest = ocibridge.push(str(model), ref).descriptor.digest
    bom = ocibridge.sbom(ref)
    assert bom.digest == digest and bom.as_dict()["bomFormat"] == "CycloneDX"
    made = ocibridge.provenance(ref, source=str(model))
    names = {d.get("name") for d in made.document["buildDefinition"]["resolvedDependencies"]}
    assert "model.safetensors" in names
    private, public = key_pair(tmp_path / "k")
    done = ocibridge.attest(ref, sbom=True, provenance=made.document, key=str(private))
    assert done.as_dict() == {"digest": digest, "written": dict(done.written), "unchanged": [], "signed": True}
    again = ocibridge.attest(ref, sbom=True, provenance=made.document, key=str(private))
    assert set(again.unchanged) == {"sbom", "provenance"}  # the same documents: nothing new
    assert _attestations(LayoutStore(layout), digest, public) == {CYCLONEDX, SLSA_PROVENANCE_V1}
    with pytest.raises(UsageError, match="attest needs"):
        ocibridge.attest(ref)


def test_the_command_prints_the_api_result(tmp_path, capsys):
    """``attest --json`` is AttestResult.as_dict(); the renamed flags and their former names."""
    model = make_model(tmp_path / "m")
    ref = f"oci:{tmp_path / 'store'}:v1"
    private, _ = key_pair(tmp_path / "k")
    assert main(["push", str(model), ref, "-q", "--model-version", "4.0", "--upload-part-size", "1M"]) == 0
    assert main(["push", str(model), f"oci:{tmp_path / 'old'}:v1", "-q", "--version", "4.0",
                 "--chunk-size", "1048576"]) == 0
    capsys.readouterr()
    assert LayoutStore(tmp_path / "store").resolve("v1").digest == LayoutStore(tmp_path / "old").resolve("v1").digest
    assert main(["attest", ref, "--sbom", "--key", str(private), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == ocibridge.attest(ref, sbom=True, key=str(private)).as_dict() | {"unchanged": []}
    with pytest.raises(SystemExit):
        main(["push", "--help"])
    shown = capsys.readouterr().out
    assert "--model-version" in shown and "--upload-part-size" in shown and "--chunk-size" not in shown


def test_choices_come_from_the_api():
    assert "modelkit" in choices.families() and "cnai" in choices.media_type_families()
    assert "weight" in choices.layer_kinds() and "tar+zstd" in choices.layer_variants()
    assert "directory" in choices.source_formats() and "version" in choices.metadata_fields()


def test_transfer_options_hand_every_registry_field_on():
    """registry_options() carries each field but concurrency by name (no hand-written copy to forget one)."""
    import dataclasses

    values = {"plain_http": True, "insecure": True, "ca_file": "/ca.pem", "username": "u", "password": "p",
              "chunk_size": 5, "authfile": "/auth.json", "part_size": 7, "parts_in_flight": 3, "limit_rate": 9}
    assert sorted(f.name for f in dataclasses.fields(ocibridge.TransferOptions)) == sorted([*values, "concurrency"])
    given = ocibridge.TransferOptions(concurrency=2, **values).registry_options()
    assert {name: getattr(given, name) for name in values} == values
