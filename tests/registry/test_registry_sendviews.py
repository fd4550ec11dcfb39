"""A blob ingested from a source that gives its bytes as batches of views of its own buffer (serve's
build of a Xet file from its xorbs) goes to the registry from those views: the upload copies none
of its bytes into memory of its own, each batch is sent before the next refills the buffer, the
``--limit-rate`` budget is taken from, and a source that fails at its end leaves no blob. Over
TLS the batches go through httpx as bytes, and the blob is the same."""

import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository

SIZE = 24 * 1024 * 1024 + 12_345
BATCH = 4 * 1024 * 1024
PIECE = 64 * 1024 + 8  # a xorb's chunks: not a divisor of the batch


class _OneBuffer(io.RawIOBase):
    """``data`` as batches of ``PIECE``-sized views of one buffer, refilled for each batch, and
    readable as a file too (the only way main takes it). ``fail``: the batches end in an error."""

    def __init__(self, data: bytes, fail: bool = False) -> None:
        super().__init__()
        self._data, self._fail = memoryview(data), fail
        self._buf = bytearray(BATCH)
        self._zeros = memoryview(bytes(BATCH))
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), len(self._data) - self._at)
        if n == 0 and self._fail:
            raise OSError("the source went bad at its end")
        buffer[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n

    def batches(self):
        view = memoryview(self._buf)
        for start in range(0, len(self._data), BATCH):
            n = min(BATCH, len(self._data) - start)
            view[:n] = self._data[start:start + n]
            yield [view[i:min(i + PIECE, n)] for i in range(0, n, PIECE)]
            view[:n] = self._zeros[:n]  # the next batch overwrites it: what was not sent by now is lost
        if self._fail:
            raise OSError("the source went bad at its end")


class _Budget:
    def __init__(self) -> None:
        self.taken = 0

    def take(self, n: int) -> None:
        self.taken += n


def _store(reg, repo, **options):
    return open_repository(parse_registry_reference(f"{reg.host}/{repo}:x"), **options)


def _blob(store, digest: str) -> bytes | None:
    desc = Descriptor(mediaType="application/octet-stream", digest=digest, size=SIZE)
    if not store.exists_now(desc):
        return None
    with store.open_blob(desc) as f:
        return f.read()


def test_batches_go_from_the_source_buffer_uncopied(registry, unique_repo):
    """Measured in a process of its own: the peak is of every thread's memory, and a test
    process may hold other tests' servers."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, __file__, registry.host, unique_repo], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    data = _data()
    assert (got["digest"], got["size"]) == ("sha256:" + hashlib.sha256(data).hexdigest(), SIZE)
    with _store(registry, unique_repo) as store:
        assert _blob(store, got["digest"]) == data
    assert got["peak"] < 512 * 1024, f"the upload held {got['peak']} bytes of its own: its bytes were copied"
    assert got["taken"] >= SIZE


def _data() -> bytes:
    return random.Random(SIZE).randbytes(SIZE)


def _ingest_measured(host: str, repo: str) -> dict[str, object]:
    """What the test above reads: the ingest's digest and size, the peak of the memory Python
    allocated during it, and what the rate budget was asked for."""
    source, budget = _OneBuffer(_data()), _Budget()
    with open_repository(host=host, repository=repo, plain_http=True, rate_budget=budget) as store:
        store.ingest_blob(io.BytesIO(b"first"))  # the modules it takes are imported before the count
        tracemalloc.start()
        digest, size = store.ingest_blob(source)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {"digest": digest, "size": size, "peak": peak, "taken": budget.taken}


def test_a_source_failing_at_its_end_leaves_no_blob(registry, unique_repo):
    data = os.urandom(SIZE)
    with _store(registry, unique_repo) as store:
        with pytest.raises(OSError, match="went bad"):
            store.ingest_blob(_OneBuffer(data, fail=True))
        assert _blob(store, "sha256:" + hashlib.sha256(data).hexdigest()) is None


def test_over_tls_the_batches_go_as_bytes(tls_registry, unique_repo):
    data = os.urandom(SIZE)
    with _store(tls_registry, unique_repo, ca_file=str(tls_registry.ca_file)) as store:
        digest, size = store.ingest_blob(_OneBuffer(data))
        assert (digest, size) == ("sha256:" + hashlib.sha256(data).hexdigest(), SIZE)
        assert _blob(store, digest) == data


if __name__ == "__main__":
    print(json.dumps(_ingest_measured(sys.argv[1], sys.argv[2])))
