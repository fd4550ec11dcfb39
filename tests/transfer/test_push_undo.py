"""A push that fails takes back what it added to a layout, whatever family it writes: the
copy's undo hook (CopyHooks(undo_on_failure=True)) covers push, push --to and copy."""

from __future__ import annotations

import pytest

import ocibridge
from ocibridge.errors import OcibridgeError
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model


@pytest.mark.parametrize("to", [None, "modelkit", "docker-model"])
def test_failed_push_into_a_new_layout_leaves_nothing(tmp_path, monkeypatch, to):
    model = make_model(tmp_path / "model")

    def refuse(self, desc, data, tag=None):
        raise OcibridgeError("disk full (test)")

    monkeypatch.setattr(LayoutStore, "push_manifest", refuse)
    (tmp_path / "new").mkdir()  # a new layout is made in a directory that exists (core/parentdir.py)
    with pytest.raises(OcibridgeError, match="disk full"):
        ocibridge.push(str(model), f"oci:{tmp_path / 'new' / 'layout'}:v1", options=ocibridge.PushOptions(to=to))
    assert list((tmp_path / "new").iterdir()) == []  # blobs sent, then taken back with the layout made


def test_failed_push_into_an_existing_layout_keeps_what_was_there(tmp_path, monkeypatch):
    model = make_model(tmp_path / "model")
    ocibridge.push(str(model), f"oci:{tmp_path / 'layout'}:v1")
    before = sorted(p.name for p in (tmp_path / "layout" / "blobs" / "sha256").iterdir())
    (model / "new.bin").write_bytes(b"a new file" * 1000)

    def refuse(self, desc, data, tag=None):
        raise OcibridgeError("disk full (test)")

    monkeypatch.setattr(LayoutStore, "push_manifest", refuse)
    with pytest.raises(OcibridgeError, match="disk full"):
        ocibridge.push(str(model), f"oci:{tmp_path / 'layout'}:v2", options=ocibridge.PushOptions(to="modelkit"))
    after = sorted(p.name for p in (tmp_path / "layout" / "blobs" / "sha256").iterdir())
    assert after == before
