"""A model of no files (issue 75: a Hub repository whose last file was deleted) is built as
image-spec 1.1 asks: its one layer the empty descriptor, that descriptor's digest its one
ModelPack diffId; the same (empty) content gives the same digest; push of an empty directory
is still refused; pull's path judgement sees no file in it."""

from __future__ import annotations

import pytest

from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.errors import SourceError
from ocibridge.model.builder import BuildOptions
from ocibridge.model.known import plan_known
from ocibridge.model.paths import ArtifactPaths
from ocibridge.model.validate import validate_manifest
from ocibridge.oci.empty import EMPTY_DIGEST, empty_layer, is_empty_model
from ocibridge.oci.models import Manifest


def _empty(annotations: dict[str, str] | None = None):
    options = BuildOptions(annotations=annotations or {"io.ocibridge.commit.summary": "gone"}, allow_empty=True)
    return plan_known({}, "acme/m", options, ChunkPolicy(), excludes=()).artifact()


def test_an_empty_model_is_the_empty_descriptor_and_reproducible():
    built = _empty()
    assert built.manifest.layers == [empty_layer()]
    assert b'"data":"e30="' in built.manifest_bytes
    assert b'"diffIds":["' + EMPTY_DIGEST.encode() + b'"]' in built.config_bytes
    assert _empty().descriptor.digest == built.descriptor.digest
    assert _empty({"io.ocibridge.commit.summary": "other"}).descriptor.digest != built.descriptor.digest
    assert built.fetch_bytes(empty_layer()) == b"{}"  # the copy finds the layer's blob


def test_validate_takes_it_and_pull_finds_no_file():
    built = _empty()
    manifest = Manifest.model_validate_json(built.manifest_bytes)
    assert is_empty_model(manifest.layers)
    warnings: list[str] = []
    assert validate_manifest(built, manifest, warnings) == []
    assert warnings == []
    paths = ArtifactPaths(manifest)
    assert (paths.raw, paths.tars, paths.changesets) == ([], [], [])


def test_push_of_no_files_is_still_refused():
    with pytest.raises(SourceError, match="no files"):
        plan_known({}, "acme/m", BuildOptions(), ChunkPolicy(), excludes=()).artifact()
