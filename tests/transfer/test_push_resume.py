"""kill -9 or Ctrl-C of a real ``ocibridge push`` half-way through a large file, then the same
command: the upload continues from the registry's offset (the session URL was kept in the
cache) when the registry kept the session, and starts a new one when it did not. A Ctrl-C lets
the chunk in flight finish when it can within the interrupt's grace, so that distribution
itself keeps the session. Bytes are counted where the registry's side of the link sees them
(the fault proxy in front of a real registry), and the blob is read back from the registry and
hashed."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.faultproxy import buffer_request, throttle

from ocibridge.stores.registry.upload import RESUMABLE_MIN

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
SIZE = RESUMABLE_MIN + 32 * MiB  # 96 MiB: the smallest file sent as resumable chunks, plus some
CHUNK = 16 * MiB
RATE = 64 * MiB  # the first run is slowed so that the kill lands where it is meant to
#: The kill comes this far into a chunk: less than the chunk minus what the kernel's socket
#: buffers hold, so the chunk cannot still arrive whole after the process is gone (a chunk
#: that does is taken by the registry, whose answer is lost: see docs/transfers.md).
INTO_CHUNK = (512 * 1024, 2 * MiB)


def _model(tmp_path: Path) -> tuple[Path, str]:
    model = tmp_path / "model"
    model.mkdir()
    hasher = hashlib.sha256()
    with open(model / "weights.bin", "wb") as f:
        for _ in range(SIZE // (16 * MiB)):
            block = os.urandom(16 * MiB)
            hasher.update(block)
            f.write(block)
    return model, "sha256:" + hasher.hexdigest()


def _push(proxy, repo: str, model: Path, cache: Path, chunk: int | None = CHUNK) -> list[str]:
    sizes = ["--chunk-size", str(chunk)] if chunk else []  # None: chunks sized by time
    return [sys.executable, "-m", "ocibridge", "push", str(model), f"{proxy.host}/{repo}:v1",
            "--plain-http", "-q", *sizes]


def _env(cache: Path) -> dict[str, str]:
    # a first push, as a user's: the digest is learnt while sending
    return dict(os.environ, OCIBRIDGE_CACHE=str(cache), OCIBRIDGE_DIGEST_CACHE="0")


def _upload_bytes(proxy) -> int:
    return sum(r.request_bytes for r in proxy.requests if "/blobs/uploads/" in r.path)


def _kill_at_half(cmd: list[str], env: dict[str, str], proxy) -> int:
    """SIGKILL the push once half the file reached the proxy, early in a chunk."""
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the push did not get half-way"
        patches = proxy.requests_matching("PATCH", "/blobs/uploads/")
        into = patches[-1].request_bytes if patches else 0
        if _upload_bytes(proxy) - into >= SIZE // 2 and INTO_CHUNK[0] <= into <= INTO_CHUNK[1]:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return _upload_bytes(proxy)


def _interrupt_at(cmd: list[str], env: dict[str, str], proxy, at: int) -> int:
    """SIGINT the push once ``at`` bytes of the file reached the proxy; the bytes that had
    reached it when the process was gone."""
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _upload_bytes(proxy) < at:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the push did not get that far"
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # a bound on a hang; the bench measures how soon it exits
    assert proc.returncode == 130, err
    gone = _upload_bytes(proxy)
    assert gone < SIZE, gone  # it stopped at the signal, short of the file's end
    return gone


def _registry_digest(registry, repo: str, digest: str) -> str:
    hasher = hashlib.sha256()
    with httpx.stream("GET", f"{registry.url}/v2/{repo}/blobs/{digest}") as response:
        assert response.status_code == 200
        for data in response.iter_bytes():
            hasher.update(data)
    return "sha256:" + hasher.hexdigest()


def _sessions(cache: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (cache / "uploads").glob("*.json") if p.stat().st_size]


def test_killed_push_continues_from_the_registrys_offset(registry, fault_proxy, unique_repo, tmp_path):
    """Behind a proxy that forwards whole request bodies only (nginx's default), the chunk cut
    by the kill never reaches the registry, its session survives, and the rerun sends only
    what the registry did not confirm."""
    model, digest = _model(tmp_path)
    cache = tmp_path / "cache"
    cmd, env = _push(fault_proxy, unique_repo, model, cache), _env(cache)
    fault_proxy.add("PATCH", "/blobs/uploads/", buffer_request(RATE), times=None)
    first = _kill_at_half(cmd, env, fault_proxy)
    saved = _sessions(cache)
    assert len(saved) == 1 and 0 < saved[0]["offset"] <= first, saved
    assert saved[0]["offset"] == SIZE // 2  # the chunks the registry confirmed before the kill

    fault_proxy.clear()
    fault_proxy.add("PATCH", "/blobs/uploads/", buffer_request(), times=None)
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    again = _upload_bytes(fault_proxy)
    assert again <= SIZE - saved[0]["offset"] + 64 * 1024, (again, saved)  # + config and manifest
    assert again <= 0.55 * SIZE, (first, again)
    resumed = fault_proxy.requests_matching("GET", "/blobs/uploads/")
    assert resumed and resumed[0].status == 204  # the registry told where the session stands
    assert _registry_digest(registry, unique_repo, digest) == digest
    assert _sessions(cache) == []  # done: nothing left to resume


def test_killed_push_starts_over_when_the_registry_dropped_the_session(
        registry, fault_proxy, unique_repo, tmp_path):
    """Straight to distribution 2.8, the cut chunk reaches the registry, which then refuses the
    session (404 BLOB_UPLOAD_INVALID on the kept URL): the rerun starts a new one and the push
    completes, every byte sent again."""
    model, digest = _model(tmp_path)
    cache = tmp_path / "cache"
    cmd, env = _push(fault_proxy, unique_repo, model, cache), _env(cache)
    fault_proxy.add("PATCH", "/blobs/uploads/", throttle(RATE), times=None)
    _kill_at_half(cmd, env, fault_proxy)
    assert len(_sessions(cache)) == 1

    fault_proxy.clear()
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    dropped = fault_proxy.requests_matching("GET", "/blobs/uploads/")
    assert [r.status for r in dropped] == [404]
    assert _upload_bytes(fault_proxy) >= SIZE
    assert _registry_digest(registry, unique_repo, digest) == digest
    assert _sessions(cache) == []


def test_ctrl_c_lets_the_chunk_in_flight_finish_and_the_rerun_sends_the_rest(
        registry, fault_proxy, unique_repo, tmp_path):
    """Straight to distribution 2.8 (the proxy only paces, a cut body reaches the registry):
    with chunks sized by time (the default), the chunk in flight at the Ctrl-C can finish
    within the grace, so the registry confirms every byte it got, the session stays valid, and
    the same command then sends only the rest."""
    model, digest = _model(tmp_path)
    cache = tmp_path / "cache"
    cmd, env = _push(fault_proxy, unique_repo, model, cache, chunk=None), _env(cache)
    fault_proxy.add("PATCH", "/blobs/uploads/", throttle(RATE), times=None)
    _interrupt_at(cmd, env, fault_proxy, SIZE // 2)
    patches = fault_proxy.requests_matching("PATCH", "/blobs/uploads/")
    assert len(patches) >= 3 and all(p.status == 202 for p in patches), patches  # none was cut
    first = sum(p.request_bytes for p in patches)  # the weights' (the small config goes by PUT)
    saved = _sessions(cache)
    assert len(saved) == 1 and saved[0]["offset"] == first >= SIZE // 2, (saved, first)

    fault_proxy.clear()
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resumed = fault_proxy.requests_matching("GET", "/blobs/uploads/")
    assert [r.status for r in resumed] == [204]  # distribution kept the session
    again = _upload_bytes(fault_proxy)
    assert again <= SIZE - first + 64 * 1024 and again <= 0.55 * SIZE, (first, again)
    assert _registry_digest(registry, unique_repo, digest) == digest
    assert _sessions(cache) == []


def test_ctrl_c_ends_a_fixed_chunk_early_and_the_rerun_resumes(registry, fault_proxy, unique_repo, tmp_path):
    """A --chunk-size chunk far from its end at the Ctrl-C (48 MiB chunks at 32 MiB/s, the
    signal 4 MiB into the second) used to be cut as a Content-Range chunk, and distribution then
    refused the session: everything went again (issue 32). Fixed-size chunks are streamed now:
    the chunk ends early as a whole request, the registry confirms it, and the rerun continues."""
    model, digest = _model(tmp_path)
    cache = tmp_path / "cache"
    cmd, env = _push(fault_proxy, unique_repo, model, cache, chunk=48 * MiB), _env(cache)
    fault_proxy.add("PATCH", "/blobs/uploads/", throttle(RATE // 2), times=None)
    _interrupt_at(cmd, env, fault_proxy, 52 * MiB)
    patches = [p for p in fault_proxy.requests_matching("PATCH", "/blobs/uploads/")
               if p.request_bytes > 1024]  # the weights' (the small config goes beside them)
    assert [p.status for p in patches] == [202, 202], [(p.status, p.request_bytes) for p in patches]
    assert patches[0].request_bytes == 48 * MiB and 0 < patches[1].request_bytes < 48 * MiB
    first = sum(p.request_bytes for p in patches)
    assert [s["offset"] for s in _sessions(cache)] == [first]

    fault_proxy.clear()
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [r.status for r in fault_proxy.requests_matching("GET", "/blobs/uploads/")] == [204]
    assert _upload_bytes(fault_proxy) <= SIZE - first + 64 * 1024
    # sent while hashed (issue 43): the notice names the file, whose digest is not known yet
    assert f"resumed {model / 'weights.bin'} at {100 * first // SIZE}%" in done.stderr, done.stderr
    assert _registry_digest(registry, unique_repo, digest) == digest


def test_a_source_shorter_than_its_size_fails_the_streamed_chunks(registry, unique_repo):
    """A streamed chunk has no declared length: a source that ends early ends it short, which
    must be an error (not an endless run of empty chunks), and the session is dropped."""
    from ocibridge.errors import DigestMismatch
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.registry import open_repository
    from ocibridge.stores.registry.upload import BlobUpload

    data = os.urandom(3 * MiB)
    desc = Descriptor(mediaType="application/octet-stream", digest="sha256:" + "1" * 64, size=12 * MiB)
    with open_repository(host=registry.host, repository=unique_repo, plain_http=True) as store:
        upload = BlobUpload(store.client, unique_repo, desc, io.BytesIO(data), chunked=True)
        with pytest.raises(DigestMismatch, match="ended at byte 3145728 of 12582912"):
            upload.run()
    assert upload.location is None  # cancelled (DELETE), nothing kept


def test_upload_states_too_old_to_resume_are_removed(tmp_path, monkeypatch):
    from ocibridge.stores.registry.uploadstate import MAX_AGE, UploadState, uploads_dir

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path))
    uploads_dir().mkdir(parents=True)
    old, recent = uploads_dir() / "old.json", uploads_dir() / "recent.json"
    for path in (old, recent):
        path.write_text('{"location": "http://x/v2/r/blobs/uploads/u", "offset": 1, "saved": 0}')
    aged = time.time() - MAX_AGE - 60
    os.utime(old, (aged, aged))
    state = UploadState.open("http://registry", "repo", "digest:sha256:" + "0" * 64)
    assert state is not None and state.location is None  # nothing kept for this upload
    state.close()
    assert not old.exists() and recent.exists()
    assert list(uploads_dir().iterdir()) == [recent]  # the empty state of this upload is gone too
