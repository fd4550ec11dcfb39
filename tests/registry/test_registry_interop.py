"""Interoperability with other clients on a real registry: skopeo and oras-py, both ways."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid

from support.ocilayout import write_tiny_image

from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.models import Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from tests.modelgen import make_model


def _repo() -> str:
    return f"interop/{uuid.uuid4().hex[:8]}"


def _skopeo(*args: str) -> None:
    done = subprocess.run(["skopeo", "--insecure-policy", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _blobs(root) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (root / "blobs" / "sha256").iterdir()
            if not p.name.startswith(".")}


def test_ocibridge_push_pulled_by_skopeo_and_oras(registry, tmp_path):
    model = make_model(tmp_path / "model")
    layout = LayoutStore(tmp_path / "layout", create=True)
    copy(build(read_directory(model)), ARTIFACT_TAG, layout, "v1")
    root = layout.resolve("v1")
    repo = _repo()
    with open_repository(host=registry.host, repository=repo) as dst:
        copy(layout, "v1", dst, "v1")

    # skopeo: same manifest digest, every blob byte-identical
    _skopeo("copy", "--src-tls-verify=false", f"docker://{registry.host}/{repo}:v1",
            f"oci:{tmp_path / 'skopeo'}:v1")
    index = json.loads((tmp_path / "skopeo" / "index.json").read_text())
    assert index["manifests"][0]["digest"] == root.digest
    assert _blobs(tmp_path / "skopeo") == _blobs(layout.root)

    import oras.client  # not at collection, where every worker paid for it (it imports jsonschema)

    # oras-py: the files named by their title annotations, byte-identical to the model
    client = oras.client.OrasClient(insecure=True)
    out = tmp_path / "oras"
    client.pull(target=f"{registry.host}/{repo}:v1", outdir=str(out))
    manifest = Manifest.model_validate_json(layout.fetch_bytes(root))
    titles = [m.annotations["org.opencontainers.image.title"] for m in manifest.layers]
    assert titles
    for title in titles:
        assert (out / title).read_bytes() == (model / title).read_bytes()


def test_skopeo_and_oras_push_pulled_by_ocibridge(registry, tmp_path):
    image = write_tiny_image(tmp_path / "tiny", {"a.txt": os.urandom(5000).hex().encode()})
    repo = _repo()
    _skopeo("copy", "--dest-tls-verify=false", f"oci:{image.path}:{image.tag}",
            f"docker://{registry.host}/{repo}:s1")
    out = LayoutStore(tmp_path / "out", create=True)
    with open_repository(host=registry.host, repository=repo) as src:
        root = src.resolve("s1")
        copy(src, "s1", out, "s1")
    pulled = Manifest.model_validate_json(out.fetch_bytes(root))
    for blob in [pulled.config, *pulled.layers]:
        data = out.blob_path(blob.digest).read_bytes()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == blob.digest
    layer = pulled.layers[0].digest
    assert out.blob_path(layer).read_bytes() == image.blobs[layer]

    import oras.client

    # oras-py push of a plain file; ocibridge pulls the file's bytes back
    payload = tmp_path / "weights.bin"
    payload.write_bytes(os.urandom(300_000))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # oras-py names the layer by the path as given
    try:
        oras.client.OrasClient(insecure=True).push(
            target=f"{registry.host}/{repo}:o1", files=["weights.bin"], quiet=True)
    finally:
        os.chdir(cwd)
    with open_repository(host=registry.host, repository=repo) as src:
        copy(src, "o1", out, "o1")
        manifest = Manifest.model_validate_json(out.fetch_bytes(src.resolve("o1")))
    (weights,) = manifest.layers
    assert weights.annotations["org.opencontainers.image.title"] == "weights.bin"
    assert out.blob_path(weights.digest).read_bytes() == payload.read_bytes()
    assert sorted(out.tags()) == ["o1", "s1"]
