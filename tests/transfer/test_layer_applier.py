"""One applier reads a layer's tar entries (whiteouts, opaque markers, aufs metadata, links, files)
for pull, ``k8s check|mount`` and ModelCar images; the sinks differ only in their rules."""

from __future__ import annotations

import ast
import io
import tarfile
from pathlib import Path

import pytest
from support.pysource import docstring_ids

from ocibridge.errors import UnsafePath
from ocibridge.kinds.modelcar.image import _ModelsSink, _place
from ocibridge.layers.applier import LayerSink, apply_entry, read_entry
from ocibridge.layers.apply import Tree

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"
APPLIER = PACKAGE / "layers" / "applier.py"


def test_whiteout_names_are_read_only_by_the_applier():
    """A module that spells ``.wh.`` (in code, not prose) or uses the applier's markers reads
    whiteout names a second time, and the next fix lands in one reading only."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == APPLIER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docs = docstring_ids(tree)
        rel = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and ".wh." in node.value
                    and id(node) not in docs):
                offenders.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Name) and node.id in ("WHITEOUT", "OPAQUE"):
                offenders.append(f"{rel}:{node.lineno}: {node.id}")
            elif isinstance(node, ast.alias) and node.name in ("WHITEOUT", "OPAQUE", "whiteout_target"):
                offenders.append(f"{rel}: imports {node.name}")
    assert offenders == []


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize(("name", "kind", "expected", "affected"), [
    ("d/.wh..wh..opq", tarfile.REGTYPE, "opaque", "d"),
    (".wh..wh..opq", tarfile.REGTYPE, "opaque", ""),
    ("d/.wh.gone", tarfile.REGTYPE, "whiteout", "d/gone"),
    ("d/.wh..wh.plnk", tarfile.REGTYPE, "aufs", "d/.wh.plnk"),
    ("./d/", tarfile.DIRTYPE, "dir", "d"),
    ("d/l", tarfile.SYMTYPE, "symlink", "d/l"),
    ("d/h", tarfile.LNKTYPE, "hardlink", "d/h"),
    ("d/f", tarfile.REGTYPE, "file", "d/f"),
    ("d/p", tarfile.FIFOTYPE, "special", "d/p"),
    ("d/c", tarfile.CHRTYPE, "special", "d/c"),
])
def test_an_entry_is_classified_once_the_same_for_every_sink(name, kind, expected, affected):
    for place in (Tree().place, _place):
        entry = read_entry(_member(name, kind), place)
        assert entry is not None
        assert (entry.kind, entry.affected) == (expected, affected)
        assert entry.deletion == (expected in ("opaque", "whiteout", "aufs"))


def _tar(entries: list[tuple[str, bytes, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, target in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    return buf.getvalue()


def _apply(tree: Tree, sink: LayerSink, layers: list[list[tuple[str, bytes, str]]]) -> None:
    for layer in layers:
        tree.begin_layer()
        with tarfile.open(fileobj=io.BytesIO(_tar(layer))) as tar:
            for member in tar:
                entry = read_entry(member, sink.place)
                if entry is not None:
                    apply_entry(tar, entry, sink)


def test_the_sinks_differ_in_names_specials_and_links_only(tmp_path):
    """The runtime's rules (clamp a climbing name, keep a FIFO, follow a link of the same layer)
    against ModelCar's (refuse all three), through the same applier."""
    climbing = [[("../../x", tarfile.REGTYPE, "")]]
    tree = Tree()
    _apply(tree, tree, climbing)
    assert "x" in tree.entries and tree.confined == [("../../x", "x")]
    models = Tree(tmp_path / "a")
    (tmp_path / "a").mkdir()
    with pytest.raises(UnsafePath, match="escapes"):
        _apply(models, _ModelsSink(models), climbing)

    fifo = [[("p", tarfile.FIFOTYPE, "")]]
    tree = Tree()
    _apply(tree, tree, fifo)
    assert tree.entries["p"].type == "fifo"
    models = Tree(tmp_path / "b")
    (tmp_path / "b").mkdir()
    with pytest.raises(UnsafePath, match="special file"):
        _apply(models, _ModelsSink(models), fifo)

    through_a_link = [[("d", tarfile.DIRTYPE, ""), ("d/f", tarfile.REGTYPE, ""), ("l", tarfile.SYMTYPE, "d"),
                       ("l/.wh.f", tarfile.REGTYPE, "")]]
    tree = Tree()
    _apply(tree, tree, through_a_link)
    assert "d/f" not in tree.entries  # the runtimes follow a link of the same layer
    models = Tree(tmp_path / "c")
    (tmp_path / "c").mkdir()
    with pytest.raises(UnsafePath, match="parent directory is a symlink"):
        _apply(models, _ModelsSink(models), through_a_link)
    assert (tmp_path / "c" / "d" / "f").exists()  # nothing deleted
