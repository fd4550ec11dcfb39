"""A pull reads the tag's manifest with one GET, checked against the digest the registry names
for it, parses it once and hands it down: no step after the door reads or parses it again
(tests/registry/test_manifest_reads.py counts the other commands). A store keeps nothing it read: what
a step read is handed to the next (a copy takes the manifests and referrer listings its caller
read as ``CopyHooks``), so a manifest read twice is a request twice and shows in the counts."""

from __future__ import annotations

import io

import pytest

from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import referrers_read
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import RegistryStore, open_repository
from ocibridge.transfer.copy import CopyHooks, copy
from tests.hostile import test_hostile_servers as _servers
from tests.hostile.test_hostile_servers import _one_error_line, ocibridge
from tests.support.tiny_http import send as _send

hostile = _servers.hostile  # the loopback misbehaving-registry fixture, shared


def _push(host: str, repo: str) -> Descriptor:
    layer, config = b"weights" * 100, b"{}"
    layer_desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, config)
    data = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=[layer_desc]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    with open_repository(host=host, repository=repo) as store:
        store.push_blob(layer_desc, io.BytesIO(layer))
        store.push_blob(config_desc, io.BytesIO(config))
        store.push_manifest(desc, data, "v1")
    return desc


def _refer(store: RegistryStore, subject: Descriptor) -> Descriptor:
    """A referrer of ``subject`` (a signature-like artifact), pushed: the fallback index lists it."""
    empty = Descriptor.for_bytes("application/vnd.oci.empty.v1+json", b"{}")
    store.push_blob(empty, io.BytesIO(b"{}"))
    data = Manifest(mediaType=OCI_MANIFEST, artifactType="application/vnd.example.note", config=empty,
                    layers=[empty], subject=subject).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, data)
    store.push_manifest(desc, data)
    return desc


def manifest_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The digests of the manifests registry stores read from now on (``fetch_bytes``), in order."""
    read: list[str] = []
    fetch_bytes = RegistryStore.fetch_bytes

    def counted_fetch(self: RegistryStore, desc: Descriptor) -> bytes:
        if desc.mediaType == OCI_MANIFEST:
            read.append(desc.digest)
        return fetch_bytes(self, desc)

    monkeypatch.setattr(RegistryStore, "fetch_bytes", counted_fetch)
    return read


def test_a_copy_handed_what_its_caller_read_asks_the_source_for_none_of_it(fault_proxy, unique_repo, tmp_path):
    """The root's descriptor, its manifest and the referrer listings (with what each listing
    read) handed to a copy are taken as they are: the source is asked for no manifest and no
    listing (as a mirror's copy is handed its plan's reads); a copy handed nothing asks again."""
    desc = _push(fault_proxy.host, unique_repo)
    with open_repository(host=fault_proxy.host, repository=unique_repo) as store:
        note = _refer(store, desc)
        data = store.fetch_bytes(desc)
        listed = {desc.digest: referrers_read(store, desc), note.digest: referrers_read(store, note)}
        assert [r.digest for r in listed[desc.digest]] == [note.digest]

        def manifest_requests(hooks: CopyHooks, into: str) -> list[str]:
            before = len(fault_proxy.requests)
            stats = copy(store, desc, LayoutStore(tmp_path / into, create=True), "v1", referrers=True, hooks=hooks)
            assert stats.referrers == [note.digest] and stats.manifests_copied == 2
            return [f"{r.method} {r.path.rsplit('/', 1)[1]}" for r in fault_proxy.requests[before:]
                    if "/manifests/" in r.path or "/referrers/" in r.path]

        assert manifest_requests(CopyHooks(in_hand={desc.digest: data}, listed=listed), "handed") == []
        asked = manifest_requests(CopyHooks(), "asked")  # the root, its listing, the note, the note's listing
        assert f"GET {desc.digest}" in asked and f"GET {note.digest}" in asked


def test_a_tag_read_with_one_get_is_checked_against_the_digest_the_registry_names(fault_proxy, unique_repo):
    desc = _push(fault_proxy.host, unique_repo)
    with open_repository(host=fault_proxy.host, repository=unique_repo) as store:
        before = len(fault_proxy.requests)
        got, data = store.read_manifest("v1")
        assert got == desc and len(data) == desc.size
        assert [(r.method, r.path.rsplit("/", 1)[1]) for r in fault_proxy.requests[before:]] == [("GET", "v1")]


def test_a_tag_whose_bytes_are_not_the_digest_the_registry_names_fails_the_pull(hostile, tmp_path):
    """The GET by tag is checked against the Docker-Content-Digest of the same answer: a
    registry (or a proxy) that sends other bytes than the digest it names is refused."""
    config = b"{}"
    manifest = Manifest(mediaType=OCI_MANIFEST, config=Descriptor.for_bytes(OCI_CONFIG, config),
                        layers=[]).to_json_bytes()

    def answer(h) -> None:
        if "/manifests/" in h.path:
            _send(h, 200, manifest, {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": "sha256:" + "b" * 64})
        else:
            _send(h, 200, config)

    server = hostile(answer)
    out = tmp_path / "out"
    code, _, err = ocibridge("pull", f"{server.host}/m:v1", str(out))
    assert "does not match its digest" in _one_error_line(code, err)
    assert not out.exists()


def test_a_registry_pull_into_a_directory_reads_and_parses_the_manifest_once(fault_proxy, unique_repo,
                                                                              tmp_path, monkeypatch):
    """The door's read (one GET, one parse, which the blob homes are learnt from) is handed down
    to the export and its copy: no second parse of the same manifest, no second read of it
    (not even from the store's memo), no second request."""
    from ocibridge.api.model_ops import pull
    from ocibridge.cli import main

    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 50_000)
    (model / "config.json").write_text("{}")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", "-q", str(model), ref]) == 0
    parsed: list[object] = []
    validate = Manifest.model_validate
    monkeypatch.setattr(Manifest, "model_validate",
                        classmethod(lambda cls, doc: parsed.append(doc) or validate(doc)))
    read_again = manifest_reads(monkeypatch)  # reads of a manifest from the store after the door's
    before = len(fault_proxy.requests)
    pull(ref, str(tmp_path / "out"))
    assert (tmp_path / "out" / "weights.bin").read_bytes() == b"w" * 50_000
    assert len(parsed) == 1 and read_again == []
    assert len([r for r in fault_proxy.requests[before:] if "/manifests/" in r.path]) == 1


def test_a_plain_artifact_pulled_into_a_directory_is_read_once(fault_proxy, unique_repo, tmp_path, monkeypatch):
    """An artifact of files of no model family (as ``oras push`` writes one): the door's read,
    refused as no model, is what the export is handed, so the pull asks for the manifest once
    (before: the GET, then a HEAD to resolve the tag again) and the store is not asked again."""
    from ocibridge.api.model_ops import pull
    from ocibridge.oci.mediatypes import OCI_EMPTY

    text = b"hello, files\n"
    layer = Descriptor.for_bytes("text/plain", text, annotations={"org.opencontainers.image.title": "hello.txt"})
    config = Descriptor.for_bytes(OCI_EMPTY, b"{}")
    data = Manifest(mediaType=OCI_MANIFEST, artifactType="application/vnd.example.files", config=config,
                    layers=[layer]).to_json_bytes()
    with open_repository(host=fault_proxy.host, repository=unique_repo) as store:
        store.push_blob(layer, io.BytesIO(text))
        store.push_blob(config, io.BytesIO(b"{}"))
        store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "v1")
    read_again = manifest_reads(monkeypatch)
    before = len(fault_proxy.requests)
    pull(f"{fault_proxy.host}/{unique_repo}:v1", str(tmp_path / "out"))
    assert (tmp_path / "out" / "hello.txt").read_bytes() == text
    manifests = [(r.method, r.path.rsplit("/", 1)[1]) for r in fault_proxy.requests[before:] if "/manifests/" in r.path]
    assert manifests == [("GET", "v1")] and read_again == []
