"""Links in archives never reach outside the target (issue 85): a chain of symlinks
``link1 -> link2 -> ../../outside``, a hard link to a path outside, and a hard link to a symlink
that points outside, in each archive ocibridge reads: a tar layer pulled from an OCI layout, the
same layer mounted by ``k8s mount``, a carton's zip, a bundle's OCI layout tar. Each is refused
in one line and the folder around the target is as it was. (A regression guard: every case was
refused before this file was written; core/confined.py holds the rule for symlinks, and pulls
and bundles take no hard links at all, k8s mount only to a file of the same layer.)"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from test_carton import TOML
from test_carton_bad import _fails, _linked_carton

from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.k8s import mount
from tests.hostile.test_hostile_trees import _artifact, _pull, snapshot
from tests.k8s.test_k8s import _image, _tar

ESCAPES = {
    "a chain of symlinks": [("link1", "sym", "link2"), ("link2", "sym", "../../outside")],
    "a chain harmless link by link": [("d", "dir", b""), ("d/link2", "sym", ".."),
                                      ("d/link1", "sym", "link2/../outside")],
    "a hard link to a path outside": [("h", "link", "../outside")],
    "a hard link through a symlinked directory": [("up", "sym", ".."), ("h", "link", "up/outside")],
    "a hard link through a symlink that stays inside": [("d", "dir", b""), ("d/up", "sym", ".."),
                                                        ("h", "link", "d/up/../../outside")],
    "a hard link to a symlink pointing outside": [("s", "sym", "../outside"), ("h", "link", "s")],
}
HARD = {k: v for k, v in ESCAPES.items() if "hard link" in k}


def _around(tmp_path: Path) -> Path:
    around = tmp_path / "around"
    (around / "dest").mkdir(parents=True)
    (around / "outside").write_text("the neighbour's")
    return around


@pytest.mark.parametrize("entries", ESCAPES.values(), ids=ESCAPES.keys())
def test_pull_of_a_tar_layer_refuses_links_that_leave_the_target(tmp_path, capsys, entries) -> None:
    ref = _artifact(tmp_path / "layout", [_tar(entries)])
    around = _around(tmp_path)
    before = snapshot(around)
    code, err = _pull(capsys, ref, around / "dest")
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "points outside" in err or "outside the tree" in err or "hard link" in err, err
    assert snapshot(around) == before


@pytest.mark.parametrize("entries", HARD.values(), ids=HARD.keys())
def test_k8s_mount_refuses_hard_links_that_leave_the_layer(tmp_path, entries) -> None:
    layout = _image(tmp_path, [_tar(entries)])
    around = _around(tmp_path)
    before = snapshot(around)
    with pytest.raises(OcibridgeError, match="hard link to .*not a file in the tree") as refused:
        mount(layout, "v1", around / "dest" / "mnt", "containerd")
    assert "\n" not in str(refused.value)
    assert snapshot(around) == before


def test_a_carton_chain_of_symlinks_that_leaves_model_is_refused(tmp_path) -> None:
    path = _linked_carton(tmp_path / "s.carton", {"carton.toml": TOML, "model/x": b"x"},
                          {"model/link1": "link2", "model/link2": "../../outside"})
    _fails(path, tmp_path, UnsafePath, "points outside model/")


@pytest.mark.parametrize("kind, target", [(tarfile.SYMTYPE, "../../outside"), (tarfile.LNKTYPE, "../outside"),
                                          (tarfile.LNKTYPE, "oci-layout")], ids=["symlink", "hard-out", "hard-in"])
def test_a_bundle_with_a_link_is_refused_before_anything_is_written_outside(tmp_path, kind, target) -> None:
    from ocibridge.api.bundle import opened

    bundle = tmp_path / "around" / "b.tar"
    bundle.parent.mkdir()
    (tmp_path / "around" / "outside").write_text("the neighbour's")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        layout = tarfile.TarInfo("oci-layout")
        body = b'{"imageLayoutVersion": "1.0.0"}'
        layout.size = len(body)
        tar.addfile(layout, io.BytesIO(body))
        link = tarfile.TarInfo("index.json")
        link.type, link.linkname = kind, target
        tar.addfile(link)
    bundle.write_bytes(buf.getvalue())
    before = snapshot(tmp_path / "around")
    with pytest.raises(OcibridgeError, match="unexpected entry 'index.json'"), opened(bundle):
        pass
    assert snapshot(tmp_path / "around") == before
