"""RegistryStore against a real distribution registry: push, pull, copy, mount, tags, referrers."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from support.faultproxy import Status

from ocibridge.errors import NotFound, RegistryError
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_INDEX, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.signing.attach import SignatureCompanions
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import RegistryStore, fallback_tag, open_repository
from ocibridge.transfer.copy import CopyHooks, copy
from tests.modelgen import make_model, tree


def _store(reg, repo: str, **options) -> RegistryStore:
    return open_repository(parse_registry_reference(f"{reg.host}/{repo}:x"), **options)


def _layout_with_model(tmp_path, seed: int = 0) -> tuple[LayoutStore, Descriptor]:
    model = make_model(tmp_path / f"model{seed}", seed=seed)
    layout = LayoutStore(tmp_path / f"layout{seed}", create=True)
    copy(build(read_directory(model)), ARTIFACT_TAG, layout, "v1")
    return layout, layout.resolve("v1")


def _blob_total(layout: LayoutStore, root: Descriptor) -> tuple[int, int]:
    manifest = Manifest.model_validate_json(layout.fetch_bytes(root))
    blobs = {b.digest: b.size for b in [manifest.config, *manifest.layers]}
    return len(blobs), sum(blobs.values())


def test_push_pull_round_trip_and_repush_uploads_nothing(registry, unique_repo, tmp_path):
    layout, root = _layout_with_model(tmp_path)
    count, total = _blob_total(layout, root)
    sent: list[int] = []
    with _store(registry, unique_repo, on_bytes=lambda desc, n: sent.append(n)) as dst:
        stats = copy(layout, "v1", dst, "v1")
        assert sum(sent) == total  # the byte-level progress hook saw every byte
        assert stats.blobs_copied == count
        assert dst.stats.bytes_uploaded == total
        assert dst.stats.blobs_uploaded == count
        assert dst.resolve("v1") == Descriptor(mediaType=OCI_MANIFEST, digest=root.digest,
                                               size=root.size)
        # the manifest stored is byte-identical to what was sent
        raw = httpx.get(f"{registry.url}/v2/{unique_repo}/manifests/v1",
                        headers={"Accept": OCI_MANIFEST})
        assert raw.content == layout.fetch_bytes(root)

    with _store(registry, unique_repo) as again:
        stats = copy(layout, "v1", again, "v2")
        assert again.stats.bytes_uploaded == 0
        assert again.stats.blobs_uploaded == 0
        assert stats.blobs_copied == 0
        assert sorted(again.tags()) == ["v1", "v2"]

    back = LayoutStore(tmp_path / "back", create=True)
    with _store(registry, unique_repo) as src:
        copy(src, "v1", back, "v1")
        assert src.stats.bytes_downloaded == total
    assert back.resolve("v1").digest == root.digest
    for digest in (layout.blob_path(root.digest).parent).iterdir():
        assert (back.root / "blobs" / "sha256" / digest.name).read_bytes() == digest.read_bytes()


def test_copy_between_repositories_mounts(registry, tmp_path):
    layout, root = _layout_with_model(tmp_path)
    count, _ = _blob_total(layout, root)
    src_repo, dst_repo = "mount/src", "mount/dst"
    with _store(registry, src_repo) as src:
        copy(layout, "v1", src, "v1")
    with _store(registry, src_repo) as src, _store(registry, dst_repo) as dst:
        stats = copy(src, "v1", dst, "v1")
        assert stats.blobs_mounted == count
        assert dst.stats.bytes_uploaded == 0
        assert dst.stats.blobs_mounted == count
        assert src.stats.bytes_downloaded == 0
        assert dst.resolve("v1").digest == root.digest
        for blob in Manifest.model_validate_json(dst.fetch_bytes(root)).layers:
            assert dst.exists(blob)


def test_copy_between_two_registries(registry, registry2, unique_repo, tmp_path):
    layout, root = _layout_with_model(tmp_path)
    _, total = _blob_total(layout, root)
    with _store(registry, unique_repo) as a:
        copy(layout, "v1", a, "v1")
    with _store(registry, unique_repo) as a, _store(registry2, unique_repo) as b:
        stats = copy(a, "v1", b, "copied")
        assert stats.blobs_mounted == 0
        assert b.stats.bytes_uploaded == total
        assert a.stats.bytes_downloaded == total
    out = LayoutStore(tmp_path / "out", create=True)
    with _store(registry2, unique_repo) as b:
        copy(b, "copied", out, "v1")
    assert out.resolve("v1").digest == root.digest


def test_chunked_upload(registry, unique_repo, tmp_path):
    layout, root = _layout_with_model(tmp_path)
    _, total = _blob_total(layout, root)
    with _store(registry, unique_repo, chunk_size=65536) as dst:
        copy(layout, "v1", dst, "v1")
        assert dst.stats.bytes_uploaded == total
        patches = dst.stats.requests
    # more requests than one POST+PUT per blob: the 200 kB layers went in 64 KiB PATCHes
    with _store(registry, unique_repo) as check:
        assert check.resolve("v1").digest == root.digest
    assert patches > 2 * 8 + 4


def test_tags_follow_link_pages(registry, fault_proxy, unique_repo, tmp_path):
    """distribution 2.8 does not paginate tags itself: the proxy answers page one with a Link."""
    layout, root = _layout_with_model(tmp_path)
    with _store(registry, unique_repo) as dst:
        copy(layout, "v1", dst, "t0")
        for i in range(1, 7):
            dst.tag(root, f"t{i}")
    link = f'</v2/{unique_repo}/tags/list?n=2&last=t1>; rel="next"'
    fault_proxy.add("GET", r"/tags/list\?n=1000$", Status(
        200, None, json.dumps({"name": unique_repo, "tags": ["t0", "t1"]}).encode(),
        (("Link", link),)))
    with _store(fault_proxy, unique_repo) as via:
        assert via.tags() == [f"t{i}" for i in range(7)]
    pages = fault_proxy.requests_matching("GET", "/tags/list")
    assert [p.path.split("?", 1)[1] for p in pages] == ["n=1000", "n=2&last=t1"]
    assert _store(registry, "nothing/here").tags() == []


def test_missing_things(registry, unique_repo):
    with _store(registry, unique_repo) as store:
        with pytest.raises(NotFound):
            store.resolve("nope")
        blob = Descriptor(mediaType="application/octet-stream",
                          digest="sha256:" + "0" * 64, size=3)
        assert not store.exists(blob)
        with pytest.raises(NotFound):
            store.open_blob(blob)


def test_push_error_carries_registry_code(registry, unique_repo):
    missing = Descriptor(mediaType="x", digest="sha256:" + "1" * 64, size=1)
    bogus = Manifest(config=missing).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, bogus)
    with _store(registry, unique_repo) as store, pytest.raises(RegistryError) as err:
        store.push_manifest(desc, bogus, "bad")
    assert err.value.status == 400
    assert err.value.code == "MANIFEST_BLOB_UNKNOWN"
    assert str(err.value).startswith(f"registry {registry.host} refused writing to {unique_repo}: ")
    assert "\n" not in str(err.value)


def test_referrers_fallback_tag(registry, unique_repo, tmp_path):
    layout, root = _layout_with_model(tmp_path)
    with _store(registry, unique_repo) as store:
        copy(layout, "v1", store, "v1")
        empty = b"{}"
        empty_desc = Descriptor.for_bytes(OCI_EMPTY, empty)
        store.push_blob(empty_desc, io.BytesIO(empty))
        refs = []
        for kind in ("application/vnd.example.sig", "application/vnd.example.sbom"):
            m = Manifest(artifactType=kind, config=empty_desc, layers=[empty_desc],
                         subject=root, annotations={"kind": kind})
            data = m.to_json_bytes()
            desc = Descriptor.for_bytes(OCI_MANIFEST, data)
            store.push_manifest(desc, data)
            store.push_manifest(desc, data)  # twice: listed once
            refs.append(desc.digest)
        found = store.referrers(root)
        assert [d.digest for d in found] == refs
        assert store.referrers(root, "application/vnd.example.sbom")[0].digest == refs[1]
        assert fallback_tag(root.digest) in store.tags()
        index = json.loads(store.fetch_bytes(store.resolve(fallback_tag(root.digest))))
        assert index["mediaType"] == OCI_INDEX
        # and copy --referrers carries them to a layout
        out = LayoutStore(tmp_path / "out", create=True)
        stats = copy(store, "v1", out, "v1", referrers=True,
                     hooks=CopyHooks(companions=SignatureCompanions()))
        assert sorted(stats.referrers) == sorted(refs)
        assert sorted(d.digest for d in out.referrers(root)) == sorted(refs)


def test_pull_roundtrip_through_layout_and_directory(registry, unique_repo, tmp_path):
    from ocibridge.model.extract import extract

    model = make_model(tmp_path / "model")
    with _store(registry, unique_repo) as store:
        copy(build(read_directory(model)), ARTIFACT_TAG, store, "v1")
        extract(store, "v1", tmp_path / "out")
    assert tree(tmp_path / "out") == tree(model)


def test_plain_http_registry_needs_no_tls_setup(registry, monkeypatch):
    """A loopback (plain HTTP) registry never pays for parsing the CA bundle (~25 ms a run)."""
    import ssl

    made = []
    create = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or create(*a, **k))
    with _store(registry, "plain/http") as store:
        assert store.tags() == []
    assert made == []


def test_manifest_headers_as_the_proxy_sees_them(registry, fault_proxy, unique_repo, tmp_path):
    """PUT carries the manifest's own media type; GET and HEAD accept every manifest and index
    type (OCI and Docker), so a Docker-format image or an index is not refused or converted."""
    from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES

    layout, root = _layout_with_model(tmp_path)
    with _store(fault_proxy, unique_repo) as dst:
        copy(layout, "v1", dst, "v1")
        data = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                           "manifests": [root.model_dump(exclude_none=True)]}).encode()
        index = Descriptor.for_bytes(OCI_INDEX, data)
        dst.push_manifest(index, data, "idx")
    out = LayoutStore(tmp_path / "out", create=True)
    with _store(fault_proxy, unique_repo) as src:
        copy(src, "idx", out, "idx")
    assert out.resolve("idx").digest == index.digest
    puts = {r.path.rsplit("/", 1)[1]: r.headers.get("content-type")
            for r in fault_proxy.requests_matching("PUT", "/manifests/")}
    assert puts["v1"] == OCI_MANIFEST and puts["idx"] == OCI_INDEX, puts
    reads = [r for r in fault_proxy.requests if "/manifests/" in r.path and r.method in ("GET", "HEAD")]
    assert reads
    for r in reads:
        accepted = {x.strip() for x in r.headers.get("accept", "").split(",")}
        assert set(ALL_MANIFEST_TYPES) <= accepted, (r.method, r.path, accepted)
    assert {"application/vnd.docker.distribution.manifest.v2+json",
            "application/vnd.docker.distribution.manifest.list.v2+json"} <= set(ALL_MANIFEST_TYPES)


def test_referrers_api_is_used_where_the_registry_has_it(registry, fault_proxy, unique_repo, tmp_path):
    """distribution 2.8 has no referrers API: the proxy answers GET /referrers/ as a 1.1
    registry would (an image index), everything else is the real registry. The API's answer is
    used, filtered by artifactType, and no fallback tag is read; the copy brings the referrer."""
    layout, root = _layout_with_model(tmp_path)
    empty = b"{}"
    empty_desc = Descriptor.for_bytes(OCI_EMPTY, empty)
    sig = Manifest(artifactType="application/vnd.example.sig", config=empty_desc,
                   layers=[empty_desc], subject=root)
    data = sig.to_json_bytes()
    sig_desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    with _store(registry, unique_repo) as store:
        copy(layout, "v1", store, "v1")
        store.push_blob(empty_desc, io.BytesIO(empty))
        store.push_manifest(sig_desc, data)
    listed = sig_desc.model_copy(update={"artifactType": "application/vnd.example.sig"})
    answer = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                         "manifests": [listed.model_dump(exclude_none=True)]}).encode()
    fault_proxy.add("GET", rf"/referrers/{root.digest}", Status(
        200, None, answer, (("Content-Type", OCI_INDEX),)), times=None)
    with _store(fault_proxy, unique_repo) as via:
        assert [d.digest for d in via.referrers(root)] == [sig_desc.digest]
        assert via.referrers(root, "application/vnd.example.sbom") == []
        out = LayoutStore(tmp_path / "out", create=True)
        stats = copy(via, "v1", out, "v1", referrers=True,
                     hooks=CopyHooks(companions=SignatureCompanions()))
    assert stats.referrers == [sig_desc.digest]
    assert [d.digest for d in out.referrers(root)] == [sig_desc.digest]
    assert fault_proxy.requests_matching("GET", "/referrers/")
    assert not fault_proxy.requests_matching("GET", f"/manifests/{fallback_tag(root.digest)}")


def test_referrers_200_that_is_not_an_index_means_no_api(registry, fault_proxy, unique_repo, tmp_path):
    """Some front ends answer unknown routes with 200 and a page: that is no referrers API,
    so the fallback tag is read instead of the copy failing."""
    layout, root = _layout_with_model(tmp_path)
    empty = b"{}"
    empty_desc = Descriptor.for_bytes(OCI_EMPTY, empty)
    data = Manifest(artifactType="application/vnd.example.sig", config=empty_desc,
                    layers=[empty_desc], subject=root).to_json_bytes()
    sig_desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    with _store(registry, unique_repo) as store:
        copy(layout, "v1", store, "v1")
        store.push_blob(empty_desc, io.BytesIO(empty))
        store.push_manifest(sig_desc, data)  # distribution 2.8: the fallback tag is written
    fault_proxy.add("GET", "/referrers/", Status(
        200, None, b"<html>registry UI</html>", (("Content-Type", "text/html"),)), times=None)
    out = LayoutStore(tmp_path / "out", create=True)
    with _store(fault_proxy, unique_repo) as via:
        stats = copy(via, "v1", out, "v1", referrers=True,
                     hooks=CopyHooks(companions=SignatureCompanions()))
    assert stats.referrers == [sig_desc.digest]
    assert fault_proxy.requests_matching("GET", f"/manifests/{fallback_tag(root.digest)}")


def test_blob_homes_are_bounded_and_most_recent_first():
    from ocibridge.stores.registry.blobhomes import HOMES_PER_BLOB, BlobHomes

    homes = BlobHomes(max_blobs=2)
    for repo in ("a", "b", "c", "d", "b"):
        homes.remember("http://r1", "sha256:x", repo)
    assert homes.candidates("http://r1", "sha256:x") == ["b", "d", "c"][:HOMES_PER_BLOB]
    assert homes.candidates("http://r2", "sha256:x") == []  # another registry knows nothing
    homes.remember("http://r1", "sha256:y", "a")
    homes.remember("http://r1", "sha256:z", "a")  # the least recently seen blob is forgotten
    assert homes.candidates("http://r1", "sha256:x") == []
    assert homes.candidates("http://r1", "sha256:z") == ["a"]
