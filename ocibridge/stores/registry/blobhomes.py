"""Which repositories of a registry are known to hold a blob: where a cross-repository mount
may take it from instead of an upload.

A copy into one repository can then mount a blob that another repository of the same registry
received or showed earlier, in this process (a mirror job writing several models with a shared
base into separate repositories) or in an earlier one (``push ./model REG/ml/other`` after
``REG/ml/model`` got the same files): the cache Docker and containers/image keep for
cross-repository mounts. This module is the in-process front (fast, and holding the guesses
a mirror shard is offered, which are never written down) of the on-disk index
(:mod:`.blobindex`). Knowledge only, never trusted: a mount the registry refuses falls back to
an upload, and a home that did not hold the blob is forgotten.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from ocibridge.core.writebehind import WriteBehind
from ocibridge.errors import OcibridgeError
from ocibridge.oci.empty import EMPTY_DIGEST
from ocibridge.oci.models import Index, Manifest, parse_manifest_bytes
from ocibridge.stores.registry.blobindex import HOMES_PER_BLOB, BlobIndex

__all__ = ["BLOB_HOMES", "HOMES_PER_BLOB", "MAX_BLOBS", "BlobHomes", "remember_blobs_of", "remember_manifest_blobs"]

#: Blobs remembered per process; the least recently seen are forgotten first.
MAX_BLOBS = 100_000


class BlobHomes:
    """``(registry base URL, digest) → repositories``, bounded and thread-safe; what is learnt
    goes to ``index`` too (when given), and what the process does not know is asked of it."""

    def __init__(self, max_blobs: int = MAX_BLOBS, index: BlobIndex | None = None) -> None:
        self._lock = threading.Lock()
        self._homes: OrderedDict[tuple[str, str], list[str]] = OrderedDict()
        self._max = max_blobs
        self._index = index
        # the index written by a thread of its own: a manifest read, before a download's first
        # byte, does not wait for sqlite (12-40 ms in a fresh process here)
        self._writes = WriteBehind("blobhomes-index") if index is not None else None

    def remember(self, base: str, digest: str, repository: str) -> None:
        """``repository`` holds ``digest``: sent, mounted or found there."""
        self.remember_all(base, repository, [digest])

    def remember_all(self, base: str, repository: str, digests: Iterable[str], *, on_disk: bool = True) -> None:
        """``repository`` holds every one of ``digests`` (a manifest read there names them);
        ``on_disk=False``: in this process only (a read that promises to write nothing)."""
        digests = list(digests)
        self._front(base, repository, digests)
        index = self._index
        if on_disk and index is not None and self._writes is not None:
            where = index.file()  # the cache root of now, wherever it is when the write runs
            if where is not None:
                self._writes.submit(lambda: index.remember(base, repository, digests, where))

    def settle(self) -> None:
        """Return once what this process learnt is in the on-disk index (a reader of the file
        calls it first; the rest is written at exit at the latest)."""
        if self._writes is not None:
            self._writes.settle()

    def suggest(self, base: str, digest: str, repository: str) -> None:
        """A guess for this process only (a mirror shard's sibling repositories): not written
        down, so a later run never tries it as if it had been seen."""
        self._front(base, repository, [digest])

    def candidates(self, base: str, digest: str) -> list[str]:
        """Repositories to try, most recent first: this process's, then the index's."""
        with self._lock:
            known = list(self._homes.get((base, digest), ()))
        if self._index is not None:
            self.settle()
            known += [r for r in self._index.candidates(base, digest) if r not in known]
        return known

    def forget(self, base: str, digest: str, repository: str) -> None:
        """``repository`` turned out not to hold ``digest`` (deleted since)."""
        with self._lock:
            repos = self._homes.get((base, digest))
            if repos is not None and repository in repos:
                repos.remove(repository)
        if self._index is not None:
            self.settle()  # (after this process's own remembering of it)
            self._index.forget(base, digest, repository)

    def forget_in_process(self) -> None:
        """What this process learnt; the on-disk index stays (a fresh process's view)."""
        with self._lock:
            self._homes.clear()

    def forget_all(self) -> None:
        """Everything, the on-disk index under the current cache root included."""
        self.forget_in_process()
        if self._index is not None:
            self.settle()
            self._index.clear()

    def _front(self, base: str, repository: str, digests: list[str]) -> None:
        with self._lock:
            for digest in digests:
                key = (base, digest)
                repos = [r for r in self._homes.pop(key, []) if r != repository]
                self._homes[key] = [repository, *repos][:HOMES_PER_BLOB]
            while len(self._homes) > self._max:
                self._homes.popitem(last=False)


#: The process-wide knowledge every RegistryStore shares, kept on disk across runs.
BLOB_HOMES = BlobHomes(index=BlobIndex())


def remember_manifest_blobs(base: str, repository: str, data: bytes, media_type: str, *, on_disk: bool = True) -> None:
    """A manifest read in ``repository`` names blobs it holds (a registry takes no manifest
    whose blobs it lacks): remembered as mount sources for later pushes (``on_disk``: as
    :meth:`BlobHomes.remember_all`)."""
    try:
        manifest = parse_manifest_bytes(data, media_type)
    except OcibridgeError:
        return
    remember_blobs_of(base, repository, manifest, on_disk=on_disk)


def remember_blobs_of(base: str, repository: str, manifest: Manifest | Index, *, on_disk: bool = True) -> None:
    """The blobs of a manifest already parsed, remembered as :func:`remember_manifest_blobs`
    does (an index names no blobs)."""
    if isinstance(manifest, Manifest):
        digests = [d for d in (manifest.config.digest, *(layer.digest for layer in manifest.layers))
                   if d != EMPTY_DIGEST]  # the empty JSON blob (records, leases): sent, never mounted
        if digests:
            BLOB_HOMES.remember_all(base, repository, digests, on_disk=on_disk)
