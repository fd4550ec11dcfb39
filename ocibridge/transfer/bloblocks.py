"""One transfer per digest among copies that share a destination (copy.py's ``blob_locks``)."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager

from ocibridge.core.keyedlocks import KeyedLocks


class BlobLocks:
    """One transfer per digest among copies that share a destination, and the digests they
    placed there.

    Artifacts of one repository share blobs (a base model, a tokenizer). Copied at once, two
    copies would both see a shared blob missing and both send it. Holding the digest's lock
    around check-and-send makes the second copy wait, then find the blob placed: it is
    skipped without a request (a mount, tried before any existence check, would link it
    again, and distribution 2.8 rewrites a link in place: a manifest PUT reading it meanwhile
    fails). The lock is released by a ``with`` block, so a failed transfer can never leave
    others waiting. Share one only among copies into one destination.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: KeyedLocks[str] = KeyedLocks()
        self._placed: set[str] = set()

    def placed(self, digest: str) -> bool:
        """Whether a copy sharing these locks put ``digest`` at the destination (or found it there)."""
        with self._guard:
            return digest in self._placed

    def mark_placed(self, digest: str) -> None:
        with self._guard:
            self._placed.add(digest)

    def hold(self, digest: str) -> AbstractContextManager[None]:
        return self._locks.hold(digest)
