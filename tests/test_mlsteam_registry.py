"""An SDK-built .mlarchive through the real registry (docker-registry): push, export, same files."""

from __future__ import annotations

import uuid

from ocibridge.copy import copy
from ocibridge.formats.mlsteam import export_mlarchive, read_mlarchive
from ocibridge.modelpack.builder import ARTIFACT_TAG, build
from ocibridge.targets import open_store_target
from tests.test_mlsteam import make_sdk_archive_v2023, make_sdk_archive_v2024, zip_files


def test_sdk_archives_round_trip_through_the_registry(registry, tmp_path):
    repo = f"mlsteam/{uuid.uuid4().hex[:8]}"
    for tag, make in (("v2024", make_sdk_archive_v2024), ("v2023", make_sdk_archive_v2023)):
        archive = make(tmp_path / tag)
        art = build(read_mlarchive(archive))
        target = open_store_target(f"{registry.host}/{repo}:{tag}", for_write=True)
        copy(art, ARTIFACT_TAG, target.store, target.tag)

        reader = open_store_target(f"{registry.host}/{repo}:{tag}")
        desc = reader.store.resolve(reader.reference)
        assert desc.digest == art.descriptor.digest  # same manifest digest as built locally
        out = tmp_path / f"{tag}-back.mlarchive"
        export_mlarchive(reader.store, desc, out)
        assert zip_files(out) == zip_files(archive)
        # A second build of the same archive is already there: same digest, nothing new.
        assert build(read_mlarchive(archive)).descriptor.digest == desc.digest
