"""What the upstream takes back, the proxy takes back: a repository fetched while public that the
upstream now refuses serve's token (401/403/404: deleted, or made private to others), or now says
is private or gated, is refused here too, unless ``--upstream-allow-private`` (or, for a gated one,
``--upstream-allow-gated``) names it: then it is kept private (gated) here, for the readers serve's
own grants name (:mod:`.keptaccess`).

The upstream is asked at each ``--upstream-fresh`` re-check of a branch, and a read by commit id
asks it (the commit's model_info) when the repository was not asked for that long: the window in
which a repository taken back upstream is still served here is ``--upstream-fresh`` seconds. The
verdict is remembered in memory only (a restarted serve asks again at its first read), and lifted
when the upstream gives the repository again; an upstream that does not answer at all changes
nothing (the last verdict stands: served stale, or refused)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from ocibridge.hubserver.upstream.client import not_found
from ocibridge.hubserver.upstream.errors import UpstreamRefused

log = logging.getLogger("ocibridge.hubserver")
#: repositories whose last ask is remembered (past it, all are forgotten: each is asked once more)
REMEMBERED = 4096


@dataclass(frozen=True)
class TakenBack:
    """Why the upstream took a repository back, and how a reader is answered: as a repository
    neither here nor at the upstream (``hidden``), else the door's 403 naming ``rule``."""

    why: str
    hidden: bool
    rule: str = ""

    def refusal(self, repo_id: str, upstream: str) -> Exception:
        if self.hidden:
            return not_found(repo_id, upstream)
        return UpstreamRefused(f"{repo_id}: {self.why}; not served here", self.rule)


class Revocations:
    """The repositories the upstream took back, as its last answer about each said."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self._lock = threading.Lock()
        self._asked: dict[str, float] = {}  # repo id (lower-cased) -> when the upstream was last asked of it
        self._taken: dict[str, TakenBack] = {}

    def due(self, repo_id: str, every: float) -> bool:
        """Whether the upstream was not asked of ``repo_id`` for ``every`` seconds (then it is
        counted asked now: one ask a window, whatever the number of readers)."""
        key, now = repo_id.lower(), time.monotonic()
        with self._lock:
            last = self._asked.get(key)
            if last is not None and now - last < every:
                return False
            if len(self._asked) > REMEMBERED:
                self._asked.clear()
            self._asked[key] = now
            return True

    def asked(self, repo_id: str) -> None:
        with self._lock:
            self._asked[repo_id.lower()] = time.monotonic()

    def take_back(self, repo_id: str, taken: TakenBack) -> Exception:
        """``repo_id`` refused from now on (logged when it was not already); its refusal."""
        with self._lock:
            before = self._taken.get(repo_id.lower())
            self._taken[repo_id.lower()] = taken
        if before != taken:
            log.warning("upstream: %s: %s: refused here too from now on (its fetched commits stay in the "
                        "registry; served again once the upstream gives it)", repo_id, taken.why)
        return taken.refusal(repo_id, self.upstream)

    def given(self, repo_id: str) -> None:
        """The upstream gives ``repo_id`` again: a refusal of it lifted (logged)."""
        with self._lock:
            before = self._taken.pop(repo_id.lower(), None)
        if before is not None:
            log.warning("upstream: %s: the upstream gives it again: served here again", repo_id)

    def refusal(self, repo_id: str) -> Exception | None:
        """How a reader of ``repo_id`` is answered while it is taken back; None when it is not."""
        with self._lock:
            taken = self._taken.get(repo_id.lower())
        return None if taken is None else taken.refusal(repo_id, self.upstream)


REFUSED = TakenBack("the upstream now refuses serve's token for it (deleted, or private)", hidden=True)
PRIVATE = TakenBack("private at the upstream now, and --upstream-allow-private does not name it", hidden=True)


def gated(mode: str) -> TakenBack:
    return TakenBack(f"gated ({mode}) at the upstream now, and --upstream-allow-gated does not name it",
                     hidden=False, rule="--upstream-allow-gated")
