"""A mirror re-run ends with the target an uninterrupted run leaves, referrers included (two real
`docker-registry` processes, a fault proxy in front of the target).

The half state an older run left (tag written before the artifact's referrers, then killed) is
completed by the next run; a run stopped before a referrer is written leaves no tag; a target
that holds everything gets no write; with ``referrers = false`` nothing of this applies.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import httpx
import pytest
from support.faultproxy import FaultProxy, status

from ocibridge.mirror import load_job, run_job
from ocibridge.model.builder import build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import OCI_INDEX, OCI_MANIFEST, Kind
from ocibridge.oci.models import Descriptor, Index, Manifest
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy

SBOM_TYPE = "application/spdx+json"
EMPTY = b"{}"
WRITES = ("PUT", "POST", "PATCH", "DELETE")


def model(i: int) -> ModelPackage:
    return ModelPackage(files=[ModelFile.from_bytes("model.safetensors", bytes([i]) * 4096, Kind.WEIGHT)],
                        descriptor={"name": "tiny", "version": f"1.{i}.0"}, config={"format": "safetensors"})


def _open(host: str, repo: str):
    return open_repository(parse_registry_reference(f"{host}/{repo}"))


def _attach(store, subject: Descriptor, body: bytes, artifact_type: str = SBOM_TYPE) -> str:
    """A referrer of ``subject`` that is no signature (an SBOM); its digest."""
    layer = Descriptor.for_bytes(artifact_type, body)
    store.push_blob(layer, io.BytesIO(body))
    store.push_blob(Descriptor.for_bytes("application/vnd.oci.empty.v1+json", EMPTY), io.BytesIO(EMPTY))
    referrer = Manifest(artifactType=artifact_type,
                        config=Descriptor.for_bytes("application/vnd.oci.empty.v1+json", EMPTY),
                        layers=[layer], subject=subject.model_copy(update={"annotations": None}))
    data = referrer.to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    store.push_manifest(desc, data)
    return desc.digest


@pytest.fixture(scope="module")
def source(registry) -> dict:
    """``1.0``: a model with an SBOM referrer; ``idx``: an index over another model whose
    manifest (the child, not the index) has an SBOM referrer."""
    repo = f"resume/{uuid.uuid4().hex[:8]}/src"
    store = _open(registry.host, repo)
    root = copy(build(model(1)), "artifact", store, "1.0").root
    sbom = _attach(store, root, b'{"spdxVersion": "SPDX-2.3", "name": "model 1"}')
    child = copy(build(model(2)), "artifact", store, None).root
    child_sbom = _attach(store, child, b'{"spdxVersion": "SPDX-2.3", "name": "model 2"}')
    index = Index(mediaType=OCI_INDEX, manifests=[child.model_copy(update={"annotations": None})])
    data = index.to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(OCI_INDEX, data), data, "idx")
    store.close()
    return {"host": registry.host, "repo": repo, "root": root, "sbom": sbom, "child": child,
            "child_sbom": child_sbom}


def _job(tmp_path: Path, source: dict, target: str, tag: str, extra: str = "") -> object:
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(f"""
[[sync]]
source = "{source['host']}/{source['repo']}:{tag}"
target = "{target}:{tag}"
{extra}
""")
    return load_job(path)


def _tags(host: str, repo: str) -> list[str]:
    r = httpx.get(f"http://{host}/v2/{repo}/tags/list", timeout=30)
    return [] if r.status_code == 404 else sorted(r.json().get("tags") or [])


def _state(host: str, repo: str, subjects: list[Descriptor]) -> tuple[list[str], dict[str, list[str]]]:
    """What a user sees of the target: its tags, and each subject's referrers as listed."""
    store = _open(host, repo)
    try:
        return _tags(host, repo), {s.digest: sorted(r.digest for r in store.referrers(s)) for s in subjects}
    finally:
        store.close()


def _uninterrupted(tmp_path: Path, source: dict, registry2, tag: str, subjects: list[Descriptor]):
    repo = f"resume/{uuid.uuid4().hex[:8]}/whole"
    summary = run_job(_job(tmp_path, source, f"{registry2.host}/{repo}", tag))
    assert summary.ok, summary.format_text()
    return _state(registry2.host, repo, subjects)


def _half_mirrored(source: dict, registry2, tag: str) -> str:
    """What an older run killed between a tag and its referrer left: the artifact tagged, no
    referrer of it (copied with ``referrers=False``)."""
    repo = f"resume/{uuid.uuid4().hex[:8]}/half"
    src, dst = _open(source["host"], source["repo"]), _open(registry2.host, repo)
    try:
        copy(src, tag, dst, tag, referrers=False)
    finally:
        src.close()
        dst.close()
    return repo


@pytest.fixture
def proxy(registry2):
    """A fault proxy in front of the target registry, for the test's requests and faults."""
    front = FaultProxy(registry2)
    yield front
    front.stop()


def test_rerun_completes_a_tag_left_without_its_referrer(source, registry2, tmp_path) -> None:
    repo = _half_mirrored(source, registry2, "1.0")
    assert _state(registry2.host, repo, [source["root"]])[1] == {source["root"].digest: []}

    summary = run_job(_job(tmp_path, source, f"{registry2.host}/{repo}", "1.0"))
    assert summary.ok, summary.format_text()
    [result] = summary.artifacts
    assert result.status == "copied" and result.note.startswith("completed:"), result
    assert "1 referrer(s)" in result.note and "completed:" in summary.format_text()
    assert result.referrers == 1 and result.bytes_copied < 200  # the SBOM, not the model again
    final = _state(registry2.host, repo, [source["root"]])
    assert final[1] == {source["root"].digest: [source["sbom"]]}
    assert final == _uninterrupted(tmp_path, source, registry2, "1.0", [source["root"]])


def test_rerun_completes_an_index_whose_child_lacks_its_referrer(source, registry2, tmp_path) -> None:
    repo = _half_mirrored(source, registry2, "idx")
    summary = run_job(_job(tmp_path, source, f"{registry2.host}/{repo}", "idx"))
    assert summary.ok, summary.format_text()
    assert summary.artifacts[0].note.startswith("completed:"), summary.artifacts[0]
    final = _state(registry2.host, repo, [source["child"]])
    assert final[1] == {source["child"].digest: [source["child_sbom"]]}
    assert final == _uninterrupted(tmp_path, source, registry2, "idx", [source["child"]])


def test_run_stopped_before_the_referrer_leaves_no_tag_and_rerun_finishes(source, registry2, tmp_path, proxy) -> None:
    repo = f"resume/{uuid.uuid4().hex[:8]}/stopped"
    proxy.add("PUT", r"/manifests/ocibridge-ref-", status(400), times=None)  # every referrer write fails
    first = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", "1.0"))
    assert [a.status for a in first.artifacts] == ["failed"]
    assert "1.0" not in _tags(registry2.host, repo)  # no tag names the artifact without its SBOM
    assert proxy.requests_matching("PUT", rf"/manifests/{source['root'].digest}")  # pushed by digest first

    proxy.clear()
    again = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", "1.0"))
    assert again.ok, again.format_text()
    assert again.artifacts[0].status == "copied" and again.artifacts[0].blobs_copied <= 2  # the SBOM's
    final = _state(registry2.host, repo, [source["root"]])
    assert final[1] == {source["root"].digest: [source["sbom"]]}
    assert final == _uninterrupted(tmp_path, source, registry2, "1.0", [source["root"]])


def test_rerun_of_a_complete_mirror_writes_nothing(source, registry2, tmp_path, proxy) -> None:
    repo = f"resume/{uuid.uuid4().hex[:8]}/whole"
    for tag in ("1.0", "idx"):
        assert run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", tag)).ok
    proxy.clear()
    for tag in ("1.0", "idx"):
        again = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", tag))
        assert [(a.status, a.reason) for a in again.artifacts] == [("skipped", "already mirrored")]
    assert [r for r in proxy.requests if r.method in WRITES] == []
    # at the target, per artifact at most: its tag resolved, one existence check per referrer (one each)
    assert {r.method for r in proxy.requests} == {"HEAD"} and len(proxy.requests) <= 2 * (1 + 1)


def test_referrers_off_leaves_a_tagged_artifact_alone(source, registry2, tmp_path, proxy) -> None:
    repo = _half_mirrored(source, registry2, "1.0")
    again = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", "1.0", "referrers = false"))
    assert [(a.status, a.reason) for a in again.artifacts] == [("skipped", "already mirrored")]
    assert [r for r in proxy.requests if r.method in WRITES] == []
    assert _state(registry2.host, repo, [source["root"]])[1] == {source["root"].digest: []}


def test_run_stopped_before_its_provenance_leaves_no_tag(source, registry2, tmp_path, proxy) -> None:
    """What the run itself attaches (provenance) goes before the tag too."""
    repo = f"resume/{uuid.uuid4().hex[:8]}/provenance"
    proxy.add("PUT", r"/manifests/ocibridge-ref-", status(400), times=None)
    first = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", "1.0", "referrers = false\nprovenance = true"))
    assert [a.status for a in first.artifacts] == ["failed"]
    assert "1.0" not in _tags(registry2.host, repo)

    proxy.clear()
    again = run_job(_job(tmp_path, source, f"{proxy.host}/{repo}", "1.0", "referrers = false\nprovenance = true"))
    assert again.ok and again.artifacts[0].provenance, again.format_text()
    assert "1.0" in _tags(registry2.host, repo)
    provenance = again.artifacts[0].provenance
    assert _state(registry2.host, repo, [source["root"]])[1] == {source["root"].digest: [provenance]}


def test_rerun_lists_a_referrer_a_stopped_run_wrote_but_did_not_index(source, registry2, tmp_path) -> None:
    """Stopped between a referrer's write and its entry in the subject's ``sha256-<hex>``
    fallback index (this registry has no referrers API): the re-run lists it."""
    repo = f"resume/{uuid.uuid4().hex[:8]}/unindexed"
    src, dst = _open(source["host"], source["repo"]), _open(registry2.host, repo)
    try:
        copy(src, source["root"].digest, dst, None, referrers=False)
        copy(src, source["sbom"], dst, None, referrers=False)  # the referrer, with its bookkeeping tag
    finally:
        src.close()
        dst.close()
    empty = Index(mediaType=OCI_INDEX).to_json_bytes()  # the fallback index as before the referrer's entry
    httpx.put(f"http://{registry2.host}/v2/{repo}/manifests/sha256-{source['root'].digest[7:]}", content=empty,
              headers={"Content-Type": OCI_INDEX}, timeout=30).raise_for_status()
    assert _state(registry2.host, repo, [source["root"]])[1] == {source["root"].digest: []}

    summary = run_job(_job(tmp_path, source, f"{registry2.host}/{repo}", "1.0"))
    assert summary.ok, summary.format_text()
    final = _state(registry2.host, repo, [source["root"]])
    assert final[1] == {source["root"].digest: [source["sbom"]]}
    assert final == _uninterrupted(tmp_path, source, registry2, "1.0", [source["root"]])
