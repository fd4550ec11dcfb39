"""serve holds one registry store per repository for the process, and its requests read the
same manifests again and again (every commit listing walks the branch's commits): a manifest
read by digest once answers the next request's read without a registry request (the bound and
the delete's forget below). A command's store keeps nothing: it hands its reads down
(tests/registry/test_manifest_reads.py)."""

from __future__ import annotations

import io

from huggingface_hub import HfApi
from serving import serving

from ocibridge.cli import main
from ocibridge.hubserver.repo.heldmanifests import HeldManifests, ServedRegistryStore
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.registry import RegistryStore, open_repository
from tests.modelgen import make_bert_model


def test_held_manifests_keep_within_their_bound_least_recent_out_first():
    held = HeldManifests(limit=10)
    held.put("sha256:a", OCI_MANIFEST, b"aaaa")
    held.put("sha256:b", OCI_MANIFEST, b"bbbb")
    assert held.get("sha256:a") is not None  # read: now the most recent
    held.put("sha256:c", OCI_MANIFEST, b"cccc")  # 12 bytes: the least recent (b) goes
    assert held.get("sha256:b") is None and held.get("sha256:a") == (OCI_MANIFEST, b"aaaa")
    held.put("sha256:big", OCI_MANIFEST, b"x" * 11)  # over the bound alone: not kept
    assert held.get("sha256:big") is None and held.get("sha256:c") is not None
    held.forget("sha256:c")
    assert held.get("sha256:c") is None


def test_a_served_store_reads_a_manifest_by_digest_once_and_forgets_it_on_delete(fault_proxy, unique_repo):
    config = b"{}"
    config_desc = Descriptor.for_bytes(OCI_CONFIG, config)
    data = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=[]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    with open_repository(host=fault_proxy.host, repository=unique_repo) as store:
        assert type(store) is RegistryStore  # a command's store
        store.push_blob(config_desc, io.BytesIO(config))
        store.push_manifest(desc, data, "v1")
        before = len(fault_proxy.requests)
        store.fetch_bytes(desc)
        store.fetch_bytes(desc)
        assert len(fault_proxy.requests) == before + 2  # keeps nothing: each read is asked
    with open_repository(host=fault_proxy.host, repository=unique_repo, kind=ServedRegistryStore) as served:
        before = len(fault_proxy.requests)
        assert served.fetch_bytes(desc) == data and served.fetch_bytes(desc) == data
        assert served.resolve(desc.digest) == desc and served.read_manifest(desc.digest) == (desc, data)
        assert len(fault_proxy.requests) == before + 1
        assert served.resolve("v1") == desc  # a tag can move: always asked
        assert len(fault_proxy.requests) == before + 2
        served.delete_manifest(desc)
        assert served.held.get(desc.digest) is None


def test_a_commit_listing_again_asks_the_registry_for_no_commit_it_read(fault_proxy, unique_repo, tmp_path):
    """Each listing asks for the branch's tag (it can move); the commits' manifests, named by
    digest, come from the registry once (before: every listing read each of them again)."""
    model = make_bert_model(tmp_path / "m")
    assert main(["push", "-q", str(model), f"{fault_proxy.host}/{unique_repo}/acme/m:latest"]) == 0
    with serving([f"{fault_proxy.host}/{unique_repo}"]) as served:
        api = HfApi(endpoint=served.url, token=False)
        first = api.list_repo_commits("acme/m")
        before = len(fault_proxy.requests)
        assert api.list_repo_commits("acme/m") == first
        by_digest = [r.path for r in fault_proxy.requests[before:] if "/manifests/sha256:" in r.path]
    assert first and by_digest == []


def test_a_commit_lands_without_asking_back_the_manifest_it_pushed(fault_proxy, unique_repo):
    """A commit pushes its manifest by digest, then writes its commit tag and the branch's tag (main: the tag latest)
    with the bytes in hand: nothing of the manifest is asked of the registry after its PUT
    (before: a HEAD and a GET to read it back, and a HEAD before each tag: four round trips a
    commit, each a registry's latency away)."""
    with serving([f"{fault_proxy.host}/{unique_repo}"], tokens=("writer write * ci-bot",),
                 publish=Publishing()) as served:
        api = HfApi(endpoint=served.url, token="writer")
        api.create_repo("acme/landed")
        before = len(fault_proxy.requests)
        commit = api.upload_file(path_or_fileobj=b"weights\n", path_in_repo="notes.txt", repo_id="acme/landed")
        seen = fault_proxy.requests[before:]
        assert api.list_repo_commits("acme/landed")[0].commit_id == commit.oid
    by_digest = [n for n, r in enumerate(seen) if r.method == "PUT" and "/manifests/sha256:" in r.path]
    assert by_digest, [f"{r.method} {r.path}" for r in seen]
    pushed = seen[by_digest[-1]].path.rsplit("/", 1)[-1]  # the commit's manifest (the last pushed)
    after = [f"{r.method} {r.path.rsplit('/manifests/', 1)[-1]}" for r in seen[by_digest[-1] + 1:]
             if "/manifests/" in r.path]
    assert f"PUT ocibridge-commit-{commit.oid}" in after and "PUT latest" in after, after  # main is the tag latest
    assert not [line for line in after if line.endswith(pushed) and not line.startswith("PUT")], after
