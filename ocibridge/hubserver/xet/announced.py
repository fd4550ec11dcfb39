"""How many files a repository's coming Xet upload holds, as its preupload announced them.

huggingface_hub asks preupload for the mode of every file before hf_xet sends a byte, and hf_xet
then uploads all the LFS ones in one session: their chunks packed together into shared xorbs,
several files' uploads under way at once, in no order a xorb tells. The build ahead of the shard
(:mod:`.ahead`) takes a repository's stream of xorbs for one file; for an upload of several it
would build (and send to the registry) bytes the shard then names as other files, and all of it
is done again. So it stands down for a repository whose last preupload named more than one LFS
file, until that upload's shard comes (or :data:`STANDS_FOR` passes, for an upload given up).

An upload announced as one file says that file's size: a xorb whose bytes end before it cannot be
the file's last (the one a shard may name only part of), so the build takes it as whole once it is
verified, without waiting for the next xorb to begin (hf_xet forms that one first, ~0.5 s of its
CPU at the start of an upload). Only a guess, like the stream's order: the shard still decides.
"""

from __future__ import annotations

import threading
import time

#: seconds an announcement of several files holds when no shard comes to end it
STANDS_FOR = 3600.0


class Announced:
    """The repositories whose coming Xet upload holds several files (the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._several: dict[str, float] = {}  # repository: when its preupload named several files
        self._one: dict[str, tuple[int, float]] = {}  # repository: the one file's size, and when

    def files(self, repo_id: str, sizes: list[int]) -> None:
        """A preupload for ``repo_id`` named files of ``sizes`` that go to LFS (so over Xet). One
        file does not end an announcement of several: another preupload's may still come."""
        with self._lock:
            if len(sizes) > 1:
                self._several[repo_id] = time.monotonic()
                self._one.pop(repo_id, None)
            elif len(sizes) == 1:
                self._one[repo_id] = (sizes[0], time.monotonic())

    def several(self, repo_id: str) -> bool:
        """Whether ``repo_id``'s upload under way was announced as several files."""
        with self._lock:
            since = self._several.get(repo_id)
            if since is not None and time.monotonic() - since > STANDS_FOR:
                del self._several[repo_id]
                since = None
            return since is not None

    def size(self, repo_id: str) -> int | None:
        """The size of the one file ``repo_id``'s upload under way was announced as (None: not
        announced as one file)."""
        with self._lock:
            one = self._one.get(repo_id)
            if one is None or repo_id in self._several or time.monotonic() - one[1] > STANDS_FOR:
                return None
            return one[0]

    def shard_came(self, repo_id: str) -> None:
        """The upload's shard came: its files are named, the announcement is spent."""
        with self._lock:
            self._several.pop(repo_id, None)
            self._one.pop(repo_id, None)
