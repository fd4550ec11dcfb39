"""Image volumes for every reference model (carton, MLSteam, Ollama, directory) and a real registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ocibridge.copy import copy
from ocibridge.formats.carton import read_carton
from ocibridge.formats.directory import read_directory
from ocibridge.formats.mlsteam import read_mlarchive
from ocibridge.formats.ollama import parse_ollama_name, read_ollama
from ocibridge.formats.ollama.store import OllamaStore
from ocibridge.k8s import build_modelcar, check, mount, volume_yaml
from ocibridge.k8s.runtime import confine, crio_name
from ocibridge.modelpack.builder import ARTIFACT_TAG, build
from ocibridge.modelpack.extract import extract
from ocibridge.oci.mediatypes import parse_layer_media_type
from ocibridge.oci.models import Manifest, parse_manifest_bytes
from ocibridge.stores.layout import LayoutStore
from ocibridge.targets import open_store_target
from tests.modelgen import make_model, tree

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "reference"
CARTONS = sorted((SHARED / "carton").glob("*.carton"))


def _package(kind: str, tmp_path: Path):
    if kind.startswith("carton:"):
        return read_carton(SHARED / "carton" / kind.split(":", 1)[1])
    if kind == "mlsteam":
        from tests.test_mlsteam import make_sdk_archive_v2024

        return read_mlarchive(make_sdk_archive_v2024(tmp_path))
    if kind == "ollama":
        name = parse_ollama_name("tiny-safetensors")
        return read_ollama(OllamaStore(SHARED / "ollama" / "safetensors-store", name), name.tag)
    return read_directory(make_model(tmp_path / "model"))


def _links(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): str(p.readlink()) for p in root.rglob("*") if p.is_symlink()}


MODELS = [f"carton:{p.name}" for p in CARTONS] + ["mlsteam", "ollama", "directory"]


def test_reference_cartons_are_present():
    assert len(CARTONS) >= 2


@pytest.mark.parametrize("kind", MODELS)
def test_every_reference_model_on_both_runtimes(tmp_path, kind):
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(_package(kind, tmp_path)), ARTIFACT_TAG, layout, "v1")
    files = tmp_path / "files"
    extract(layout, "v1", files)
    manifest = parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1")))
    assert isinstance(manifest, Manifest)

    # CRI-O: one file per named layer, raw layers byte-identical to the model's files
    crio = check(layout, "v1", "cri-o")
    assert crio.will_mount and crio.kind == "artifact", crio.reasons
    named = {confine(n)[0]: d for d in manifest.layers if (n := crio_name(d))}
    assert {e.path for e in crio.tree if e.type == "file"} == set(named)
    out = tmp_path / "crio"
    mount(layout, "v1", out, "cri-o")
    for path, desc in named.items():
        kind_of = parse_layer_media_type(desc.mediaType)
        if kind_of is None or not kind_of.variant.is_tar:
            assert (out / path).read_bytes() == (files / path).read_bytes()
    unnamed = len(manifest.layers) - len(named)
    assert sum("CRI-O" in w and "skip" in w for w in crio.warnings) == unnamed

    # containerd refuses the artifact; the ModelCar image mounts on both with the same tree
    assert not check(layout, "v1", "containerd").will_mount
    build_modelcar(layout, "v1", tag="car")
    for runtime in ("cri-o", "containerd"):
        r = check(layout, "car", runtime)
        assert r.will_mount and r.diff_ids_verified and r.sub_path == "models", r.reasons
        mnt = tmp_path / f"car-{runtime}"
        mount(layout, "car", mnt, runtime)
        assert tree(mnt / "models") == tree(files)
        assert _links(mnt / "models") == _links(files)


def test_registry_modelcar_index_and_pod_yaml(tmp_path, registry, unique_repo):
    text = f"{registry.host}/k8s/{unique_repo}:v1"
    target = open_store_target(text, for_write=True)
    store = target.store
    model = make_model(tmp_path / "model")
    copy(build(read_directory(model)), ARTIFACT_TAG, store, "v1")
    top = build_modelcar(store, "v1", tag="car", index=True)
    assert store.resolve("car").digest == top.digest
    for runtime in ("cri-o", "containerd"):
        r = check(store, "car", runtime)
        assert r.will_mount and r.diff_ids_verified and r.kind == "image", r.reasons
    out = tmp_path / "mnt"
    mount(store, "car", out, "containerd")
    assert tree(out / "models") == tree(model)
    doc = yaml.safe_load(
        volume_yaml(store, "car", f"{registry.host}/k8s/{unique_repo}:car", runtime="containerd")
    )
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Pod"
    ref = doc["spec"]["volumes"][0]["image"]["reference"]
    assert ref == f"{registry.host}/k8s/{unique_repo}@{top.digest}"
    assert doc["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "models"
    pinned = open_store_target(ref)
    assert pinned.store.resolve(pinned.reference).digest == top.digest
