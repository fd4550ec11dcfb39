"""Reads of fetched commits, noted in memory as they are answered and written to each
repository's reads record (:mod:`.readsrecord`) by :meth:`ReadNotes.flush`: a read costs a dict
update, a flush one registry write per repository read since the last. A serve that stops between
two flushes loses those reads: their commits look older by at most one flush period."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.lifetimes.readsrecord import read_reads, write_reads
from ocibridge.hubserver.repo.sources import commit_of

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.hubserver.repo.sources import Repository

log = logging.getLogger("ocibridge.hubserver")


class Noting(Protocol):
    """What the proxy tells of each read it answers and each name it tags."""

    def read(self, found: Resolved) -> None: ...

    def named(self, repo: Repository, tag: str, commit: str) -> None: ...


class NotNoted:
    """No ``--upstream-keep``: nothing is noted."""

    def read(self, found: Resolved) -> None:
        pass

    def named(self, repo: Repository, tag: str, commit: str) -> None:
        pass


class _Pending:
    def __init__(self, repo: Repository):
        self.repo = repo
        self.read: dict[str, int] = {}
        self.named: dict[str, str] = {}


class ReadNotes:
    """Reads and names noted since the last flush, by repository."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        #: held while a repository's record is read and written (a flush, a sweep): one at a time here
        self.writing = threading.Lock()

    def read(self, found: Resolved) -> None:
        """``found`` was answered: noted when it is a commit the upstream gave (its id is the upstream's)."""
        if found.commit == commit_of(found.top.digest):
            return
        now = int(self.clock())
        with self._lock:
            self._of(found.repo).read[found.commit] = now

    def named(self, repo: Repository, tag: str, commit: str) -> None:
        """The proxy tagged ``tag`` on the upstream's ``commit`` (a branch's head moved, a name fetched)."""
        with self._lock:
            pending = self._of(repo)
            pending.named[tag] = commit
            pending.read[commit] = int(self.clock())

    def _of(self, repo: Repository) -> _Pending:
        pending = self._pending.get(repo.shown)
        if pending is None:
            pending = self._pending[repo.shown] = _Pending(repo)
        return pending

    def flush(self) -> int:
        """Every repository's noted reads merged into its record; the repositories written. One the
        registry refused is noted again for the next flush."""
        with self._lock:
            pending, self._pending = self._pending, {}
        written = 0
        for shown, noted in pending.items():
            try:
                with self.writing:
                    write_reads(noted.repo, read_reads(noted.repo).merged(noted.read, noted.named))
                written += 1
            except (OcibridgeError, OSError) as e:
                log.warning("upstream-keep: %s: its reads not recorded yet (tried again later): %s", shown, e)
                with self._lock:
                    again = self._of(noted.repo)
                    for commit, when in noted.read.items():
                        again.read[commit] = max(when, again.read.get(commit, 0))
                    again.named = {**noted.named, **again.named}
        return written
