"""Which repositories of a registry are known to hold a blob, learnt in this process.

A copy into one repository can then mount a blob that another repository of the same registry
received or showed earlier (a mirror job writing several models with a shared base into
separate repositories), instead of uploading it again: the cache Docker and containers/image
keep for cross-repository mounts. Knowledge only, never trusted: a mount the registry refuses
falls back to an upload.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Repositories remembered per blob, most recent first; older ones are forgotten.
HOMES_PER_BLOB = 3
#: Blobs remembered per process; the least recently seen are forgotten first.
MAX_BLOBS = 100_000


class BlobHomes:
    """``(registry base URL, digest) → repositories``, bounded and thread-safe."""

    def __init__(self, max_blobs: int = MAX_BLOBS) -> None:
        self._lock = threading.Lock()
        self._homes: OrderedDict[tuple[str, str], list[str]] = OrderedDict()
        self._max = max_blobs

    def remember(self, base: str, digest: str, repository: str) -> None:
        key = (base, digest)
        with self._lock:
            repos = [r for r in self._homes.pop(key, []) if r != repository]
            self._homes[key] = [repository, *repos][:HOMES_PER_BLOB]
            while len(self._homes) > self._max:
                self._homes.popitem(last=False)

    def candidates(self, base: str, digest: str) -> list[str]:
        with self._lock:
            return list(self._homes.get((base, digest), ()))

    def forget_all(self) -> None:
        with self._lock:
            self._homes.clear()


#: The process-wide knowledge every RegistryStore shares.
BLOB_HOMES = BlobHomes()
