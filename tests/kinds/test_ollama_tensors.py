"""Ollama's tensor-per-layer models (x/create since early 2026: one ``image.tensor`` layer per
tensor, each blob a whole safetensors file, beside ``image.json`` layers; ``name`` on the layer
is the file): a local store and an Ollama registry → ModelPack → Ollama with the same digests,
and the ModelPack read by load_tensors, ``ocibridge cat``, the mount and serve, each tensor
file as ``NAME.safetensors``. Fixtures: tests/ollama_fixtures.py (image_store, llm_store)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import hf_hub_download
from mounting import Mount, mount_env
from ollama_fixtures import TENSOR, image_store, llm_store, snapshot
from safetensors.numpy import load as st_load
from serving import serving

import ocibridge
from ocibridge.cli import main
from ocibridge.errors import SourceError
from ocibridge.kinds.ollama import (
    OllamaStore,
    export_ollama,
    open_ollama_target,
    parse_ollama_name,
    read_ollama,
)
from ocibridge.model.builder import build
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy

MODELS = {"tinyimage": image_store, "tinyllm": llm_store}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ollama-tensors") / "models"
    for make in MODELS.values():
        make(root)
    return root


def ollama_manifest(store: Path, model: str) -> dict:
    return json.loads((store / f"manifests/registry.ollama.ai/library/{model}/latest").read_bytes())


def blob(store: Path, digest: str) -> bytes:
    return (store / "blobs" / digest.replace(":", "-")).read_bytes()


def tensor_layers(store: Path, model: str) -> list[dict]:
    return [la for la in ollama_manifest(store, model)["layers"] if la["mediaType"] == TENSOR]


def only(store: Path, model: str) -> Path:
    """A store holding ``model`` alone (snapshots compare whole stores)."""
    one = store.parent / f"only-{model}"
    if not one.exists():
        MODELS[model](one)
    return one


@pytest.fixture(scope="module")
def published(registry, store) -> dict[str, str]:
    """Each model as a ModelPack artifact in the registry: model -> (repository prefix, reference)."""
    prefix = f"ot{uuid.uuid4().hex[:8]}"
    out = {}
    for model in MODELS:
        package = read_ollama(OllamaStore(store, parse_ollama_name(model)), "latest")
        ref = f"{registry.host}/{prefix}/acme/{model}:latest"
        copy(build(package), "artifact", open_repository(parse_registry_reference(ref)), "latest")
        out[model] = ref
    return {"prefix": prefix, **out}


@pytest.mark.parametrize("model", MODELS)
def test_local_store_round_trip_keeps_every_digest_and_names_tensor_files_safetensors(store, model, tmp_path):
    src = only(store, model)
    n = parse_ollama_name(model)
    package = read_ollama(OllamaStore(src, n), "latest")
    paths = {f.path: f.digest for f in package.files}
    for layer in ollama_manifest(src, model)["layers"]:
        if "name" in layer:
            tensor = layer["mediaType"] == TENSOR
            assert paths[layer["name"] + (".safetensors" if tensor else "")] == layer["digest"]
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(package), "artifact", layout, "v1")
    out = tmp_path / "restored"
    export_ollama(layout, layout.resolve("v1"), StoreTarget(OllamaStore(out, n, create=True), "latest", "latest", "x"))
    assert snapshot(out) == snapshot(src)  # the manifest (with each name) and every blob, byte for byte


def test_registry_round_trip_keeps_the_manifest_digest(registry, store, tmp_path):
    """ollama://HOST/NAME → ModelPack artifact → another ollama:// repository and a local store:
    the same manifest bytes (so the same digest) and blobs."""
    model = "tinyimage"
    src = only(store, model)
    served = f"ollama://{registry.host}/library/m{uuid.uuid4().hex[:8]}:latest"
    copy(OllamaStore(src, parse_ollama_name(model)), "latest", open_ollama_target(served, for_write=True).store,
         "latest")
    origin = open_ollama_target(served)
    package = read_ollama(origin.store, origin.reference)
    names = {la["name"] + ".safetensors" for la in tensor_layers(src, model)}
    assert names <= {f.path for f in package.files}
    art = open_repository(parse_registry_reference(f"{registry.host}/modelpack/m{uuid.uuid4().hex[:8]}:v1"))
    copy(build(package), "artifact", art, "v1")
    back = open_ollama_target(f"ollama://{registry.host}/library/m{uuid.uuid4().hex[:8]}:latest", for_write=True)
    desc = export_ollama(art, art.resolve("v1"), back).root
    manifest_bytes = (src / f"manifests/registry.ollama.ai/library/{model}/latest").read_bytes()
    assert back.store.fetch_bytes(back.store.resolve("latest")) == manifest_bytes
    assert desc.digest == origin.store.resolve("latest").digest
    out = tmp_path / "local"
    export_ollama(art, art.resolve("v1"), StoreTarget(OllamaStore(out, parse_ollama_name(model), create=True),
                                                      "latest", "latest", "x"))
    assert snapshot(out) == snapshot(src)


def expected_tensors(store: Path, model: str, component: str = "") -> dict[str, np.ndarray]:
    """safetensors' own reading of each tensor blob (scales and biases of quantized ones included)."""
    want: dict[str, np.ndarray] = {}
    for layer in tensor_layers(store, model):
        if layer["name"].startswith(component):
            want.update(st_load(blob(store, layer["digest"])))
    return want


def assert_same(got: dict, want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array), name


@pytest.mark.parametrize("model", MODELS)
def test_load_tensors_reads_every_tensor_blob(published, store, model):
    assert_same(ocibridge.load_tensors(published[model], warn=None), expected_tensors(store, model))


def test_load_tensors_chooses_a_component(published, store):
    got = ocibridge.load_tensors(published["tinyimage"], files="transformer/*", warn=None)
    assert_same(got, expected_tensors(store, "tinyimage", "transformer/"))
    assert "blocks.0.attn.to_q.weight.scale" in got  # the quantizer's companions come along


def test_cat_prints_a_tensor_file(published, store, capsysbinary):
    layer = tensor_layers(store, "tinyimage")[3]
    assert layer["name"] == "transformer/blocks.0.attn.to_q.weight"
    assert main(["cat", published["tinyimage"], layer["name"] + ".safetensors"]) == 0
    assert capsysbinary.readouterr().out == blob(store, layer["digest"])


def test_the_mount_shows_each_tensor_as_a_safetensors_file(published, store, tmp_path):
    with Mount(published["tinyllm"], tmp_path / "mnt", mount_env(tmp_path), tmp_path / "mount.log") as m:
        got: dict[str, np.ndarray] = {}
        for layer in tensor_layers(store, "tinyllm"):
            data = (m.where / (layer["name"] + ".safetensors")).read_bytes()
            assert data == blob(store, layer["digest"])
            got.update(st_load(data))
        assert json.loads((m.where / "config.json").read_bytes())["model_type"] == "llama"
    assert_same(got, expected_tensors(store, "tinyllm"))


def test_a_hub_client_downloads_a_tensor_file_from_serve(registry, published, store, tmp_path):
    layer = tensor_layers(store, "tinyimage")[1]
    with serving([f"{registry.host}/{published['prefix']}"]) as s:
        path = hf_hub_download("acme/tinyimage", layer["name"] + ".safetensors", cache_dir=tmp_path / "hub",
                               endpoint=s.url)
        config = hf_hub_download("acme/tinyimage", "text_encoder/config.json", cache_dir=tmp_path / "hub",
                                 endpoint=s.url)
    assert Path(path).read_bytes() == blob(store, layer["digest"])
    assert "model.layers.0.self_attn.q_proj.weight.scale" in st_load(Path(path).read_bytes())
    assert json.loads(Path(config).read_bytes())["model_type"] == "qwen3"


def test_a_tensor_and_a_file_of_the_same_path_are_refused(tmp_path):
    """``x`` as a tensor layer is the file ``x.safetensors``: a json layer of that name clashes."""
    from ollama_fixtures import JSON_LAYER, tensor_blob, write_tensor_store

    t = tensor_blob({"x": np.zeros(2, np.float16)})
    write_tensor_store(tmp_path, "clash", [(TENSOR, "x", t), (JSON_LAYER, "x.safetensors", b"{}")], {})
    with pytest.raises(SourceError, match="x.safetensors"):
        read_ollama(OllamaStore(tmp_path, parse_ollama_name("clash")), "latest")


def test_a_directory_pull_pushed_again_restores_the_ollama_model(store, tmp_path, monkeypatch):
    """push ollama:NAME → pull DIR (each tensor a ``.safetensors`` file, in its component's
    folder) → push DIR → pull ollama:NAME into a fresh store: the same manifest and blobs."""
    model = "tinyimage"
    src = only(store, model)
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    assert main(["push", f"ollama:{model}", f"oci:{tmp_path / 'a'}:x", "-q"]) == 0
    assert main(["pull", f"oci:{tmp_path / 'a'}:x", str(tmp_path / "dir"), "-q"]) == 0
    first = tensor_layers(src, model)[0]
    pulled = tmp_path / "dir" / (first["name"] + ".safetensors")
    assert pulled.read_bytes() == blob(src, first["digest"])
    assert main(["push", str(tmp_path / "dir"), f"oci:{tmp_path / 'b'}:y", "-q"]) == 0
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "fresh"))
    assert main(["pull", f"oci:{tmp_path / 'b'}:y", f"ollama:{model}", "-q"]) == 0
    assert snapshot(tmp_path / "fresh") == snapshot(src)
