"""Whether a repository is private or deleted, as its refs record says (:mod:`.refsrecord`),
asked of the registry at most every :data:`KEEP` seconds per repository: every request of a
token that may not read private repositories asks it (:class:`..access.Gate`), and so does a
revision named by digest or commit id (a deleted repository's manifests stay in the registry
until its garbage collection). What this serve changes it forgets at once (:meth:`RepoStates.forget`);
another replica sees the change within :data:`KEEP` seconds. A record not read
(:class:`.refsrecord.RecordUnread`) is raised to the request and never kept: no state is
derived from a failed read, so the next question asks the registry again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ocibridge.core import environment
from ocibridge.core.freshcache import FreshCache
from ocibridge.hubserver.repo.refsrecord import RecordUnread, RefsRecord, read_record
from ocibridge.hubserver.repo.sources import repo_parts

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.sources import Source

#: seconds a repository's record is believed
KEEP = 5.0
#: repositories remembered at most (the oldest are asked again)
REMEMBERED = 10_000


class RepoStates:
    """The refs records of repositories, each read again after :data:`KEEP` seconds."""

    def __init__(self, sources: Sequence[Source], *, keep: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.sources = sources
        if keep is None:
            keep = environment.seconds_at_most(environment.SERVE_STATE_KEEP, KEEP)
        self.keep = keep
        self.clock = clock
        self._lock = threading.Lock()
        self._known: FreshCache[str, RefsRecord] = FreshCache(keep, REMEMBERED, clock)
        #: how many changes this serve made (a listing of repositories kept from before is read again)
        self.changes = 0

    def of(self, repo_id: str) -> RefsRecord:
        """The repository's record (the empty one: public, not deleted, when it has none);
        :class:`.refsrecord.RecordUnread` when it was not read (nothing kept then)."""
        parts = repo_parts(repo_id)
        if parts is None:
            return RefsRecord()
        return self._known.get("/".join(parts), lambda: self._read(parts))

    def _read(self, parts: list[str]) -> RefsRecord:
        """The record of the first source holding a non-empty one (else the empty one)."""
        record = RefsRecord()
        for source in self.sources:
            repo = source.repository(parts)
            if repo is not None:
                record = read_record(repo)
                if record != RefsRecord():
                    break
        return record

    def private(self, repo_id: str) -> bool:
        return self.of(repo_id).private

    def gated(self, repo_id: str) -> str:
        """``"auto"`` or ``"manual"`` for a gated repository, ``""`` for one that is not."""
        return self.of(repo_id).gated

    def accepted(self, repo_id: str, user: str) -> bool:
        """Whether ``user``'s access request to the gated ``repo_id`` is accepted (:mod:`.accessrequests`)."""
        return any(a.user == user and a.status == "accepted" for a in self.of(repo_id).asks)

    def deleted(self, repo_id: str) -> bool:
        return self.of(repo_id).deleted

    def forget(self, repo_id: str) -> None:
        """This serve changed the record: the next question reads it again."""
        parts = repo_parts(repo_id)
        if parts is not None:
            self._known.forget("/".join(parts))  # before the count: a listing that sees it reads anew
            with self._lock:
                self.changes += 1


def listed_only(visible: Callable[[str], bool]) -> Callable[[str], bool]:
    """``visible`` (which repositories a listing shows) with a repository whose record was not
    read left out: a listing of many is not refused for one, and one that may be private is
    never listed on a guess."""

    def shown(repo_id: str) -> bool:
        try:
            return visible(repo_id)
        except RecordUnread:
            return False

    return shown
