"""Ollama bridge against a real registry (docker-registry): ollama:// sources and destinations."""

from __future__ import annotations

import json
import uuid

import pytest
from ollama_fixtures import gguf_store, snapshot

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.kinds.ollama import (
    OllamaStore,
    export_ollama,
    mount_sources,
    open_ollama_target,
    parse_ollama_name,
    read_ollama,
)
from ocibridge.model.builder import build
from ocibridge.oci.mediatypes import DOCKER_MANIFEST
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.oci.reference import parse_ollama_reference, parse_registry_reference
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.stores.registry.blobhomes import BLOB_HOMES
from ocibridge.transfer.copy import CopyHooks, copy


def _name() -> str:
    return f"m{uuid.uuid4().hex[:8]}"


@pytest.fixture
def served(registry, tmp_path):
    """A GGUF Ollama model pushed (as the Ollama manifest it is) into the registry."""
    src = tmp_path / "models"
    manifest_path = gguf_store(src, tmp_path, model="tiny")
    model = _name()
    ref = parse_registry_reference(f"{registry.host}/library/{model}:latest")
    copy(OllamaStore(src, parse_ollama_name("tiny")), "latest", open_repository(ref), "latest")
    return src, manifest_path, model


def test_registry_serves_the_ollama_manifest_unchanged(registry, served):
    _, manifest_path, model = served
    target = open_ollama_target(f"ollama://{registry.host}/library/{model}:latest")
    desc = target.store.resolve("latest")
    assert desc.mediaType == DOCKER_MANIFEST
    assert target.store.fetch_bytes(desc) == manifest_path.read_bytes()


def test_read_from_ollama_registry(registry, served):
    src, _, model = served
    text = f"ollama://{registry.host}/library/{model}:latest"
    target = open_ollama_target(text)
    # a registry store knows no Ollama name: the caller names the model (as push does)
    package = read_ollama(target.store, target.reference, parse_ollama_reference(text).name)
    assert "name" not in read_ollama(target.store, target.reference).descriptor
    local = read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")
    assert {(f.path, f.digest) for f in package.files} == {(f.path, f.digest) for f in local.files}
    assert package.config == local.config
    assert package.config["format"] == "gguf" and package.config["architecture"] == "llama"
    assert package.descriptor["name"] == model
    assert package.annotations["io.ollama.name"] == f"{registry.host}/library/{model}:latest"


def test_short_loopback_name_means_library(registry, served):
    _, _, model = served
    target = open_ollama_target(f"ollama://{registry.host}/{model}")
    assert target.store.resolve("latest").mediaType == DOCKER_MANIFEST


def test_registry_round_trip_keeps_digests_and_mounts(registry, served, tmp_path):
    """ollama:// → ModelPack artifact in another repository (blobs mounted, not uploaded) →
    layout → a fresh local Ollama store, identical to the original; and back to ollama://."""
    src, manifest_path, model = served
    origin = open_ollama_target(f"ollama://{registry.host}/library/{model}:latest")
    package = read_ollama(origin.store, origin.reference)
    art_ref = parse_registry_reference(f"{registry.host}/modelpack/{model}:v1")
    art_repo = open_repository(art_ref)
    mounts = mount_sources(origin.store, origin.reference)
    stats = copy(build(package), "artifact", art_repo, "v1", hooks=CopyHooks(mounts=mounts))
    assert stats.blobs_mounted == 8  # 7 layers + the Ollama config
    assert stats.blobs_copied == 2 and stats.blobs_skipped == 0
    assert stats.bytes_copied < 4096  # only the ModelPack config and ollama-manifest.json

    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(art_repo, "v1", layout, "v1")
    out = tmp_path / "restored"
    n = parse_ollama_name("tiny")
    export_ollama(layout, layout.resolve("v1"), StoreTarget(OllamaStore(out, n, create=True),
                                                            "latest", "latest", "x"))
    assert snapshot(out) == snapshot(src)

    # Straight from the registry artifact to another Ollama registry repository.
    back = open_ollama_target(f"ollama://{registry.host}/library/{model}-back:latest", for_write=True)
    desc = export_ollama(art_repo, art_repo.resolve("v1"), back).root
    assert back.store.fetch_bytes(back.store.resolve("latest")) == manifest_path.read_bytes()
    assert desc.digest == back.store.resolve("latest").digest
    again = read_ollama(back.store, "latest")
    assert {f.digest for f in again.files} == {f.digest for f in package.files}


def test_artifact_manifest_lists_the_ollama_digests(registry, served):
    _, manifest_path, model = served
    origin = open_ollama_target(f"ollama://{registry.host}/library/{model}:latest")
    art = build(read_ollama(origin.store, origin.reference))
    manifest = parse_manifest_bytes(art.manifest_bytes)
    ollama = json.loads(manifest_path.read_bytes())
    digests = {la.digest for la in manifest.layers}
    assert {la["digest"] for la in ollama["layers"]} <= digests
    assert ollama["config"]["digest"] in digests


def test_missing_model_in_registry(registry):
    target = open_ollama_target(f"ollama://{registry.host}/library/{_name()}:latest")
    with pytest.raises(NotFound):
        read_ollama(target.store, target.reference)


def test_failed_export_to_registry_pushes_no_manifest(registry, served, tmp_path):
    src, _, model = served
    package = read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(package), "artifact", layout, "v1")
    manifest = parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1")))
    model_layer = next(la for la in manifest.layers if la.size > 1000)
    path = layout.blob_path(model_layer.digest)
    path.write_bytes(b"\0" * model_layer.size)  # corrupt the GGUF blob in the layout
    dest = open_ollama_target(f"ollama://{registry.host}/library/{_name()}:latest", for_write=True)
    # The registry holds the genuine blob (pushed by `served`): this process would mount it from
    # there and never read the corrupt copy. Forget that, so the layout's bytes are read.
    BLOB_HOMES.forget_all()
    with pytest.raises(OcibridgeError, match="(?i)digest"):
        export_ollama(layout, layout.resolve("v1"), dest)
    with pytest.raises(NotFound):
        dest.store.resolve("latest")


def test_ollama_registry_model_pulled_into_local_store(registry, served, tmp_path):
    """`ocibridge pull ollama://HOST/NAME ollama:NAME`: an Ollama manifest is copied as it is."""
    src, _, model = served
    origin = open_ollama_target(f"ollama://{registry.host}/library/{model}:latest")
    out = tmp_path / "local"
    dst = OllamaStore(out, parse_ollama_name("tiny"), create=True)
    export_ollama(origin.store, origin.store.resolve("latest"),
                  StoreTarget(dst, "latest", "latest", "ollama:tiny"))
    assert snapshot(out) == snapshot(src)


def test_push_from_an_ollama_registry_names_the_model_as_the_reference_does(registry, served, tmp_path):
    """The CLI's push names the ModelPack config after ollama://HOST/NAME (the registry store
    itself carries no Ollama name)."""
    from ocibridge.cli import main

    _, _, model = served
    assert main(["push", f"ollama://{registry.host}/library/{model}:latest", f"oci:{tmp_path / 'l'}:v1", "-q"]) == 0
    layout = LayoutStore(tmp_path / "l")
    manifest = parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1")))
    config = json.loads(layout.fetch_bytes(manifest.config))
    assert config["descriptor"]["name"] == model
    assert manifest.annotations["io.ollama.name"] == f"{registry.host}/library/{model}:latest"
