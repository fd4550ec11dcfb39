"""Image volumes for every reference model (carton, MLSteam, Ollama, directories) on a real registry:
`check` for both runtimes, ModelCar diff_ids recomputed from the registry's bytes, `mount` against
the extracted model, and the Pod YAML as a valid Pod pinned to a digest the registry serves."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest
import yaml

from ocibridge.k8s import build_modelcar, check, mount, volume_yaml
from ocibridge.k8s.runtime import crio_name
from ocibridge.kinds.carton import read_carton
from ocibridge.kinds.directory.source import read_directory
from ocibridge.kinds.mlsteam import read_mlarchive
from ocibridge.kinds.ollama import parse_ollama_name, read_ollama
from ocibridge.kinds.ollama.store import OllamaStore
from ocibridge.layers.apply import confine
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.model.extract import extract
from ocibridge.oci.mediatypes import OCI_LAYER_TAR, parse_layer_media_type
from ocibridge.oci.models import Index, Manifest, parse_manifest_bytes
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.transfer.copy import copy
from tests.k8s_pod import assert_valid_pod
from tests.modelgen import make_model, tree
from tests.support.data import data

SHARED = data()
CARTONS = sorted((SHARED / "carton").glob("*.carton"))


def _package(kind: str, tmp_path: Path):
    if kind.startswith("carton:"):
        return read_carton(SHARED / "carton" / kind.split(":", 1)[1])
    if kind == "mlsteam":
        from tests.kinds.test_mlsteam import make_sdk_archive_v2024

        return read_mlarchive(make_sdk_archive_v2024(tmp_path))
    if kind == "ollama":
        name = parse_ollama_name("tiny-safetensors")
        return read_ollama(OllamaStore(SHARED / "ollama" / "safetensors-store", name), name.tag)
    if kind == "reference-directory":  # the directory the reference torchscript carton was made from
        return read_directory(SHARED / "carton" / "inputs")
    return read_directory(make_model(tmp_path / "model"))  # nested dirs, an executable, symlink-free


def _links(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): str(p.readlink()) for p in root.rglob("*") if p.is_symlink()}


MODELS = [f"carton:{p.name}" for p in CARTONS] + ["mlsteam", "ollama", "directory", "reference-directory"]
HTTP = httpx.Client(timeout=30)


def test_reference_cartons_are_present():
    assert len(CARTONS) >= 2 and (SHARED / "carton" / "inputs" / "test_model.pt").is_file()


def _blob(registry, repo: str, digest: str) -> bytes:
    r = HTTP.get(f"http://{registry.host}/v2/{repo}/blobs/{digest}", follow_redirects=True)
    r.raise_for_status()
    return r.content


def _served_digest(registry, repo: str, ref: str) -> str:
    """What the registry itself answers for a manifest reference (HEAD, not our client)."""
    accept = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"
    r = HTTP.head(f"http://{registry.host}/v2/{repo}/manifests/{ref}", headers={"Accept": accept})
    assert r.status_code == 200, (ref, r.status_code)
    return r.headers["docker-content-digest"]


def _pod_reference(store, ref: str, text: str, runtime: str, sub_path: str | None) -> str:
    doc = yaml.safe_load(volume_yaml(store, ref, text, runtime=runtime))
    [pinned] = assert_valid_pod(doc)
    assert doc["spec"]["containers"][0]["volumeMounts"][0].get("subPath") == sub_path
    return pinned


@pytest.mark.parametrize("kind", MODELS)
def test_every_reference_model_on_both_runtimes(tmp_path, kind, registry, unique_repo):
    text = f"{registry.host}/{unique_repo}"
    store = open_store_target(f"{text}:v1", for_write=True).store
    copy(build(_package(kind, tmp_path)), ARTIFACT_TAG, store, "v1")
    files = tmp_path / "files"
    extract(store, "v1", files)
    manifest = parse_manifest_bytes(store.fetch_bytes(store.resolve("v1")))
    assert isinstance(manifest, Manifest)

    # CRI-O: one file per named layer, raw layers byte-identical to the model's files
    crio = check(store, "v1", "cri-o")
    assert crio.will_mount and crio.kind == "artifact", crio.reasons
    named = {confine(n)[0]: d for d in manifest.layers if (n := crio_name(d))}
    assert {e.path for e in crio.tree if e.type == "file"} == set(named)
    out = tmp_path / "crio"
    mount(store, "v1", out, "cri-o")
    for path, desc in named.items():
        kind_of = parse_layer_media_type(desc.mediaType)
        if kind_of is None or not kind_of.variant.is_tar:
            assert (out / path).read_bytes() == (files / path).read_bytes()
    unnamed = len(manifest.layers) - len(named)
    assert sum("skips it" in w or "is skipped by" in w for w in crio.warnings) == unnamed == crio.layers_hidden
    pinned = _pod_reference(store, "v1", f"{text}:v1", "cri-o", None)
    assert pinned == f"{text}@{_served_digest(registry, unique_repo, 'v1')}"

    # containerd refuses the artifact; the ModelCar index mounts on both with the model's tree
    assert not check(store, "v1", "containerd").will_mount
    top = build_modelcar(store, "v1", tag="car", index=True)
    index = parse_manifest_bytes(store.fetch_bytes(top))
    assert isinstance(index, Index)
    for entry in (e for e in index.manifests if e.platform is not None):
        image = parse_manifest_bytes(store.fetch_bytes(entry))
        config = json.loads(_blob(registry, unique_repo, image.config.digest))
        assert len(config["rootfs"]["diff_ids"]) == len(image.layers)
        for layer, diff_id in zip(image.layers, config["rootfs"]["diff_ids"], strict=True):
            data = _blob(registry, unique_repo, layer.digest)  # uncompressed tar: diff_id = sha256
            assert layer.mediaType == OCI_LAYER_TAR and f"sha256:{hashlib.sha256(data).hexdigest()}" == diff_id
    for runtime in ("cri-o", "containerd"):
        r = check(store, "car", runtime)
        assert r.will_mount and r.diff_ids_verified and r.sub_path == "models", r.reasons
        mnt = tmp_path / f"car-{runtime}"
        mount(store, "car", mnt, runtime)
        assert tree(mnt / "models") == tree(files)
        assert _links(mnt / "models") == _links(files)
        pinned = _pod_reference(store, "car", f"{text}:car", runtime, "models")
        assert pinned == f"{text}@{top.digest}" and _served_digest(registry, unique_repo, top.digest) == top.digest


@pytest.mark.parametrize("kind", [f"carton:{CARTONS[0].name}", "mlsteam"])
def test_archives_pull_back_through_a_modelcar_index(kind: str, tmp_path: Path) -> None:
    """One reference for both runtimes (`k8s modelcar --index`) still pulls back into the
    archive it came from: the index's ModelPack entry is exported, not refused."""
    from ocibridge.api.model_ops import pull, push

    source = CARTONS[0] if kind.startswith("carton:") else None
    if source is None:
        from tests.kinds.test_mlsteam import make_sdk_archive_v2024

        source = make_sdk_archive_v2024(tmp_path)
    layout = f"oci:{tmp_path}/layout"
    artifact = push(str(source), f"{layout}:model").descriptor
    store = open_store_target(f"{layout}:model").store
    index = build_modelcar(store, "model", tag="both", index=True)
    assert store.resolve("both").digest == index.digest != artifact.digest
    out = tmp_path / ("back" + source.suffix)
    assert pull(f"{layout}:both", str(out)).digest == artifact.digest
    assert pull(f"{layout}:both", str(tmp_path / "files")).digest == artifact.digest
    again = push(str(out), f"{layout}:again").descriptor  # the same archive content: the same artifact
    assert again.digest == artifact.digest
