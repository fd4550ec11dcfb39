"""Property-based fuzzing of everything that reads untrusted input (issue 13): archive readers,
the tar/whiteout applier, the reference parsers, manifest and config parsers; and (issue 34) the
metadata readers (safetensors headers, config.json, GGUF headers), which must never raise, and
the build files (Kitfile, Modelfile), which answer or refuse in one line.

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
import struct
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ocibridge.core.confined import MAX_LINK_HOPS
from ocibridge.errors import OcibridgeError
from ocibridge.kinds.buildfile import read_kitfile, read_modelfile
from ocibridge.kinds.carton.reader import read_carton
from ocibridge.kinds.mlsteam.reader import read_mlarchive
from ocibridge.layers.applier import apply_entry, read_entry
from ocibridge.layers.apply import Tree
from ocibridge.model import metadata
from ocibridge.model.config import parse_config
from ocibridge.model.gguf_header import read_gguf_header
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Kind
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
                        entry = read_entry(member, tree.place)
                        if entry is not None:
                            apply_entry(tar, entry, tree)
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


# -- metadata readers: never an exception, whatever the file says (issue 34) ----------------------
HUGE = st.sampled_from([2**63, 2**64 - 1, 10**399, -1, 0, 2**62])
DIMS = st.lists(st.integers(min_value=-3, max_value=2**70) | HUGE | st.booleans() | st.floats() | st.none(),
                max_size=6)
TENSOR = st.fixed_dictionaries({"dtype": st.sampled_from(["F16", "BF16", "F32", "I8", "??"]) | st.integers(),
                                "shape": DIMS | JSON})
HEADER = st.dictionaries(st.sampled_from(["w", "b", "__metadata__", "x.y"]), TENSOR | JSON, max_size=4)


def _infer_on(tmp: str, files: dict[str, bytes]) -> tuple[dict[str, object], dict[str, object]]:
    model = []
    for name, data in files.items():
        path = Path(tmp) / name
        path.write_bytes(data)
        model.append(ModelFile.from_path(name, path, Kind.WEIGHT))
    return metadata.infer(ModelPackage(files=model))


@FUZZ
@given(HEADER | JSON, st.binary(max_size=16))
@example({"w": {"dtype": "F16", "shape": [10**399]}}, b"")
@example({"w": {"dtype": "F16", "shape": [2**40, 2**40]}}, b"")
@example({"a": {"dtype": "F16", "shape": [2**62]}, "b": {"dtype": "F16", "shape": [2**62]}}, b"")
def test_safetensors_headers_never_raise(header: object, tail: bytes) -> None:
    raw = json.dumps(header).encode()
    with tempfile.TemporaryDirectory() as tmp:
        for data in (struct.pack("<Q", len(raw)) + raw + tail, struct.pack("<Q", len(raw) + len(tail)) + raw + tail,
                     tail):
            _, config = _infer_on(tmp, {"model.safetensors": data})
            assert isinstance(config.get("paramSize", ""), str)


CONFIG_KEYS = st.sampled_from(["architectures", "model_type", "torch_dtype", "dtype", "hidden_size"])
HF_CONFIG = st.dictionaries(CONFIG_KEYS, JSON | st.lists(st.text(max_size=300), max_size=2) | st.text(max_size=300),
                            max_size=4)


@FUZZ
@given(HF_CONFIG | JSON)
@example({"architectures": ["A" * 300]})
@example({"architectures": [[[]]], "model_type": 7})
def test_config_json_never_raises(document: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        descriptor, config = _infer_on(tmp, {"config.json": json.dumps(document).encode()})
    for value in (descriptor.get("family"), config.get("architecture")):
        assert value is None or (isinstance(value, str) and 0 < len(value) <= metadata.MAX_NAME)


U64 = st.integers(min_value=0, max_value=2**64 - 1) | st.sampled_from([0, 1, 2**24, 2**63, 2**64 - 1])
GGUF_TYPE = st.integers(min_value=0, max_value=14)


@st.composite
def gguf_headers(draw: st.DrawFn) -> bytes:
    """A GGUF prefix of plausible and implausible counts, then typed keys and random bytes."""
    out = b"GGUF" + struct.pack("<I", draw(st.sampled_from([2, 3, 1, 3 << 24])))
    out += struct.pack("<QQ", draw(U64), draw(U64))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.binary(max_size=8))
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", draw(GGUF_TYPE))
        if draw(st.booleans()):  # an array header: element type, count
            out += struct.pack("<IQ", draw(GGUF_TYPE), draw(U64))
        out += draw(st.binary(max_size=24))
    return out + draw(st.binary(max_size=64))


@FUZZ
@given(gguf_headers())
@example(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"a" + struct.pack("<I", 9)
         + struct.pack("<IQ", 9, 1) * 2000)
@example(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<QcI", 1, b"t", 8) + struct.pack("<Q", 2**64 - 1) * 8)
def test_gguf_headers_answer_or_refuse_quickly(data: bytes) -> None:
    with contextlib.suppress(OcibridgeError):
        header = read_gguf_header(io.BytesIO(data))
        assert header.parameter_count < 2**63
        assert header.param_size is None or isinstance(header.param_size, str)
    with tempfile.TemporaryDirectory() as tmp:
        _, config = _infer_on(tmp, {"model.gguf": data})  # through metadata: never an exception
        assert config.get("format") == "gguf"


# -- build files: answer, or one SourceError line ------------------------------------------------
YAML_PIECES = st.sampled_from([
    "manifestVersion: 1.0.0\n", "package:\n", "  name: x\n", "model:\n", "  path: w.bin\n", "  path: ..\n",
    "  parts:\n", "    - path: w.bin\n", "code:\n", "  - path: /\n", "x: &a [1, 2]\n", "y: *a\n", "[[[[", "{",
    "- -\n", "!!python/object:os.system ls\n", "? [a]\n: b\n", "\t", "'", "model: {path: [w.bin]}\n",
    "datasets: 7\n", "<<: *a\n", "2024-01-01: d\n",
])
MODELFILE_PIECES = st.sampled_from([
    "MODEL w.bin\n", "MODEL ../x\n", "CONFIG *\n", "NAME x\n", "ARCH \x1b[2J\n", "# c\n", "DOC\n",
    "PARAMSIZE 7B\n", "CODE /etc/passwd\n", "FROM x\n", "\n", "model  w.bin  \n", "DATASET [\n",
])


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ctx")
    (root / "w.bin").write_bytes(b"w")
    (root / "sub").mkdir()
    (root / "sub" / "config.json").write_text("{}")
    return root


def _read_or_refused_in_one_line(read: Callable[[], ModelPackage]) -> ModelPackage | None:
    """A build file read gives the context's own files, or one error line (then None)."""
    try:
        package = read()
    except OcibridgeError as e:
        assert "\n" not in str(e)
        return None
    assert all(f.path in ("w.bin", "sub/config.json") for f in package.files)
    return package


@FUZZ
@given(st.lists(YAML_PIECES, max_size=10).map("".join))
@example("manifestVersion: 1.0.0\na: &a [x, x]\nb: &b [*a, *a]\npackage: {name: *b}\n")
@example("manifestVersion: 1.0.0\nmodel: " + "[" * 5000)
@example("manifestVersion: 1.0.0\nmodel:\n  path: w.bin\ndatasets: 7\n")  # once a TypeError
@example("manifestVersion: 1.0.0\nmodel:\n  path: w.bin\n2024-01-01: x\n")  # a key JSON cannot carry
def test_kitfiles_answer_or_refuse(context: Path, text: str) -> None:
    if _read_or_refused_in_one_line(lambda: read_kitfile(text, "Kitfile", str(context))) is not None:
        assert "&" not in text or "*" not in text  # an alias never got through


@FUZZ
@given(st.lists(MODELFILE_PIECES, max_size=10).map("".join))
@example("MODEL ../../etc/passwd\n")
def test_modelfiles_answer_or_refuse(context: Path, text: str) -> None:
    _read_or_refused_in_one_line(lambda: read_modelfile(text, "Modelfile", str(context)))


def test_link_hop_limit_matches_the_kernel() -> None:
    assert MAX_LINK_HOPS == 40
