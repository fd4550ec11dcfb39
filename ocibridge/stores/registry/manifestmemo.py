"""Manifests one store has already fetched and verified, kept for the rest of the command.

A pull, ``verify``, ``copy -r`` and ``inspect`` hand what they read down and need none of it
(tests/test_manifest_reads.py counts the same requests without it). What still reads a manifest
again is a command of steps apart: a mirror plans (sizing each artifact and its referrers), then
copies; without this, a signed model's mirror sent 41 manifest requests, not 34. A manifest
named by digest cannot change, so its verified bytes stand for it. Bounded in bytes, oldest out
first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: at most this many bytes of manifests are kept (a manifest is usually a few KiB)
MEMO_BYTES = 8 * 1024 * 1024


class ManifestMemo:
    """Verified manifest bytes and their media type, by digest; thread-safe."""

    def __init__(self, limit: int = MEMO_BYTES):
        self._limit = limit
        self._held = 0
        self._entries: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> tuple[str, bytes] | None:
        with self._lock:
            return self._entries.get(digest)

    def put(self, digest: str, media_type: str, data: bytes) -> None:
        """Keep ``data`` (already verified against ``digest``) unless it alone is over the limit."""
        if len(data) > self._limit:
            return
        with self._lock:
            old = self._entries.pop(digest, None)
            if old is not None:
                self._held -= len(old[1])
            self._entries[digest] = (media_type, data)
            self._held += len(data)
            while self._held > self._limit:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped)

    def forget(self, digest: str) -> None:
        with self._lock:
            old = self._entries.pop(digest, None)
            if old is not None:
                self._held -= len(old[1])
