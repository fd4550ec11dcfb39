"""Property-based fuzzing of everything that reads untrusted input (issue 13): archive readers,
the tar/whiteout applier, the reference parsers, manifest and config parsers.

The property is always the same: the reader answers, or raises an :class:`OcibridgeError` (one
line at the CLI), and nothing outside the tree being written changes. Runs are derandomized, so
CI sees the same cases every time; the ``@example`` inputs are the corpus: every escape or crash
found so far stays here as a regression. The whole module is bounded to a few seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ocibridge.core.confined import MAX_LINK_HOPS
from ocibridge.errors import OcibridgeError
from ocibridge.kinds.carton.reader import read_carton
from ocibridge.kinds.mlsteam.reader import read_mlarchive
from ocibridge.layers.apply import Tree, _apply_member
from ocibridge.model.config import parse_config
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.oci.reference import parse_layout_reference, parse_ollama_name, parse_registry_reference

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# Names built from the pieces that make trouble: dots, separators, whiteout prefixes, NUL, ESC.
PIECES = st.sampled_from(["a", "b", "d", "..", ".", "", ".wh.", ".wh..wh..opq", ".wh...", "x\x00", "\x1b[2J", "é"])
NAMES = st.lists(PIECES, min_size=1, max_size=4).map("/".join)
ENTRY = st.tuples(st.sampled_from(["file", "dir", "sym", "link"]), NAMES, NAMES)


def _tar(entries: list[tuple[str, str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, target in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind in ("sym", "link"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = target
                tar.addfile(info)
            else:
                data = target.encode("utf-8", "surrogateescape")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = os.readlink(path) if path.is_symlink() else "f"
    return out


def _inside(root: Path, path: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(str(root) + os.sep)


@FUZZ
@given(st.lists(st.lists(ENTRY, max_size=6), min_size=1, max_size=3))
@example([[("dir", "d", ""), ("sym", "d/a", ".."), ("sym", "d/b", "a/../..")]])
@example([[("sym", "d/b", "a/../../x"), ("sym", "d/a", "..")]])
@example([[("file", "victim", "v")], [("file", ".wh...", "")]])
@example([[("sym", "up", ".")], [("file", "up/.wh.victim", "")]])
@example([[("sym", "l", "l")], [("file", "l/x", "")]])
@example([[("file", "b/a", "a"), ("link", "b", "b/a")]])  # a hard link replacing its own directory
def test_layer_applier_never_leaves_the_tree(layers: list[list[tuple[str, str, str]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        (base / "neighbour").write_text("outside the mount")
        root = base / "mnt"
        root.mkdir()
        before = _snapshot(base)
        tree = Tree(root)
        refused = False
        try:
            for layer in layers:
                tree.begin_layer()
                with tarfile.open(fileobj=io.BytesIO(_tar(layer)), mode="r:") as tar:
                    for member in tar:
                        _apply_member(tar, member, tree)
            tree.finish()
        except OcibridgeError:
            refused = True
        after = _snapshot(base)
        outside = {k: v for k, v in after.items() if not k.startswith("mnt")}
        assert outside == {k: v for k, v in before.items() if not k.startswith("mnt")}
        if not refused:  # the disk is the tree check lists; a link leaving it is one it reports
            on_disk = {k[len("mnt/"):]: v for k, v in after.items() if k.startswith("mnt/")}
            assert on_disk == {e.path: e.target if e.type == "symlink" else "f" for e in tree.entries.values()}
            leaving = tree.links_leaving()
            for path in root.rglob("*"):
                if path.is_symlink() and not _inside(root, path):
                    assert path.relative_to(root).as_posix() in leaving, f"{path} -> {os.readlink(path)}"


@FUZZ
@given(st.text(max_size=80))
@example("localhost:5000/a/../b:tag")
@example("host/repo:\x1b[2J")
@example("oci:/tmp/x:" + "a" * 200)
@example("registry.example.com/" + "/".join(["a"] * 300))
def test_reference_parsers_answer_or_refuse(text: str) -> None:
    for parse in (parse_registry_reference, parse_layout_reference, parse_ollama_name):
        with contextlib.suppress(OcibridgeError):
            parse(text)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["schemaVersion", "mediaType", "config", "layers", "manifests", "digest", "size",
                         "annotations", "subject", "artifactType", "descriptor", "modelfs", "diffIds"]),
        children, max_size=5),
    max_leaves=20,
)


@FUZZ
@given(JSON)
@example({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64, "size": -1}, "layers": []})
@example({"descriptor": {"name": "\x00"}, "config": {}, "modelfs": {"type": "layers", "diffIds": [None]}})
def test_manifest_and_config_parsers_answer_or_refuse(document: object) -> None:
    data = json.dumps(document).encode()
    for parse in (parse_manifest_bytes, parse_config):
        with contextlib.suppress(OcibridgeError):
            parse(data)


ZIP_NAMES = st.sampled_from(["MANIFEST", "carton.toml", "model/a", "model/../x", "/abs", "model/\x00",
                             "manifest.json", "models/w.bin", "a/./b", "LINKS"])


@pytest.mark.filterwarnings("ignore:Duplicate name")  # duplicates are part of the fuzz
@FUZZ
@given(st.lists(st.tuples(ZIP_NAMES, st.binary(max_size=64)), max_size=6), st.sampled_from(["carton", "mlarchive"]))
@example([("MANIFEST", b"model/a=" + b"0" * 64 + b"\n"), ("carton.toml", b"spec_version = 1\n")], "carton")
@example([("manifest.json", b'{"models": {"../x": {}}}')], "mlarchive")
def test_archive_readers_answer_or_refuse(entries: list[tuple[str, bytes]], kind: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz.{kind}"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in entries:
                zf.writestr(name, data)
        with contextlib.suppress(OcibridgeError):
            (read_carton if kind == "carton" else read_mlarchive)(path)


def test_link_hop_limit_matches_the_kernel() -> None:
    assert MAX_LINK_HOPS == 40
