"""Candidate digests for a push's large new files from what the destination repository holds.

The content-sample index (``sampleindex``) knows files this machine hashed before. A new
version of a model pushed from another machine (a CI runner, a colleague's laptop) under a new
tag has none of that, and its large files went out whole even when the repository held them
under the previous tag. The repository's own manifests name their files (each raw layer's
title annotation) with sizes: a file of the same path and size is a candidate when the first
and last MiB of the registry's blob (two Range requests, 2 MiB) hash like the file's own, the
sample the index keeps. Then it is asked about and confirmed by hashing locally, as a candidate
of the index is; a file whose ends differ (a fine-tune of the same size) is new content, sent
while it is hashed, at the price of the 2 MiB.

Which manifests: ``latest`` and then the tags the registry lists last (distribution lists them
sorted: ``v10`` after ``v1``), :data:`MAX_MANIFESTS` in all, single-platform manifests only.
"""

from __future__ import annotations

import threading

from ocibridge.errors import OcibridgeError
from ocibridge.oci.mediatypes import ANNOTATION_TITLE
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore
from ocibridge.stores.ranged import RangedBlobSource, read_full
from ocibridge.transfer import sampleindex

#: tagged manifests read for candidates (each a small GET)
MAX_MANIFESTS = 8
#: a manifest larger than this is skipped (a model's is a few KiB)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024


class RepositoryHints:
    """Candidates from one destination repository; its manifests are read once, on first use."""

    def __init__(self, store: ReadableStore):
        self._store = store
        self._by_file: dict[tuple[str, int], str] | None = None
        self._lock = threading.Lock()

    def candidate(self, path: str, size: int, sample: str) -> str | None:
        """The digest of a blob the repository holds for ``path`` of ``size`` bytes whose first
        and last MiB hash to ``sample`` (``sampleindex.sample_of``), or None."""
        digest = self._files().get((path, size))
        if digest is None or not isinstance(self._store, RangedBlobSource):
            return None
        try:
            remote = _sample(self._store, Descriptor(mediaType="application/octet-stream", digest=digest, size=size))
        except OcibridgeError:
            return None
        return digest if remote == sample else None

    def _files(self) -> dict[tuple[str, int], str]:
        with self._lock:
            if self._by_file is None:
                self._by_file = _read_files(self._store)
            return self._by_file


def _read_files(store: ReadableStore) -> dict[tuple[str, int], str]:
    try:
        tags = store.tags()
    except OcibridgeError:
        return {}  # a new repository (404), or a registry that does not list
    chosen = (["latest"] if "latest" in tags else []) + [t for t in reversed(tags) if t != "latest"]
    files: dict[tuple[str, int], str] = {}
    for tag in chosen[:MAX_MANIFESTS]:
        try:
            desc = store.resolve(tag)
            if desc.size > MAX_MANIFEST_BYTES:
                continue
            manifest = parse_manifest_bytes(store.fetch_bytes(desc))
        except OcibridgeError:
            continue
        if not isinstance(manifest, Manifest):
            continue  # an index: its platforms are other artifacts
        for layer in manifest.layers:
            title = (layer.annotations or {}).get(ANNOTATION_TITLE)
            if title:
                files.setdefault((title, layer.size), layer.digest)
    return files


def _sample(source: RangedBlobSource, desc: Descriptor) -> str:
    """The SHA-256 of the blob's first and last MiB, read with two Range requests."""
    head, tail = (_read_range(source, desc, start, end) for start, end in sampleindex.sample_spans(desc.size))
    return sampleindex.sample_digest(head, tail)


def _read_range(source: RangedBlobSource, desc: Descriptor, start: int, end: int) -> bytes:
    reader = source.open_blob_range(desc, start, None if end == desc.size else end)
    try:
        buffer = bytearray(end - start)
        return bytes(buffer[:read_full(reader, memoryview(buffer))])
    finally:
        reader.close()
