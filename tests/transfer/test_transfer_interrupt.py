"""Ctrl-C, SIGTERM and kill -9 of a real ``ocibridge`` process pulling through a throttled
link (fault proxy before a real registry): the process stops while the blob is still coming,
verified blobs stay in the layout, the partial blob stays for the next run, nothing sits
half-written at a final path, and the same command then finishes asking only for the rest."""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.faultproxy import corrupt, corrupt_at, reroute, throttle

from ocibridge.chunks.bound import remote_bound_table
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, binding_annotations, build_table, chunk_stream
from ocibridge.cli import main
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores import partial
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.partial import PARTIAL_PREFIX, partial_path
from ocibridge.stores.registry import open_repository

REPO_ROOT = Path(__file__).resolve().parents[2]
SIZE = 4 * 1024 * 1024
RATE = 512 * 1024  # the throttled blob would take 8 s
#: bytes come to the file in pieces of 1 MiB: interrupt once more than one has arrived
INTERRUPT_AFTER = 1536 * 1024
#: the first piece comes at once, then the throttle: the interrupt is as long after the first
#: piece arrived as at the rate from the start (a second), without its two seconds of waiting
UNPACED = 1024 * 1024
#: how long an interrupted process is waited for: a bound on a hang, not a speed (that it stopped
#: mid-transfer shows in what it left: the blob in flight is partial, the exit is 130)
EXIT_BOUND = 60.0


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


def stderr_once_gone(proc: subprocess.Popen) -> str:
    """The stderr of a process sent a signal, once it exited; a failure names a process that never did."""
    try:
        return proc.communicate(timeout=EXIT_BOUND)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the process was still running long after the signal") from None


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
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE, UNPACED), times=1)
    layout = tmp_path / "layout"
    args = ["copy", f"{fault_proxy.host}/{unique_repo}:v1", f"oci:{layout}:v1", "--concurrency", "1"]
    proc = _start(args)
    _wait_for_bytes(fault_proxy, big, INTERRUPT_AFTER, proc)
    proc.send_signal(sig)
    err = stderr_once_gone(proc)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and err.strip().splitlines()[-1] == (
            "ocibridge: interrupted: the blobs copied and the part of the one in flight are kept; "
            "run the same command again to resume"), err
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
    err = stderr_once_gone(proc)
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


def _pull_interrupted(fault_proxy, ref: str, big: Descriptor, out: Path) -> str:
    """A pull into ``out`` of ``ref``, whose ``big`` layer comes throttled, stopped by Ctrl-C once
    INTERRUPT_AFTER of it arrived: it exits 130. Its stderr."""
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE, UNPACED), times=1)
    proc = _start(["pull", ref, "-o", str(out), "--concurrency", "1"])
    _wait_for_bytes(fault_proxy, big, INTERRUPT_AFTER, proc)
    proc.send_signal(signal.SIGINT)
    err = stderr_once_gone(proc)
    assert proc.returncode == 130, err
    return err


def test_interrupted_directory_pull_resumes_from_the_cache(registry, fault_proxy, unique_repo, tmp_path):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(model), ref, "-q"]) == 0
    big = Descriptor.for_bytes(OCI_LAYER_TAR, (model / "weights.bin").read_bytes())
    out = tmp_path / "out"
    _pull_interrupted(fault_proxy, ref, big, out)
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
    # each part's first half MiB at once, its second paced: killed once each has sent a MiB
    fault_proxy.add("GET", f"/blobs/{big.digest}", throttle(RATE / 2, UNPACED // 2), times=None)
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


# -- a layer checked by the chunk table its manifest binds (issue 91) -------------------------
def _pull_cache() -> Path:
    return Path(os.environ["OCIBRIDGE_CACHE"]) / "pulls"


def _held_under_digest(digest: str) -> list[str]:
    """What the pull cache keeps by the layer digest (its blob or its partial file)."""
    blobs = _pull_cache() / "blobs" / "sha256"
    hexdigest = digest.split(":", 1)[1]
    return [p.name for p in blobs.iterdir() if hexdigest in p.name] if blobs.is_dir() else []


def _push_tabled(model: Path, ref: str) -> None:
    """Push's default table, for a 4 MiB file (the default binds one from 64 MiB)."""
    assert main(["push", str(model), ref, "-q", "--chunk-threshold", "1M"]) == 0


def _table_key(registry, repo: str, tag: str, digest: str) -> str:
    store = open_repository(host=registry.host, repository=repo)
    manifest = store.resolve(tag)
    assert ANNOTATION_DIGEST in (parse_manifest_bytes(store.fetch_bytes(manifest)).annotations or {})
    table = remote_bound_table(store, manifest)
    assert table is not None
    return table.layers[digest].content_key(table.chunk_size)


def test_an_interrupted_tabled_pull_resumes_under_the_table_key_and_hashes_no_sha256(
        registry, fault_proxy, unique_repo, tmp_path, monkeypatch):
    model = _model_with_big_file(tmp_path / "m")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    _push_tabled(model, ref)
    data = (model / "weights.bin").read_bytes()
    big = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    key = _table_key(registry, unique_repo, "v1", big.digest)
    out = tmp_path / "out"
    _pull_interrupted(fault_proxy, ref, big, out)
    kept = partial_path(_pull_cache() / "tabled" / key, big.digest)
    assert kept.stat().st_size > 0  # the bytes that landed, under the table's content key
    assert _held_under_digest(big.digest) == []  # and nothing under the layer digest

    sha256_of = []  # the whole-blob hashers the download makes, by digest
    whole = partial.new_hasher
    monkeypatch.setattr(partial, "new_hasher", lambda digest: (sha256_of.append(digest), whole(digest))[1])
    before = len(fault_proxy.requests)
    assert main(["pull", ref, "-o", str(out), "-q"]) == 0
    assert (out / "weights.bin").read_bytes() == data
    assert big.digest not in sha256_of  # checked by the table's chunks alone
    big_gets = [r.range for r in fault_proxy.requests[before:] if r.path.endswith(big.digest)]
    assert len(big_gets) == 1 and big_gets[0] is not None and big_gets[0] != "bytes=0-"  # resumed
    assert [p for p in (_pull_cache() / "tabled").rglob("*") if not p.is_dir()] == []  # taken back once it succeeded
    assert _held_under_digest(big.digest) == []


def _forge(registry, repo: str, honest_tag: str, big: Descriptor, chunks_of: bytes, tag: str) -> list[Descriptor]:
    """A manifest like ``honest_tag``'s (big layer first) that binds a table claiming the chunks
    of ``chunks_of`` for ``big``'s digest; its layers."""
    store = open_repository(host=registry.host, repository=repo)
    desc = store.resolve(honest_tag)
    manifest = parse_manifest_bytes(store.fetch_bytes(desc))
    assert isinstance(manifest, Manifest)
    table = build_table([dataclasses.replace(chunk_stream(io.BytesIO(chunks_of)), digest=big.digest)])
    store.push_blob(table.descriptor(), io.BytesIO(table.to_bytes()))
    layers = sorted(manifest.layers, key=lambda layer: layer.digest != big.digest)
    forged = manifest.model_copy(update={"layers": layers, "annotations": {**(manifest.annotations or {}),
                                                                           **binding_annotations(table)}})
    data = forged.to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, tag)
    return layers


def test_a_forged_table_cannot_plant_bytes_a_tableless_pull_trusts(registry, fault_proxy, unique_repo, tmp_path):
    model = _model_with_big_file(tmp_path / "m")
    honest = f"{fault_proxy.host}/{unique_repo}:honest"
    assert main(["push", str(model), honest, "-q", "--no-chunks"]) == 0
    real = (model / "weights.bin").read_bytes()
    big = Descriptor.for_bytes(OCI_LAYER_TAR, real)
    planted = os.urandom(SIZE)
    planted_desc = Descriptor.for_bytes(OCI_LAYER_TAR, planted)
    with open_repository(host=registry.host, repository=unique_repo) as store:
        store.push_blob(planted_desc, io.BytesIO(planted))
    # a registry that sends the planted bytes for the honest layer's digest, under a manifest
    # whose table claims them for that digest; the pull fails on a later layer, keeping what it had
    layers = _forge(registry, unique_repo, "honest", big, planted, "forged")
    fault_proxy.add("GET", f"/blobs/{big.digest}", reroute(f"/v2/{unique_repo}/blobs/{planted_desc.digest}"),
                    times=None)
    fault_proxy.add("GET", f"/blobs/{layers[1].digest}", corrupt(), times=None)
    out = tmp_path / "forged"
    assert main(["pull", f"{fault_proxy.host}/{unique_repo}:forged", "-o", str(out), "-q",
                 "--concurrency", "1"]) != 0
    kept = list((_pull_cache() / "tabled").glob("*/*"))
    assert [p.read_bytes() for p in kept] == [planted]  # the table's word, kept under its key only
    assert _held_under_digest(big.digest) == []

    fault_proxy.clear()
    out = tmp_path / "honest"
    assert main(["pull", honest, "-o", str(out), "-q"]) == 0
    assert (out / "weights.bin").read_bytes() == real  # fetched and checked by its digest
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{big.digest}")) == 1


@pytest.mark.parametrize("fault", ["flipped byte", "forged table"])
def test_a_wrong_chunk_is_one_clear_error_and_dest_is_unchanged(registry, fault_proxy, unique_repo, tmp_path,
                                                                 capsys, fault):
    model = _model_with_big_file(tmp_path / "m")
    data = (model / "weights.bin").read_bytes()
    big = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    if fault == "flipped byte":
        _push_tabled(model, ref)
        fault_proxy.add("GET", f"/blobs/{big.digest}", corrupt_at(2 * 1024 * 1024 + 5), times=None)
        wrong = "chunk 2 (bytes 2097152-3145727)"
    else:  # a table the manifest binds whose chunks are not the blob's: the blob is refused
        assert main(["push", str(model), f"{fault_proxy.host}/{unique_repo}:honest", "-q", "--no-chunks"]) == 0
        _forge(registry, unique_repo, "honest", big, data[:-1] + bytes([data[-1] ^ 1]), "v1")
        wrong = "chunk 3 (bytes 3145728-4194303)"
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("kept\n")
    capsys.readouterr()
    assert main(["pull", ref, "-o", str(out), "-q"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{big.digest}: {wrong} does not match the chunk table" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"] and (out / "mine.txt").read_text() == "kept\n"
    assert _held_under_digest(big.digest) == []
