"""Archives that expand (issue 41, class 2): one archive rule for bundles and tar layers
(``layers/tarwalk.py``): sparse members of every encoding refused, each member written only from
bytes its entry really holds, so a whole bundle writes at most its own size.

The CLI cases run in a child whose file size is capped (``RLIMIT_FSIZE``: the unfixed reader
would die of ``SIGXFSZ`` instead of filling the disk) and whose peak RSS and the largest size of
its temporary directory (polled while it runs) are measured; every directory involved is
compared before and after."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ocibridge.api import bundle as bundle_api
from ocibridge.errors import OcibridgeError
from ocibridge.layers.apply import Tree, apply_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.models import Descriptor
from tests.hostile.test_hostile_trees import WEIGHT_TAR, _artifact
from tests.hostile_run import snapshot
from tests.k8s.test_k8s import _image

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
GiB = 1 << 30
FSIZE_CAP = 64 << 20  # what the child may write into one file
SPARSE_KINDS = ("gnu", "pax-0.0", "pax-0.1", "pax-1.0")


# -- building hostile tars ----------------------------------------------------------------------
def _chksum(header: bytearray) -> None:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)


def sparse_member(kind: str, name: str, realsize: int, data: bytes = b"z" * 512) -> bytes:
    """One sparse member of ``realsize`` bytes of which ``data`` is stored, in the given encoding."""
    if kind == "gnu":  # old GNU 'S': the map in the header
        info = tarfile.TarInfo(name)
        info.type, info.size = tarfile.GNUTYPE_SPARSE, len(data)
        header = bytearray(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")[-512:])
        header[386:398] = tarfile.itn(0, 12, tarfile.GNU_FORMAT)
        header[398:410] = tarfile.itn(len(data), 12, tarfile.GNU_FORMAT)
        header[482] = 0
        header[483:495] = tarfile.itn(realsize, 12, tarfile.GNU_FORMAT)
        _chksum(header)
        return bytes(header) + data + b"\0" * (-len(data) % 512)
    info = tarfile.TarInfo(name)
    body = data
    if kind == "pax-0.0":
        info.pax_headers = {"GNU.sparse.size": str(realsize), "GNU.sparse.offset": "0",
                            "GNU.sparse.numbytes": str(len(data))}
    elif kind == "pax-0.1":
        info.pax_headers = {"GNU.sparse.map": f"0,{len(data)}", "GNU.sparse.size": str(realsize)}
    else:  # 1.0: the map at the start of the data
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
                            "GNU.sparse.realsize": str(realsize)}
        head = f"1\n0\n{len(data)}\n".encode()
        body = head + b"\0" * (-len(head) % 512) + data
    info.size = len(body)
    return _entry(info, body)


def _entry(info: tarfile.TarInfo, body: bytes) -> bytes:
    """One PAX entry (its extended header, its header, its data padded to a block), no trailer."""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape") + body + b"\0" * (-len(body) % 512)


def regular_member(name: str, data: bytes, claimed: int | None = None) -> bytes:
    """A regular member; ``claimed``: the size a PAX header says instead of the real one."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    if claimed is not None:
        info.pax_headers = {"size": str(claimed)}
    return _entry(info, data)


def archive(*members: bytes) -> bytes:
    return b"".join(members) + b"\0" * 1024


def _blob_name(seed: str) -> str:
    return "blobs/sha256/" + hashlib.sha256(seed.encode()).hexdigest()


def hostile_bundle(path: Path, kind: str, size: int) -> Path:
    """A few KB: an OCI layout's first files, then a sparse (or lying) blob member of ``size``."""
    layout = regular_member("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    member = (regular_member(_blob_name(kind), b"y" * 1000, claimed=size) if kind == "pax-size"
              else sparse_member(kind, _blob_name(kind), size))
    path.write_bytes(archive(layout, member))
    return path


# -- running the CLI bounded and measured ---------------------------------------------------------
_CHILD = """
import resource, subprocess, sys
cap = int(sys.argv[1])
def limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
code = subprocess.call(sys.argv[3:], preexec_fn=limit)
with open(sys.argv[2], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def _size(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def run_bounded(tmpdir: Path, *args: str) -> tuple[int, str, float, int]:
    """(exit code, stderr, peak RSS in MB, largest disk use of ``tmpdir`` seen while it ran)."""
    peak_disk = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal peak_disk
        while not done.is_set():
            peak_disk = max(peak_disk, _size(tmpdir))
            time.sleep(0.01)

    watcher = threading.Thread(target=poll)
    watcher.start()
    with tempfile.NamedTemporaryFile("r") as rss:
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, str(FSIZE_CAP), rss.name, sys.executable,
                                   "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "TMPDIR": str(tmpdir)}, stdin=subprocess.DEVNULL)
        finally:
            done.set()
            watcher.join()
        figure = rss.read()
    return proc.returncode, proc.stderr, int(figure or 1 << 40) / 1024, peak_disk


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocibridge: error: "), err
    return lines[0]


@pytest.mark.parametrize("size", [200 << 20, GiB, 8 * GiB], ids=["200MiB", "1GiB", "8GiB"])
@pytest.mark.parametrize("kind", [*SPARSE_KINDS, "pax-size"])
@pytest.mark.parametrize("command", ["list", "load"])
def test_a_bundle_that_expands_is_refused_in_one_line_writing_nothing(tmp_path, kind, size, command):
    bundle = hostile_bundle(tmp_path / "b.tar", kind, size)
    assert bundle.stat().st_size < 16 << 10  # a few KB
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    before = snapshot(tmp_path)
    args = ["load", "--list", str(bundle)] if command == "list" else ["load", str(bundle), f"oci:{tmp_path}/dst"]
    code, err, peak_mb, peak_disk = run_bounded(scratch, *args)
    assert code == 1, err
    line = _one_line(err)
    assert ("sparse member" in line) if kind != "pax-size" else ("more than the" in line), line
    assert peak_disk < 1 << 20, peak_disk  # the archive is a few KB: nothing of the claimed size is written
    assert peak_mb < 300, peak_mb
    assert snapshot(tmp_path) == before  # nothing left in TMPDIR, no destination


def test_a_real_bundle_still_loads(tmp_path, capsys):
    from ocibridge.cli import main
    from tests.modelgen import make_model

    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/src:v1", "-q"]) == 0
    assert main(["save", f"oci:{tmp_path}/src:v1", "-o", str(tmp_path / "b.tar")]) == 0
    assert main(["load", "--list", str(tmp_path / "b.tar")]) == 0


# -- tar layers: pull and k8s mount ---------------------------------------------------------------
@pytest.mark.parametrize("kind", SPARSE_KINDS)
@pytest.mark.parametrize("compressed", [False, True], ids=["tar", "tar+gzip"])
@pytest.mark.parametrize("command", ["pull", "k8s-mount"])
def test_a_tar_layer_with_a_sparse_member_is_refused(tmp_path, kind, compressed, command):
    layer = archive(regular_member("ok.txt", b"fine"), sparse_member(kind, "weights.bin", 8 * GiB))
    if command == "pull":  # a model whose weights are a tar layer
        blob = gzip.compress(layer, mtime=0) if compressed else layer
        ref = _artifact(tmp_path / "model", [blob], WEIGHT_TAR + ("+gzip" if compressed else ""))
    else:  # an image the runtime mounts
        ref = f"oci:{_image(tmp_path, [layer], gzip_last=compressed).root}:v1"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "out"
    before = snapshot(tmp_path)
    if command == "pull":
        args = ["pull", ref, str(out), "-q"]
    else:
        args = ["k8s", "mount", ref, str(out), "--runtime", "containerd"]
    code, err, peak_mb, peak_disk = run_bounded(scratch, *args)
    assert code == 1, err
    assert "sparse member" in _one_line(err)
    assert peak_mb < 300 and _size(tmp_path) < 1 << 20
    assert snapshot(tmp_path) == before


# -- fuzzers ---------------------------------------------------------------------------------------
MEMBER = st.one_of(
    st.tuples(st.just("file"), st.binary(max_size=2048), st.none()),
    st.tuples(st.just("lying"), st.binary(max_size=600), st.integers(0, 1 << 40)),
    st.tuples(st.sampled_from(SPARSE_KINDS), st.binary(min_size=1, max_size=600), st.integers(0, 1 << 40)),
    st.tuples(st.just("garbage"), st.binary(min_size=512, max_size=512), st.none()),
)


def _build(members: list[tuple[str, bytes, int | None]]) -> bytes:
    parts = []
    for i, (kind, data, n) in enumerate(members):
        name = _blob_name(f"{i}-{kind}")
        if kind == "file":
            parts.append(regular_member(name, data))
        elif kind == "lying":
            parts.append(regular_member(name, data, claimed=n))
        elif kind == "garbage":
            parts.append(data)
        else:
            parts.append(sparse_member(kind, name, max(n or 0, len(data)), data))
    return archive(*parts)


@FUZZ
@given(st.lists(MEMBER, min_size=1, max_size=5))
@example([("gnu", b"x", 8 * GiB)])
@example([("pax-1.0", b"x", 8 * GiB)])
@example([("lying", b"x" * 10, 8 * GiB)])
def test_fuzz_bundle_reader_writes_at_most_the_archive(tmp_path_factory, members):
    data = _build([("file", b'{"imageLayoutVersion":"1.0.0"}', None), *members])
    path = tmp_path_factory.mktemp("fz") / "b.tar"
    path.write_bytes(data)
    written = 0
    real = bundle_api.write_sliced

    def counting(sink, chunk):  # type: ignore[no-untyped-def]
        nonlocal written
        written += len(chunk)
        real(sink, chunk)

    bundle_api.write_sliced = counting
    try:
        with bundle_api.opened(path):
            pass
    except OcibridgeError:
        pass
    finally:
        bundle_api.write_sliced = real
    assert written <= len(data)
    if all(kind == "file" or kind in SPARSE_KINDS for kind, _, _ in members):  # honest headers:
        assert written <= sum(len(d) for k, d, _ in members if k == "file") + 64  # no sparse byte written


@FUZZ
@given(st.lists(MEMBER, min_size=1, max_size=5), st.booleans())
@example([("pax-0.1", b"x", 8 * GiB)], True)
def test_fuzz_tar_layer_reader_never_expands_past_its_entries(tmp_path_factory, members, compressed):
    tar = _build(members)
    root = tmp_path_factory.mktemp("layer")
    layout = _image(root, [tar], gzip_last=compressed)
    desc = Descriptor.model_validate(json.loads(layout.fetch_bytes(layout.resolve("v1")))["layers"][0])
    mnt = root / "mnt"
    mnt.mkdir()
    with contextlib.suppress(OcibridgeError):
        apply_layer(layout, desc, Tree(mnt))
    on_disk = sum(p.stat().st_size for p in mnt.rglob("*") if p.is_file() and not p.is_symlink())
    assert on_disk <= len(tar)
    assert not any(kind in SPARSE_KINDS for kind, _, _ in members) or on_disk <= len(tar) - 512


def test_tar_members_reads_every_sparse_encoding_as_sparse():
    for kind in SPARSE_KINDS:
        data = archive(sparse_member(kind, "s", 8 * GiB))
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            (member,) = tar.getmembers()
            assert member.issparse() and member.isfile() and member.size == 8 * GiB, kind
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar, \
                pytest.raises(OcibridgeError, match="sparse member"):
            list(tar_members(tar, what=kind))
