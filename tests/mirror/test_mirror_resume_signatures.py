"""A mirror re-run brings what the source gained, or the target lost, below a mirrored tag: a
signature made after the first run (``ocibridge sign``'s forms: the cosign ``.sig`` companion tag
and the bundle referrer) on an index's child or on a referrer (an SBOM's own signature); and a
target that holds more signatures than the source is left alone, with no write.

Two real ``docker-registry`` processes, a fault proxy in front of the target counting requests;
the helpers are test_mirror_resume_referrers'.
"""

from __future__ import annotations

import uuid

import pytest
from support.faultproxy import FaultProxy, status

from ocibridge.mirror import load_job, run_job
from ocibridge.model.builder import build
from ocibridge.oci.mediatypes import OCI_INDEX
from ocibridge.oci.models import Descriptor, Index
from ocibridge.signing import keys
from ocibridge.signing.classic import signature_tag
from ocibridge.signing.sign import SignOptions, sign_artifact
from ocibridge.transfer.copy import copy
from tests.mirror.test_mirror_resume_referrers import WRITES, _attach, _job, _open, _state, model


@pytest.fixture
def proxy(registry2):
    """A fault proxy in front of the target registry, counting the test's requests."""
    front = FaultProxy(registry2)
    yield front
    front.stop()


@pytest.fixture
def fresh_source(registry) -> dict:
    """A source of this test's own (it is signed after the first run): ``1.0``, a model with an
    SBOM referrer; ``idx``, an index over another model."""
    repo = f"resume/{uuid.uuid4().hex[:8]}/signed"
    store = _open(registry.host, repo)
    try:
        root = copy(build(model(3)), "artifact", store, "1.0").root
        sbom = _attach(store, root, b'{"spdxVersion": "SPDX-2.3", "name": "model 3"}')
        child = copy(build(model(4)), "artifact", store, None).root
        index = Index(mediaType=OCI_INDEX, manifests=[child.model_copy(update={"annotations": None})])
        data = index.to_json_bytes()
        store.push_manifest(Descriptor.for_bytes(OCI_INDEX, data), data, "idx")
    finally:
        store.close()
    return {"host": registry.host, "repo": repo, "root": root, "sbom": sbom, "child": child}


def _sign(host: str, repo: str, digest: str, forms: tuple = ("classic", "bundle")) -> dict[str, str]:
    """``ocibridge sign``'s forms made for the manifest ``digest`` of ``host/repo`` (a new key)."""
    store = _open(host, repo)
    try:
        subject = store.resolve(digest)
        done = sign_artifact(store, subject, keys.generate_private_key(), SignOptions(identity=repo, forms=forms))
    finally:
        store.close()
    return done.written


def _resolved(host: str, repo: str, tag: str) -> str | None:
    store = _open(host, repo)
    try:
        return store.resolve(tag).digest
    except Exception:  # noqa: BLE001 - absent
        return None
    finally:
        store.close()


def test_rerun_brings_a_signature_made_after_the_first_run_to_an_index_child(
        fresh_source, registry2, tmp_path, proxy) -> None:
    """The child of an index is signed (cosign's ``.sig`` tag) after the index was mirrored."""
    src, target = fresh_source, f"resume/{uuid.uuid4().hex[:8]}/idx"
    assert run_job(_job(tmp_path, src, f"{registry2.host}/{target}", "idx")).ok
    sig_tag = signature_tag(src["child"].digest)
    _sign(src["host"], src["repo"], src["child"].digest, ("classic",))

    again = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "idx"))
    assert again.ok, again.format_text()
    [result] = again.artifacts
    assert result.status == "copied" and result.note.startswith("completed:"), result
    assert "1 referrer(s)" in result.note and result.signatures >= 1
    assert result.blobs_copied <= 2  # the signature's payload and config, not the model again
    assert _resolved(registry2.host, target, sig_tag) == _resolved(src["host"], src["repo"], sig_tag)

    proxy.clear()  # and now complete: skipped, nothing written
    last = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "idx"))
    assert [(a.status, a.reason) for a in last.artifacts] == [("skipped", "already mirrored")]
    assert [r for r in proxy.requests if r.method in WRITES] == []


def test_rerun_brings_the_signature_of_a_referrer(fresh_source, registry2, tmp_path, proxy) -> None:
    """The model's SBOM is signed (both forms of ``ocibridge sign``) after the model and its SBOM
    were mirrored: the re-run carries the SBOM's signatures, not the model or the SBOM again."""
    src, target = fresh_source, f"resume/{uuid.uuid4().hex[:8]}/sbom"
    assert run_job(_job(tmp_path, src, f"{registry2.host}/{target}", "1.0")).ok
    sbom = Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json", digest=src["sbom"], size=0)
    written = _sign(src["host"], src["repo"], src["sbom"])

    again = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "1.0"))
    assert again.ok, again.format_text()
    [result] = again.artifacts
    assert result.status == "copied" and result.note.startswith("completed:"), result
    assert "2 referrer(s)" in result.note, result.note  # the bundle referrer and the .sig tag
    assert not proxy.requests_matching("PUT", rf"/manifests/{src['root'].digest}")
    sig_tag = signature_tag(src["sbom"])
    assert _resolved(registry2.host, target, sig_tag) == _resolved(src["host"], src["repo"], sig_tag)
    assert _state(registry2.host, target, [sbom])[1] == {src["sbom"]: [written["bundle"]]}

    proxy.clear()
    last = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "1.0"))
    assert [(a.status, a.reason) for a in last.artifacts] == [("skipped", "already mirrored")]
    assert [r for r in proxy.requests if r.method in WRITES] == []


def test_target_with_more_signatures_than_the_source_is_left_alone(
        fresh_source, registry2, tmp_path, proxy) -> None:
    """The source's ``.sig`` is there, merged with one the target's owner added: nothing lacks,
    so the re-run skips it and writes nothing (a digest compare alone would copy it every run)."""
    src, target = fresh_source, f"resume/{uuid.uuid4().hex[:8]}/merged"
    _sign(src["host"], src["repo"], src["root"].digest, ("classic",))
    assert run_job(_job(tmp_path, src, f"{registry2.host}/{target}", "1.0")).ok
    sig_tag = signature_tag(src["root"].digest)
    _sign(registry2.host, target, src["root"].digest, ("classic",))  # the target's own, merged in
    assert _resolved(registry2.host, target, sig_tag) != _resolved(src["host"], src["repo"], sig_tag)

    again = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "1.0"))
    assert [(a.status, a.reason) for a in again.artifacts] == [("skipped", "already mirrored")], \
        again.format_text()
    assert [r for r in proxy.requests if r.method in WRITES] == []


def test_completing_writes_no_signature_tag_that_holds_the_sources_already(
        fresh_source, registry2, tmp_path, proxy) -> None:
    """An artifact completed for another referrer (an SBOM the source gained) whose ``.sig`` at
    the target holds the source's signature and one of its own: that tag is not written again."""
    src, target = fresh_source, f"resume/{uuid.uuid4().hex[:8]}/keep"
    _sign(src["host"], src["repo"], src["root"].digest, ("classic",))
    assert run_job(_job(tmp_path, src, f"{registry2.host}/{target}", "1.0")).ok
    sig_tag = signature_tag(src["root"].digest)
    _sign(registry2.host, target, src["root"].digest, ("classic",))
    merged = _resolved(registry2.host, target, sig_tag)
    store = _open(src["host"], src["repo"])
    try:
        later = _attach(store, src["root"], b'{"spdxVersion": "SPDX-2.3", "name": "model 3, again"}')
    finally:
        store.close()

    again = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "1.0"))
    assert again.ok and again.artifacts[0].note.startswith("completed:"), again.format_text()
    assert later in _state(registry2.host, target, [src["root"]])[1][src["root"].digest]
    assert _resolved(registry2.host, target, sig_tag) == merged
    assert not proxy.requests_matching("PUT", r"/manifests/sha256-[0-9a-f]{64}\.sig")


def test_a_run_stopped_before_a_childs_signature_leaves_the_index_untagged(
        fresh_source, registry2, tmp_path, proxy) -> None:
    """Tag-last writing already keeps the index's tag behind its children's ``.sig`` tags: a run
    whose signature write fails tags nothing, and the next run finishes it."""
    src, target = fresh_source, f"resume/{uuid.uuid4().hex[:8]}/stopped"
    _sign(src["host"], src["repo"], src["child"].digest, ("classic",))
    proxy.add("PUT", r"/manifests/sha256-[0-9a-f]{64}\.sig", status(400), times=None)
    first = run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "idx"))
    assert [a.status for a in first.artifacts] == ["failed"]
    assert _resolved(registry2.host, target, "idx") is None

    proxy.clear()
    assert run_job(_job(tmp_path, src, f"{proxy.host}/{target}", "idx")).ok
    sig_tag = signature_tag(src["child"].digest)
    assert _resolved(registry2.host, target, sig_tag) == _resolved(src["host"], src["repo"], sig_tag)
    assert _resolved(registry2.host, target, "idx") is not None


def test_a_whole_repository_entry_looks_for_signatures_among_the_tags_it_listed(
        fresh_source, registry, registry2, tmp_path) -> None:
    """An entry of every tag lists the source's tags anyway: a child signed after the first run is
    found among them, and the check asks the source about no ``.sig``/``.att``/``.sbom`` tag it
    did not list (three HEADs per manifest otherwise)."""
    src, target = fresh_source, f"{registry2.host}/resume/{uuid.uuid4().hex[:8]}/all"
    with FaultProxy(registry) as front:
        path = tmp_path / "all.toml"
        path.write_text(f'[[sync]]\nsource = "{front.host}/{src["repo"]}"\ntarget = "{target}"\n')
        assert run_job(load_job(path)).ok
        sig_tag = signature_tag(src["child"].digest)
        _sign(src["host"], src["repo"], src["child"].digest, ("classic",))

        again = run_job(load_job(path))
        assert [(a.target.rsplit(":", 1)[1], a.status) for a in again.artifacts] == [
            ("1.0", "skipped"), ("idx", "copied")], again.format_text()
        assert _resolved(registry2.host, target.split("/", 1)[1], sig_tag) is not None

        front.clear()
        last = run_job(load_job(path))
        assert [a.status for a in last.artifacts] == ["skipped", "skipped"], last.format_text()
        asked = [r.path.rsplit("/", 1)[1] for r in front.requests_matching("HEAD", r"/manifests/sha256-")]
        assert asked == [sig_tag], asked  # the one the source holds: its digest, compared with the target's
