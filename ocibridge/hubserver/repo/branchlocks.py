"""The locks every write takes: one per (repo id, branch), and one for the refs record
(repo/refsrecord.py ``RECORD_LOCK``). Commits to a branch through this serve land one after the
other, each built on the one before (writes go to one serve: the writer lease, replicas/lease.py).

A repository ``move_repo`` is moving (its source and its destination) takes no write but the
move's own: every lock of it taken by another thread answers :class:`RepoMoving` (the Hub's 409)
once it is held, so a commit is refused before it is acknowledged, never acknowledged and then
left behind in the deleted source. The move waits for the writes that held a lock of the
repository when it was marked (they land before it copies)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ocibridge.errors import OcibridgeError


class RepoMoving(OcibridgeError):
    """A write to a repository while ``move_repo`` moves it (the Hub's 409): asked again once
    the move is done, it goes to where the repository is then."""


class Branches:
    """One re-entrant lock per (repo id, branch): ``create_repo`` holds ``main`` while its first
    commit (which takes it too) is made; and the repositories being moved."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._moving: dict[str, tuple[int, str]] = {}  # repo id (lower) -> (the mover's thread, why)

    @contextlib.contextmanager
    def lock(self, repo_id: str, branch: str) -> Iterator[None]:
        """Hold the lock of ``repo_id``'s ``branch``; :class:`RepoMoving` once held, when a move
        (in another thread) moves the repository."""
        with self._lock:
            held = self._locks.setdefault((repo_id.lower(), branch), threading.RLock())
        with held:
            with self._lock:
                mover = self._moving.get(repo_id.lower())
            if mover is not None and mover[0] != threading.get_ident():
                raise RepoMoving(mover[1])
            yield

    @contextlib.contextmanager
    def moving(self, repo_id: str, why: str) -> Iterator[None]:
        """Refuse every other write to ``repo_id`` (saying ``why``) while held; entered once the
        writes that held one of its locks have landed."""
        key = repo_id.lower()
        with self._lock:
            if key in self._moving:
                raise RepoMoving(self._moving[key][1])
            self._moving[key] = (threading.get_ident(), why)
            taken = [held for (repo, _), held in self._locks.items() if repo == key]
        try:
            for held in taken:  # a write under it when marked lands first; the next is refused
                with held:
                    pass
            yield
        finally:
            with self._lock:
                self._moving.pop(key, None)
