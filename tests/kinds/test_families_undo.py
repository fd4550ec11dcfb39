"""A failed convert into an OCI layout leaves it as it was: the blobs it added are taken back."""

from __future__ import annotations

import shutil

import pytest
from support.data import data

from ocibridge.api import model_ops as api
from ocibridge.cli import main
from tests.kit_compressed import KIT_DIGEST
from tests.modelgen import make_model

README_LAYER = "bea0522d5e96f79c107e7780c2ae57f5def668a8e51b4020ac32f43b97cbaab6"


def _snapshot(layout) -> dict[str, bytes]:
    return {p.relative_to(layout).as_posix(): p.read_bytes() for p in sorted(layout.rglob("*"))
            if p.is_file() and p.name != ".ocibridge.lock"}


def _damaged_kit(tmp_path) -> str:
    """The kit fixture with its README layer's bytes changed (same size): copying it fails late."""
    shutil.copytree(data("kitops", "kit-latest-tar"), tmp_path / "kit")
    blob = tmp_path / "kit" / "blobs" / "sha256" / README_LAYER
    body = bytearray(blob.read_bytes())
    body[600] ^= 0xFF
    blob.write_bytes(bytes(body))
    return f"oci:{tmp_path / 'kit'}@{KIT_DIGEST}"


@pytest.mark.parametrize("to", ["docker-model", "modelpack", "modelcar"])
def test_a_failed_convert_leaves_an_existing_layout_as_it_was(tmp_path, capsys, to):
    dest = tmp_path / "dest"
    api.push(str(make_model(tmp_path / "m")), f"oci:{dest}:other")
    before = _snapshot(dest)
    code = main(["convert", _damaged_kit(tmp_path), f"oci:{dest}:x", "--to", to])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("ocibridge: error: "), err
    assert README_LAYER[:12] in err[0] or "digest" in err[0].lower()
    assert _snapshot(dest) == before


@pytest.mark.parametrize("to", ["modelkit", "modelcar"])
def test_a_failed_convert_into_a_new_layout_leaves_nothing(tmp_path, capsys, to):
    (tmp_path / "new").mkdir()  # a layout is made in a directory that exists (core/parentdir.py)
    code = main(["convert", _damaged_kit(tmp_path), f"oci:{tmp_path / 'new' / 'layout'}:x", "--to", to])
    err = capsys.readouterr().err
    assert code != 0 and "no such directory" not in err, err
    assert list((tmp_path / "new").iterdir()) == []


@pytest.mark.parametrize("to", ["docker-model", "modelcar"])
def test_a_failed_push_to_a_family_leaves_the_layout_as_it_was(tmp_path, capsys, monkeypatch, to):
    """A file that changes between the build (which hashes it) and the copy (which sends it)
    fails the push late, after other blobs were written: they are taken back."""
    from ocibridge.kinds import push as family_push

    dest = tmp_path / "dest"
    api.push(str(make_model(tmp_path / "other")), f"oci:{dest}:other")
    before = _snapshot(dest)
    model = make_model(tmp_path / "m", seed=3)
    real_build = family_push.build

    def build_then_change(package, options):
        artifact = real_build(package, options)
        (model / "weights" / "part-2.bin").write_bytes(b"changed while pushing")
        return artifact

    monkeypatch.setattr(family_push, "build", build_then_change)
    code = main(["push", str(model), f"oci:{dest}:x", "--to", to])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("ocibridge: error: "), err
    assert _snapshot(dest) == before
