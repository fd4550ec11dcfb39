"""Every store writer refuses what the matching reader would refuse (issue 32).

The Ollama store accepted a manifest whose tensor layer is named ``../../x``, which its reader
then refused: a model written that nobody can read. Each test here generates inputs the reader
refuses, shows the reader does refuse them, and asserts the writer refuses them first, with one
error line, leaving the target as it was. Stores: the Ollama store (from a layout and from the
real registry), an ``ollama://``-style registry destination, a layout, a directory target, and
the carton/mlarchive exports (tests/hostile/test_hostile_writers.py has their link and name cases)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from ocibridge.cli import main
from ocibridge.errors import OcibridgeError
from ocibridge.kinds.ollama.reader import read_ollama
from ocibridge.oci.models import Descriptor
from ocibridge.stores.layout import LayoutStore
from tests.hostile.test_hostile_trees import snapshot

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
TENSOR = "application/vnd.ollama.image.tensor"
JSON_LAYER = "application/vnd.ollama.image.json"


def _blob(media_type: str, data: bytes) -> dict:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


#: Ollama manifests the reader refuses for their layer names (name → tensor/json layers).
HOSTILE_NAMES = {
    "parent-escape": [(TENSOR, "; name=../../x; dtype=F32; shape=1", b"\0" * 4)],
    "absolute": [(TENSOR, "; name=/etc/x; dtype=F32; shape=1", b"\0" * 4)],
    "field-escape": [(JSON_LAYER, "", b"{}", "../up.json")],
    "twice": [(TENSOR, "; name=w; dtype=F32; shape=1", b"\0" * 4), (TENSOR, "; name=w; dtype=F32; shape=1", b"\1" * 4)],
    "no-name": [(TENSOR, "; dtype=F32; shape=1", b"\0" * 4)],
    "shadows-the-manifest": [(JSON_LAYER, "; name=ollama-manifest.json", b"{}")],
}


def _hostile_layout(root: Path, case: str) -> tuple[LayoutStore, str]:
    """A layout holding, at tag ``o``, an Ollama-shaped manifest with the case's layers."""
    store = LayoutStore(root, create=True)
    config = json.dumps({"model_format": "safetensors", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    cfg = _blob(DOCKER_CONFIG, config)
    store.push_blob(Descriptor(**cfg), io.BytesIO(config))
    layers = []
    for media_type, params, data, *field in HOSTILE_NAMES[case]:
        entry = _blob(media_type + params, data)
        if field:
            entry["name"] = field[0]
        store.push_blob(Descriptor(mediaType=media_type, digest=entry["digest"], size=entry["size"]),
                        io.BytesIO(data))
        layers.append(entry)
    doc = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": cfg, "layers": layers}).encode()
    store.push_manifest(Descriptor.for_bytes(DOCKER_MANIFEST, doc), doc, "o")
    return store, f"oci:{root}:o"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("case", sorted(HOSTILE_NAMES))
def test_the_ollama_store_refuses_what_its_reader_refuses(case, tmp_path, monkeypatch, capsys):
    store, ref = _hostile_layout(tmp_path / "layout", case)
    with pytest.raises(OcibridgeError):  # the reader refuses it ...
        read_ollama(store, "o")
    models = tmp_path / "models"
    (models / "manifests").mkdir(parents=True)
    (models / "blobs").mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    before = snapshot(models)
    assert main(["copy", ref, "ollama:m2", "-q"]) == 1  # ... so the writer refuses it first
    _one_error_line(capsys)
    assert snapshot(models) == before


def test_pull_from_the_registry_into_the_ollama_store_refuses_an_escaping_name(
        tmp_path, monkeypatch, capsys, registry, unique_repo):
    """`pull REF ollama:m` of a manifest with a layer named ../../x (the case of issue 32)."""
    _, ref = _hostile_layout(tmp_path / "layout", "parent-escape")
    remote = f"{registry.host}/{unique_repo}:o"
    assert main(["copy", ref, remote, "-q"]) == 0
    models = tmp_path / "models"
    (models / "manifests").mkdir(parents=True)
    (models / "blobs").mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    before = snapshot(models)
    capsys.readouterr()
    assert main(["pull", remote, "ollama:m", "-q"]) == 1
    assert "../../x" in _one_error_line(capsys)
    assert snapshot(models) == before
    assert not (tmp_path / "x").exists()


def test_a_layout_refuses_a_tag_its_reader_refuses(tmp_path, capsys):
    """A layout's reader refuses a tag that is no OCI tag; the writer refuses to write one."""
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/l:v1", "-q"]) == 0
    capsys.readouterr()
    before = snapshot(tmp_path / "l")
    for bad in ("../x", ".x", "a b", "a" * 129):
        assert main(["tag", f"oci:{tmp_path}/l:v1", bad]) != 0
        _one_error_line(capsys)
        assert main(["resolve", f"oci:{tmp_path}/l:{bad}"]) != 0  # the reader refuses it too
        _one_error_line(capsys)
    assert snapshot(tmp_path / "l") == before


def test_a_directory_target_refuses_an_escaping_file_path(tmp_path, capsys):
    """Pull into a directory refuses a layer whose file path leaves the model; nothing lands."""
    from ocibridge.oci.mediatypes import ANNOTATION_TITLE
    from ocibridge.oci.models import Manifest
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/l:v1", "-q"]) == 0
    layout = LayoutStore(tmp_path / "l")
    desc = layout.resolve("v1")
    manifest = Manifest.model_validate_json(layout.fetch_bytes(desc))
    annotations = manifest.layers[0].annotations or {}
    for key in list(annotations):
        if key.endswith(".model.filepath") or key == ANNOTATION_TITLE:
            annotations[key] = "../../escaped"
    data = manifest.to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "bad")
    assert main(["validate", f"oci:{tmp_path}/l:bad"]) == 1  # the spec check refuses it too
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(["pull", f"oci:{tmp_path}/l:bad", str(out), "-q"]) == 1
    assert "escaped" in _one_error_line(capsys)
    assert snapshot(tmp_path) == before


def test_an_ollama_registry_destination_refuses_an_escaping_name(tmp_path, capsys, registry, unique_repo):
    """`copy … ollama://HOST/NAME` checks the manifest as the Ollama reader would, before any write."""
    _, ref = _hostile_layout(tmp_path / "layout", "parent-escape")
    dest = f"ollama://{registry.host}/{unique_repo}:latest"
    capsys.readouterr()
    assert main(["copy", ref, dest, "-q"]) == 1
    assert "../../x" in _one_error_line(capsys)
    assert main(["resolve", f"{registry.host}/{unique_repo}:latest"]) == 1  # nothing tagged
    capsys.readouterr()


def test_a_layout_refuses_a_manifest_larger_than_its_reader_takes(tmp_path):
    from ocibridge.stores.base import MAX_MANIFEST_BYTES

    store = LayoutStore(tmp_path / "l", create=True)
    before = snapshot(tmp_path / "l")
    doc = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": _blob("application/vnd.oci.empty.v1+json", b"{}"), "layers": [],
                      "annotations": {"x": "a" * MAX_MANIFEST_BYTES}}).encode()
    with pytest.raises(OcibridgeError, match="more than a reader takes"):
        store.push_manifest(Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", doc), doc, "big")
    assert snapshot(tmp_path / "l") == before
