"""Ollama bridge, local store: names, GGUF headers, reading, export, and hostile input."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import gguf
import pytest
from ollama_fixtures import (
    DOCKER_CONFIG,
    gguf_param_count,
    gguf_store,
    gojson,
    snapshot,
    write_gguf,
    write_store,
)

from ocibridge.errors import (
    DigestMismatch,
    InvalidReference,
    NotFound,
    SourceError,
    UnsafePath,
)
from ocibridge.kinds.directory.source import read_directory
from ocibridge.kinds.ollama import (
    CONFIG_FILE,
    MANIFEST_FILE,
    NotAnOllamaModel,
    OllamaStore,
    export_ollama,
    open_ollama_target,
    parse_ollama_name,
    read_gguf_header,
    read_ollama,
)
from ocibridge.model.builder import build
from ocibridge.model.gguf_header import format_param_count
from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import Descriptor, parse_manifest_bytes
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.support.data import data

REFERENCE = data("ollama")
REF_STORE = REFERENCE / "safetensors-store"


# -- names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tiny", ("registry.ollama.ai", "library", "tiny", "latest")),
        ("tiny:q4", ("registry.ollama.ai", "library", "tiny", "q4")),
        ("me/tiny:1.0", ("registry.ollama.ai", "me", "tiny", "1.0")),
        ("example.com/me/tiny", ("example.com", "me", "tiny", "latest")),
        ("127.0.0.1:5000/library/tiny:latest", ("127.0.0.1:5000", "library", "tiny", "latest")),
        ("localhost:5000/tiny:v2", ("localhost:5000", "library", "tiny", "v2")),
        ("ollama://hf.co/org/Model-GGUF:Q4_K_M", ("hf.co", "org", "Model-GGUF", "Q4_K_M")),
    ],
)
def test_parse_ollama_name(text, expected):
    n = parse_ollama_name(text)
    assert (n.host, n.namespace, n.model, n.tag) == expected


@pytest.mark.parametrize("bad", ["", "a/b/c/d", "../x", "library/..", "tiny:../x", "x y", "a//b",
                                 "tiny@sha256:abc"])
def test_parse_ollama_name_rejects(bad):
    with pytest.raises(InvalidReference):
        parse_ollama_name(bad)


# -- GGUF header ---------------------------------------------------------------------------
def test_gguf_header_agrees_with_gguf_reader(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", file_type=gguf.LlamaFileType.MOSTLY_Q8_0)
    with open(path, "rb") as f:
        header = read_gguf_header(f)
        consumed = f.tell()
    reader = gguf.GGUFReader(str(path))
    assert header.architecture == "llama"
    assert header.tensor_count == len(reader.tensors)
    assert header.parameter_count == sum(int(t.n_elements) for t in reader.tensors)
    assert header.parameter_count == gguf_param_count()
    assert header.quantization == "Q8_0"
    assert header.param_size == "408"
    # Only the header is read: the first tensor's data starts after what we consumed.
    assert consumed <= reader.data_offset < path.stat().st_size


def test_gguf_header_size_label_and_fallback(tmp_path):
    labelled = write_gguf(tmp_path / "a.gguf", size_label="135M", file_type=None)
    with open(labelled, "rb") as f:
        h = read_gguf_header(f)
    assert h.param_size == "135M"
    assert h.quantization == "F16"  # no general.file_type: the dominant tensor type
    assert format_param_count(8_030_261_248) == "8B"
    assert format_param_count(134_515_008) == "135M"
    assert format_param_count(1_543_714_304) == "1.5B"


@pytest.mark.parametrize("damage", ["magic", "truncate", "huge-count"])
def test_gguf_header_rejects_garbage(tmp_path, damage):
    data = bytearray(write_gguf(tmp_path / "m.gguf").read_bytes())
    if damage == "magic":
        data[:4] = b"GGUX"
    elif damage == "truncate":
        data = data[:100]
    else:
        data[16:24] = (1 << 40).to_bytes(8, "little")  # key/value count
    with pytest.raises(SourceError):
        read_gguf_header(io.BytesIO(bytes(data)))


# -- reading -------------------------------------------------------------------------------
def _roundtrip(src_root: Path, name: str, tmp_path: Path) -> tuple[Path, LayoutStore, Descriptor]:
    """read → build → copy to a layout → export to a fresh store dir; returns that dir."""
    n = parse_ollama_name(name)
    package = read_ollama(OllamaStore(src_root, n), n.tag)
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(package), "artifact", layout, "v1")
    out = tmp_path / "restored"
    dst = OllamaStore(out, n, create=True)
    desc = layout.resolve("v1")
    export_ollama(layout, desc, StoreTarget(dst, n.tag, n.tag, f"ollama:{name}"))
    return out, layout, desc


def test_reference_safetensors_store_round_trips_byte_identical(tmp_path):
    out, layout, desc = _roundtrip(REF_STORE, "tiny-safetensors", tmp_path)
    assert snapshot(out) == snapshot(REF_STORE)
    manifest = parse_manifest_bytes(layout.fetch_bytes(desc))
    assert manifest.artifactType == Family.CNAI.artifact_type
    paths = {la.annotations[Family.CNAI.filepath_key]: la for la in manifest.layers}
    ollama = json.loads((REF_STORE / "manifests/registry.ollama.ai/library/tiny-safetensors/latest")
                        .read_bytes())
    for layer in ollama["layers"]:
        if "name" in layer:  # tensor and json layers keep their names and their digests
            tensor = layer["mediaType"].endswith("tensor")  # a safetensors file: named so
            path = layer["name"] + (".safetensors" if tensor else "")
            assert paths[path].digest == layer["digest"]
            kind = "weight" if tensor else "weight.config"
            assert paths[path].mediaType == f"application/vnd.cnai.model.{kind}.v1.raw"
    assert paths["template"].digest == ollama["layers"][6]["digest"]
    assert paths[CONFIG_FILE].digest == ollama["config"]["digest"]
    config = json.loads(layout.fetch_bytes(manifest.config))
    assert config["config"] == {"format": "safetensors", "architecture": "llama"}
    assert config["descriptor"]["name"] == "tiny-safetensors"
    assert manifest.annotations["io.ollama.name"] == "registry.ollama.ai/library/tiny-safetensors:latest"


def test_gguf_store_maps_layers_and_header(tmp_path):
    src = tmp_path / "models"
    gguf_store(src, tmp_path, file_type=gguf.LlamaFileType.MOSTLY_Q8_0, size_label="408")
    n = parse_ollama_name("tiny")
    package = read_ollama(OllamaStore(src, n), "latest")
    by_path = {f.path: f for f in package.files}
    assert {p: f.kind.value for p, f in by_path.items()} == {
        "model.gguf": "weight", "adapter.gguf": "weight", "template": "weight.config",
        "system": "weight.config", "params.json": "weight.config",
        "messages.json": "weight.config", "license": "doc",
        MANIFEST_FILE: "weight.config", CONFIG_FILE: "weight.config",
    }
    model_bytes = (tmp_path / "tiny.gguf").read_bytes()
    assert by_path["model.gguf"].digest == "sha256:" + hashlib.sha256(model_bytes).hexdigest()
    assert package.config == {"format": "gguf", "architecture": "llama", "paramSize": "408",
                              "quantization": "Q8_0"}
    assert package.descriptor == {"name": "tiny", "version": "latest", "family": "llama"}


def test_gguf_store_round_trips_through_layout(tmp_path):
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    out, layout, desc = _roundtrip(src, "tiny", tmp_path)
    assert snapshot(out) == snapshot(src)
    # The ModelPack artifact holds the GGUF blob under its Ollama digest, as a raw weight.
    manifest = parse_manifest_bytes(layout.fetch_bytes(desc))
    model = next(la for la in manifest.layers
                 if la.annotations[Family.CNAI.filepath_key] == "model.gguf")
    assert model.mediaType == "application/vnd.cnai.model.weight.v1.raw"
    assert (src / "blobs" / ("sha256-" + model.digest.split(":")[1])).is_file()
    # Exporting again into the same store changes nothing and copies nothing new.
    before = snapshot(out)
    n = parse_ollama_name("tiny")
    export_ollama(layout, desc, StoreTarget(OllamaStore(out, n), "latest", "latest", "x"))
    assert snapshot(out) == before


def _tiny_in_a_layout(tmp_path: Path) -> tuple[Path, LayoutStore]:
    """(an Ollama store at tmp_path/models holding tiny:latest, a layout holding it as v1)."""
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")), "artifact", layout, "v1")
    return src, layout


def test_export_under_another_name_and_tag(tmp_path):
    src, layout = _tiny_in_a_layout(tmp_path)
    m = parse_ollama_name("me/renamed:v2")
    export_ollama(layout, layout.resolve("v1"), StoreTarget(OllamaStore(src, m), "v2", "v2", "x"))
    a = src / "manifests/registry.ollama.ai/library/tiny/latest"
    b = src / "manifests/registry.ollama.ai/me/renamed/v2"
    assert a.read_bytes() == b.read_bytes()
    assert OllamaStore(src, m).tags() == ["v2"]


def test_seed_media_type_parameter_form(tmp_path):
    """The documented-only form: name/dtype/shape on the media type, config as a layer."""
    src = tmp_path / "models"
    layers = [
        ("application/vnd.ollama.image.config; type=safetensors", b'{"architectures":[]}', {}),
        ("template", b"{{ .Prompt }}", {}),
        ("application/vnd.ollama.image.tensor; name=input; dtype=F32; shape=1,2,3", b"\0" * 24, {}),
        ("application/vnd.ollama.image.tensor; name=output; dtype=I32; shape=4,5,6", b"\1" * 48, {}),
    ]
    write_store(src, ("registry.ollama.ai", "library", "seed", "latest"), layers, config=None)
    n = parse_ollama_name("seed")
    package = read_ollama(OllamaStore(src, n), "latest")
    assert {f.path: f.kind.value for f in package.files} == {
        "ollama-layer-config.json": "weight.config", "template": "weight.config",
        "input": "weight", "output": "weight", MANIFEST_FILE: "weight.config",
    }
    out, _, _ = _roundtrip(src, "seed", tmp_path)
    assert snapshot(out) == snapshot(src)


# -- generic GGUF artifacts ------------------------------------------------------------------
def _export_directory(tmp_path, model_dir, name: str, tag: str = "latest") -> None:
    """``model_dir`` pushed to a layout and exported into the Ollama store at tmp_path/models as
    ``name:tag``."""
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(model_dir)), "artifact", layout, "v1")
    target = OllamaStore(tmp_path / "models", parse_ollama_name(f"{name}:{tag}"), create=True)
    export_ollama(layout, layout.resolve("v1"), StoreTarget(target, tag, tag, "x"))


def test_generic_gguf_artifact_becomes_an_ollama_model(tmp_path):
    model_dir = tmp_path / "dir"
    model_dir.mkdir()
    write_gguf(model_dir / "tinyllama-q8.gguf", file_type=gguf.LlamaFileType.MOSTLY_Q8_0)
    (model_dir / "LICENSE").write_text("Apache-2.0\n")
    (model_dir / "template").write_text("{{ .Prompt }}")
    (model_dir / "README.md").write_text("# not for Ollama\n")
    out = tmp_path / "models"
    _export_directory(tmp_path, model_dir, "generic", "q8")
    manifest = json.loads((out / "manifests/registry.ollama.ai/library/generic/q8").read_bytes())
    kinds = [la["mediaType"].rsplit(".", 1)[1] for la in manifest["layers"]]
    assert kinds == ["model", "template", "license"]
    gguf_digest = "sha256:" + hashlib.sha256((model_dir / "tinyllama-q8.gguf").read_bytes()).hexdigest()
    assert manifest["layers"][0]["digest"] == gguf_digest
    for blob in [manifest["config"], *manifest["layers"]]:
        data = (out / "blobs" / blob["digest"].replace(":", "-")).read_bytes()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == blob["digest"]
        assert len(data) == blob["size"]
    config = json.loads((out / "blobs" / manifest["config"]["digest"].replace(":", "-")).read_bytes())
    assert manifest["config"]["mediaType"] == DOCKER_CONFIG
    assert config["model_format"] == "gguf"
    assert config["model_family"] == "llama" and config["file_type"] == "Q8_0"
    assert config["rootfs"]["diff_ids"] == [la["digest"] for la in manifest["layers"]]
    # and the result reads back as an Ollama model
    package = read_ollama(OllamaStore(out, parse_ollama_name("generic:q8")), "q8")
    assert package.config["quantization"] == "Q8_0"


def test_artifact_without_gguf_is_refused(tmp_path):
    model_dir = tmp_path / "dir"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"x" * 100)
    out = tmp_path / "models"
    with pytest.raises(SourceError, match="no GGUF"):
        _export_directory(tmp_path, model_dir, "nogguf")
    assert not (out / "manifests").exists() or not any((out / "manifests").rglob("*"))


# -- targets -------------------------------------------------------------------------------
def test_open_ollama_target_uses_ollama_models(tmp_path, monkeypatch):
    src = tmp_path / "models"
    gguf_store(src, tmp_path, model="tiny", tag="q8")
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    target = open_store_target("ollama:tiny:q8")
    assert isinstance(target.store, OllamaStore)
    assert (target.reference, target.tag) == ("q8", "q8")
    package = read_ollama(target.store, target.reference)
    assert package.descriptor["version"] == "q8"
    with pytest.raises(NotFound, match="no model tagged 'latest'.*q8"):
        read_ollama(open_ollama_target("ollama:tiny").store, "latest")


def test_store_protocol_basics(tmp_path):
    src = tmp_path / "models"
    path = gguf_store(src, tmp_path)
    store = OllamaStore(src, parse_ollama_name("tiny"))
    desc = store.resolve("latest")
    assert desc.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert store.resolve(desc.digest) == desc
    assert store.fetch_bytes(desc) == path.read_bytes()
    assert store.exists(desc) and store.tags() == ["latest"]
    # copy() between two Ollama stores (an Ollama manifest, not a ModelPack one) works
    other = OllamaStore(tmp_path / "other", parse_ollama_name("tiny"), create=True)
    copy(store, "latest", other, "latest")
    assert snapshot(tmp_path / "other") == snapshot(src)


# -- hostile and broken input: one clear error, nothing half-written ---------------------------
def _corrupt_manifest(src: Path, mutate) -> None:
    path = src / "manifests/registry.ollama.ai/library/tiny/latest"
    doc = json.loads(path.read_bytes())
    mutate(doc)
    path.write_bytes(gojson(doc) + b"\n")


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda d: d["layers"].__setitem__(0, "nope"), SourceError, "malformed"),
        (lambda d: d["layers"][0].__setitem__("mediaType", "text/plain"), SourceError, "not an Ollama"),
        (lambda d: d["layers"][0].__setitem__("digest", "sha256:zz"), SourceError, "malformed"),
        (lambda d: d.__setitem__("layers", []), SourceError, "no layers"),
        (lambda d: d["layers"].append({"mediaType": "application/vnd.ollama.image.tensor",
                                       "digest": d["layers"][2]["digest"],
                                       "size": d["layers"][2]["size"], "name": "../../etc/x"}),
         UnsafePath, "escapes"),
        (lambda d: d["layers"].append({"mediaType": "application/vnd.ollama.image.json",
                                       "digest": d["layers"][2]["digest"],
                                       "size": d["layers"][2]["size"], "name": "/etc/passwd"}),
         UnsafePath, "absolute"),
        (lambda d: d["layers"][0].__setitem__("digest", "sha256:" + "0" * 64), NotFound, "missing"),
    ],
)
def test_bad_manifests_fail_before_anything_is_written(tmp_path, mutate, error, match):
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    _corrupt_manifest(src, mutate)
    with pytest.raises(error, match=match):
        read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")


def test_manifest_not_json(tmp_path):
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    (src / "manifests/registry.ollama.ai/library/tiny/latest").write_bytes(b"{not json")
    with pytest.raises(SourceError, match="not valid JSON"):
        read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")


def test_model_layer_that_is_not_gguf(tmp_path):
    src = tmp_path / "models"
    write_store(src, ("registry.ollama.ai", "library", "tiny", "latest"),
                [("model", b"PK\x03\x04 not a gguf at all", {})], config={})
    with pytest.raises(SourceError, match="not a GGUF"):
        read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")


def test_corrupt_blob_is_caught_on_copy_and_no_tag_is_written(tmp_path):
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    n = parse_ollama_name("tiny")
    package = read_ollama(OllamaStore(src, n), "latest")
    system = next(f for f in package.files if f.path == "system")
    blob = src / "blobs" / system.digest.replace(":", "-")
    blob.write_bytes(b"Y" * blob.stat().st_size)  # same size, other content
    layout = LayoutStore(tmp_path / "layout", create=True)
    with pytest.raises(DigestMismatch):
        copy(build(package), "artifact", layout, "v1")
    assert layout.tags() == []
    assert not list((tmp_path / "layout").rglob(".ocibridge-tmp-*"))


def test_failed_export_leaves_the_ollama_store_as_it_was(tmp_path):
    src, layout = _tiny_in_a_layout(tmp_path)
    manifest = parse_manifest_bytes(layout.fetch_bytes(layout.resolve("v1")))
    lic = next(la for la in manifest.layers if la.annotations[Family.CNAI.filepath_key] == "license")
    layout.blob_path(lic.digest).write_bytes(b"Z" * lic.size)  # corrupt one blob in the layout
    out = tmp_path / "restored"
    out.mkdir()
    (out / "manifests").mkdir()
    dst = OllamaStore(out, parse_ollama_name("tiny"))
    with pytest.raises(DigestMismatch):
        export_ollama(layout, layout.resolve("v1"), StoreTarget(dst, "latest", "latest", "x"))
    assert snapshot(out) == {}  # no manifest, no blobs, no temporary files


def test_export_refuses_a_stale_ollama_manifest(tmp_path):
    """An artifact whose ollama-manifest.json names a blob it does not carry."""
    model_dir = tmp_path / "dir"
    model_dir.mkdir()
    write_gguf(model_dir / "model.gguf")
    other = {"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model",
                                              "digest": "sha256:" + "1" * 64, "size": 5}]}
    (model_dir / MANIFEST_FILE).write_bytes(gojson(other))
    out = tmp_path / "models"
    with pytest.raises(SourceError, match="lacks the blob"):
        _export_directory(tmp_path, model_dir, "stale")
    assert snapshot(out) == {}


def test_ollama_store_refuses_modelpack_manifests(tmp_path):
    src = tmp_path / "models"
    gguf_store(src, tmp_path)
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")),
         "artifact", layout, "v1")
    dst = OllamaStore(tmp_path / "out", parse_ollama_name("x"), create=True)
    with pytest.raises(NotAnOllamaModel, match="Ollama models only.*ocibridge pull REF ollama:x"):
        copy(layout, "v1", dst, "latest")
    assert dst.tags() == []
    assert not (tmp_path / "out").exists()  # refused at the first blob: nothing written
    desc = layout.resolve("v1")
    with pytest.raises(NotAnOllamaModel, match="not an Ollama model manifest"):
        dst.push_manifest(desc, layout.fetch_bytes(desc), "latest")
    assert not (tmp_path / "out").exists()


def test_tag_refuses_when_blobs_are_missing(tmp_path):
    src = tmp_path / "models"
    path = gguf_store(src, tmp_path)
    data = path.read_bytes()
    dst = OllamaStore(tmp_path / "out", parse_ollama_name("tiny"), create=True)
    with pytest.raises(NotFound, match="is missing"):
        dst.push_manifest(Descriptor.for_bytes("application/vnd.docker.distribution.manifest.v2+json",
                                               data), data, "latest")
    assert dst.tags() == []


def test_reference_store_is_untouched(tmp_path):
    before = snapshot(REF_STORE)
    shutil.copytree(REF_STORE, tmp_path / "copy")
    _roundtrip(tmp_path / "copy", "tiny-safetensors", tmp_path)
    assert snapshot(REF_STORE) == before


def test_api_push_and_pull_with_ollama_names(tmp_path, monkeypatch):
    """What `ocibridge push ollama:NAME DEST` and `ocibridge pull REF ollama:NAME` run."""
    from ocibridge.api import model_ops as api

    src = tmp_path / "models"
    gguf_store(src, tmp_path, model="tiny", tag="q8")
    monkeypatch.setenv("OLLAMA_MODELS", str(src))
    result = api.push("ollama:tiny:q8", f"oci:{tmp_path / 'layout'}:tiny")
    # 7 Ollama layers + its config + ollama-manifest.json + the ModelPack config
    assert result.stats.blobs_copied == 10
    api.pull(f"oci:{tmp_path / 'layout'}:tiny", "ollama:me/copy:v1")
    original = src / "manifests/registry.ollama.ai/library/tiny/q8"
    assert (src / "manifests/registry.ollama.ai/me/copy/v1").read_bytes() == original.read_bytes()


def test_names_match_the_store_case_insensitively(tmp_path):
    """Ollama compares names ignoring case; some versions wrote lowercase directories."""
    src = tmp_path / "models"
    gguf_store(src, tmp_path, model="tiny", tag="q8")
    store = OllamaStore(src, parse_ollama_name("Library/TINY:Q8"))
    assert store.tags() == ["q8"]
    assert read_ollama(store, "Q8").config["format"] == "gguf"


@pytest.mark.parametrize("config", [[1, 2], {"model_families": "llama"}])
def test_malformed_ollama_config(tmp_path, config):
    src = tmp_path / "models"
    write_store(src, ("registry.ollama.ai", "library", "tiny", "latest"),
                [("template", b"{{ .Prompt }}", {})], config=None)
    path = src / "manifests/registry.ollama.ai/library/tiny/latest"
    doc = json.loads(path.read_bytes())
    data = gojson(config)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (src / "blobs" / digest.replace(":", "-")).write_bytes(data)
    doc["config"] = {"mediaType": DOCKER_CONFIG, "digest": digest, "size": len(data)}
    path.write_bytes(gojson(doc))
    with pytest.raises(SourceError, match="Ollama config"):
        read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")


def test_projector_and_repeated_kinds_map_and_round_trip(tmp_path):
    """A vision model: model + projector (GGUF, weight); two licenses keep both (numbered)."""
    src = tmp_path / "models"
    model = write_gguf(tmp_path / "m.gguf", arch="llava")
    projector = write_gguf(tmp_path / "mmproj.gguf", arch="clip", vocab=4, dim=4, layers=1)
    layers = [("model", model.read_bytes(), {}), ("projector", projector.read_bytes(), {}),
              ("license", b"Apache-2.0\n", {}), ("license", b"Extra terms\n", {})]
    write_store(src, ("registry.ollama.ai", "library", "vision", "latest"), layers,
                config={"model_format": "gguf", "model_family": "llava"})
    package = read_ollama(OllamaStore(src, parse_ollama_name("vision")), "latest")
    kinds = {f.path: f.kind.value for f in package.files}
    assert {p: kinds[p] for p in ("model.gguf", "projector.gguf", "license", "license-2")} == {
        "model.gguf": "weight", "projector.gguf": "weight", "license": "doc", "license-2": "doc"}
    assert package.config["architecture"] == "llava"  # the model layer's header, not the projector's
    out, _, _ = _roundtrip(src, "vision", tmp_path)
    assert snapshot(out) == snapshot(src)


def test_without_the_gguf_package_quantization_still_comes_from_the_header(tmp_path, monkeypatch):
    """`gguf` is an optional extra (it brings numpy): without it the header gives the same
    architecture, parameter count and quantization name, so the config (and the digest) does not
    depend on what is installed (issue 32)."""
    import sys

    src = tmp_path / "models"
    gguf_store(src, tmp_path, file_type=gguf.LlamaFileType.MOSTLY_Q8_0)  # Ollama config says F16
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf → ImportError
    package = read_ollama(OllamaStore(src, parse_ollama_name("tiny")), "latest")
    assert package.config == {"format": "gguf", "architecture": "llama",
                              "paramSize": format_param_count(gguf_param_count()),
                              "quantization": "Q8_0"}


def test_ggml_type_tables_agree_with_the_gguf_package():
    """ocibridge's own copy of ggml's tables names every type the `gguf` package names, the same
    way, so dropping the optional package changed no quantization name (issue 32)."""
    from ocibridge.model.ggml_types import FILE_TYPES, TENSOR_TYPES

    theirs_files = {m.value: m.name.removeprefix("MOSTLY_").removeprefix("ALL_") for m in gguf.LlamaFileType}
    theirs_tensors = {m.value: m.name for m in gguf.GGMLQuantizationType}
    assert {k: FILE_TYPES.get(k) for k in theirs_files} == theirs_files
    assert {k: TENSOR_TYPES.get(k) for k in theirs_tensors} == theirs_tensors
