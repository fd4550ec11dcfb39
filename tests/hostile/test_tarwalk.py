"""One walk over a tar layer's members: the entry cap holds in every loop over a layer."""

from __future__ import annotations

import ast
import io
import tarfile
from pathlib import Path

import pytest

from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.layers import tarwalk
from ocibridge.layers.tarwalk import tar_members
from ocibridge.model.extract import extract
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"


def _tar(n: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(n):
            info = tarfile.TarInfo(f"f{i}.txt")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return buf.getvalue()


def test_the_cap_refuses_the_entry_past_it():
    with tarfile.open(fileobj=io.BytesIO(_tar(4))) as tar:
        assert [m.name for m in tar_members(tar, limit=4)] == ["f0.txt", "f1.txt", "f2.txt", "f3.txt"]
    with tarfile.open(fileobj=io.BytesIO(_tar(4))) as tar, pytest.raises(TooLarge, match="more than 3"):
        list(tar_members(tar, limit=3))


def test_a_pull_into_a_directory_meets_the_cap(tmp_path, monkeypatch):
    layout = LayoutStore(tmp_path / "layout", create=True)
    data = _tar(5)
    layer = Descriptor.for_bytes("application/vnd.cncf.model.weight.v1.tar", data)
    config = Descriptor.for_bytes("application/vnd.cncf.model.config.v1+json", b"{}")
    for desc, body in ((layer, data), (config, b"{}")):
        layout.push_blob(desc, io.BytesIO(body))
    manifest = Manifest(mediaType="application/vnd.oci.image.manifest.v1+json", config=config,
                        layers=[layer]).to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes("application/vnd.oci.image.manifest.v1+json", manifest), manifest, "v1")
    monkeypatch.setattr(tarwalk, "MAX_TAR_ENTRIES", 4)
    with pytest.raises(OcibridgeError, match="too many entries"):
        extract(layout, "v1", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(tarwalk, "MAX_TAR_ENTRIES", 5)
    assert len(extract(layout, "v1", tmp_path / "out").files) == 5


def test_every_loop_over_a_tar_goes_through_the_walk():
    """No module iterates a TarFile itself: ``for m in tar`` or ``enumerate(tar)`` outside
    tarwalk.py would skip the cap (archive exports had none before the walk)."""
    loops = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "tarwalk.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.For, ast.comprehension)):
                it = node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
                    it = it.args[0]
                if isinstance(it, ast.Name) and it.id == "tar":
                    loops.append(f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}")
    assert not loops, f"loops over a TarFile outside the walk: {loops}"
