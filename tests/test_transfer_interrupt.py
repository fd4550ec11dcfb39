"""Ctrl-C, SIGTERM and kill -9 of a real ``ocibridge`` process pulling through a throttled
link (fault proxy before a real registry): the process stops while the blob is still coming,
verified blobs stay in the layout, the partial blob stays for the next run, nothing sits
half-written at a final path, and the same command then finishes asking only for the rest."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faultproxy import throttle

from ocibridge.cli import main
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.partial import PARTIAL_PREFIX, partial_path
from ocibridge.stores.registry import open_repository

REPO_ROOT = Path(__file__).resolve().parent.parent
SIZE = 4 * 1024 * 1024
RATE = 512 * 1024  # the throttled blob would take 8 s
#: bytes come to the file in pieces of 1 MiB: interrupt once more than one has arrived
INTERRUPT_AFTER = 1536 * 1024
#: an interrupted process must be gone well before the throttled transfer could finish
EXIT_BOUND = 8.0


def _artifact(registry, repo: str) -> tuple[Descriptor, Descriptor, bytes]:
    layer = os.urandom(SIZE)
    layer_desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    small = b"small layer" * 100
    small_desc = Descriptor.for_bytes(OCI_LAYER_TAR, small)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, b"{}")
    manifest = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=[small_desc, layer_desc])
    data = manifest.to_json_bytes()
    with open_repository(host=registry.host, repository=repo) as store:
        for desc, body in ((layer_desc, layer), (small_desc, small), (config_desc, b"{}")):
            store.push_blob(desc, io.BytesIO(body))
        store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "v1")
    return layer_desc, small_desc, layer


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ocibridge", *args], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_bytes(proxy, desc: Descriptor, at_least: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = [r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{desc.digest}")]
        if got and max(got) >= at_least:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the throttled download did not start")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupted_pull_keeps_verified_and_partial_blobs_then_resumes(
        sig, registry, fault_proxy, unique_repo, tmp_path):
    big, small, layer = _artifact(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE), times=1)
    layout = tmp_path / "layout"
    args = ["copy", f"{fault_proxy.host}/{unique_repo}:v1", f"oci:{layout}:v1", "--concurrency", "1"]
    proc = _start(args)
    _wait_for_bytes(fault_proxy, big, INTERRUPT_AFTER, proc)
    sent = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=EXIT_BOUND)
    assert time.monotonic() - sent < EXIT_BOUND
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and err.strip().endswith("interrupted"), err
    blobs = layout / "blobs" / "sha256"
    store = LayoutStore(layout)
    assert store.exists(small)  # verified before the interrupt: kept
    assert not store.exists(big) and not store.blob_path(big.digest).exists()
    kept = partial_path(blobs, big.digest).stat().st_size
    assert 0 < kept < SIZE
    assert [p.name for p in blobs.iterdir() if p.name.startswith(".ocibridge-tmp-")] == []

    assert main(args) == 0  # the same command again, no throttle now
    assert store.blob_path(big.digest).read_bytes() == layer
    ranges = [r.range for r in fault_proxy.requests_matching("GET", f"/blobs/{big.digest}")]
    assert ranges[0] is None and ranges[-1] is not None
    resumed_at = int(ranges[-1].removeprefix("bytes=").rstrip("-"))
    assert resumed_at > 0 and resumed_at <= kept
    assert [p.name for p in blobs.iterdir() if p.name.startswith(PARTIAL_PREFIX)] == []
    assert fault_proxy.requests_matching("GET", f"/blobs/{small.digest}").__len__() == 1


def test_a_second_ctrl_c_exits_at_once(registry, fault_proxy, unique_repo, tmp_path):
    big, _, _ = _artifact(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE), times=1)
    proc = _start(["copy", f"{fault_proxy.host}/{unique_repo}:v1", f"oci:{tmp_path / 'l'}:v1"])
    _wait_for_bytes(fault_proxy, big, 128 * 1024, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # two signals sent back to back may reach Python's handler as one
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=EXIT_BOUND)
    assert proc.returncode == 130 and "interrupted" in err


def test_ranged_flags_on_the_command_line(registry, fault_proxy, unique_repo, tmp_path, capsys):
    big, _, layer = _artifact(registry, unique_repo)
    dest = f"oci:{tmp_path / 'l'}:v1"
    assert main(["copy", f"{fault_proxy.host}/{unique_repo}:v1", dest,
                 "--part-size", "512K", "--parts", "2", "--limit-rate", "100M"]) == 0
    ranges = sorted(r.range for r in fault_proxy.requests_matching("GET", f"/blobs/{big.digest}"))
    starts = range(0, SIZE, 512 * 1024)
    assert ranges == sorted(f"bytes={s}-{s + 512 * 1024 - 1}" if s + 512 * 1024 < SIZE else f"bytes={s}-"
                            for s in starts)
    assert LayoutStore(tmp_path / "l").blob_path(big.digest).read_bytes() == layer
    assert main(["copy", f"{fault_proxy.host}/{unique_repo}:v1", dest, "--limit-rate", "fast"]) == 2  # a usage mistake
    assert "--limit-rate" in capsys.readouterr().err


def _model_with_big_file(root: Path) -> Path:
    root.mkdir()
    (root / "weights.bin").write_bytes(os.urandom(SIZE))
    (root / "config.json").write_text('{"a": 1}\n')
    (root / "README.md").write_text("# m\n")
    return root


def test_interrupted_directory_pull_resumes_from_the_cache(registry, fault_proxy, unique_repo, tmp_path):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE), times=1)
    out = tmp_path / "out"
    proc = _start(["pull", ref, "-o", str(out), "--concurrency", "1"])
    _wait_for_bytes(fault_proxy, big, INTERRUPT_AFTER, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=EXIT_BOUND)
    assert proc.returncode == 130, err
    assert not (out / "weights.bin").exists()  # nothing half-written at a final path
    before = len(fault_proxy.requests)
    assert main(["pull", ref, "-o", str(out), "-q"]) == 0
    assert (out / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()
    rerun = fault_proxy.requests[before:]
    big_gets = [r.range for r in rerun if r.path.endswith(big.digest)]
    assert len(big_gets) == 1 and big_gets[0] is not None and big_gets[0] != "bytes=0-"
    cache = Path(os.environ["OCIBRIDGE_CACHE"]) / "pulls" / "blobs" / "sha256"
    assert [p.name for p in cache.iterdir()] == []  # taken back once the pull succeeded


def test_pull_into_a_directory_skips_files_already_there(registry, fault_proxy, unique_repo, tmp_path):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    out = tmp_path / "out"
    assert main(["pull", ref, "-o", str(out), "-q"]) == 0
    (out / "README.md").write_text("# changed locally\n")
    before = len(fault_proxy.requests)
    assert main(["pull", ref, "-o", str(out), "-q", "--overwrite"]) == 0
    blob_gets = [r for r in fault_proxy.requests[before:] if r.method == "GET" and "/blobs/" in r.path]
    readme = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "README.md").read_bytes())
    assert [r.path.rsplit("/", 1)[1] for r in blob_gets] == [readme.digest]  # only the changed one
    assert (out / "README.md").read_text() == "# m\n"


def test_killed_ranged_pull_resumes_every_part(registry, fault_proxy, unique_repo, tmp_path):
    big, _, layer = _artifact(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE / 2), times=None)
    layout = tmp_path / "layout"
    args = ["copy", f"{fault_proxy.host}/{unique_repo}:v1", f"oci:{layout}:v1",
            "--part-size", "2M", "--parts", "2"]
    proc = _start(args)
    deadline = time.monotonic() + 30
    while sum(r.response_bytes for r in fault_proxy.requests_matching("GET", big.digest)) < SIZE // 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=EXIT_BOUND)
    fault_proxy.clear()  # no throttle, and count only the rerun
    assert main(args) == 0
    assert LayoutStore(layout).blob_path(big.digest).read_bytes() == layer
    again = fault_proxy.requests_matching("GET", big.digest)
    assert all(r.range is not None for r in again)
    assert sum(r.response_bytes for r in again) <= SIZE * 0.75  # the parts' rests, not the blob
