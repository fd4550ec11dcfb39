"""A blob ingested from a source that gives its bytes as batches of views of its own buffer (serve's
build of a Xet file from its xorbs) goes to the registry from those views: the upload copies none
of its bytes into memory of its own, each batch is sent before the next refills the buffer, the
``--limit-rate`` budget is taken from, and a source that fails at its end leaves no blob. Over
TLS the batches go through httpx as bytes, and the blob is the same."""

import hashlib
import io
import os
import tracemalloc

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
    data = os.urandom(SIZE)
    budget = _Budget()
    source = _OneBuffer(data)
    with _store(registry, unique_repo, rate_budget=budget) as store:
        store.ingest_blob(io.BytesIO(b"first"))  # the modules it takes are imported before the count
        tracemalloc.start()
        try:
            digest, size = store.ingest_blob(source)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (digest, size) == ("sha256:" + hashlib.sha256(data).hexdigest(), SIZE)
        assert _blob(store, digest) == data
    assert peak < 512 * 1024, f"the upload held {peak} bytes of its own: its bytes were copied"
    assert budget.taken >= SIZE


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
