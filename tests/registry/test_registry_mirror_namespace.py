"""A mirror written with a namespace (`host/hub`, as registries.conf locations allow) serves the
registry's `repo` as `hub/repo`: real primary and mirror `docker-registry` processes."""

from __future__ import annotations

import uuid

from ocibridge.model.builder import build
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Kind
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.stores.registry.mirrors import mirror_location, open_for_reading
from ocibridge.transfer.copy import copy


def test_mirror_location() -> None:
    assert mirror_location("m:5000", "library/x") == ("m:5000", "library/x")
    assert mirror_location("m:5000/hub/", "library/x") == ("m:5000", "hub/library/x")


def test_namespaced_mirror_serves_the_read(registry, registry2, tmp_path, monkeypatch) -> None:
    conf = tmp_path / "registries.toml"
    conf.write_text(f'[registry."{registry.host}"]\nmirrors = ["{registry2.host}/hub"]\n')
    monkeypatch.setenv("OCIBRIDGE_REGISTRIES_CONF", str(conf))
    repo = f"ns/{uuid.uuid4().hex[:8]}"
    mirror = open_repository(parse_registry_reference(f"{registry2.host}/hub/{repo}"))
    package = ModelPackage(files=[ModelFile.from_bytes("w.safetensors", b"n" * 1024, Kind.WEIGHT)],
                           descriptor={"name": "tiny"}, config={"format": "safetensors"})
    digest = copy(build(package), "artifact", mirror, "v1").root.digest
    mirror.close()
    store = open_for_reading(parse_registry_reference(f"{registry.host}/{repo}:v1"))
    try:
        assert store.client.host == registry2.host and store.repository == f"hub/{repo}"
        assert store.resolve("v1").digest == digest
    finally:
        store.close()
