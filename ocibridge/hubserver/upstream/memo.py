"""The upstream's answers about revisions, one ask per (repository, revision) per freshness window
(``--upstream-fresh``): the door, the ingest, the commit facts, the re-checks and the answers given
while a commit is in flight all read the answer the first of them was given. Requests that ask at
the same moment wait for that one ask (what it raised, they raise too); an answer that names a
commit is kept under the commit id as well, so a later read by that id asks nothing.

Only answers are kept past the ask: "not found", "refused" or "down" are shared by the requests
waiting on that ask alone, so a repository made at the upstream a moment later is seen at once.
And only answers its caller says may be (``keep``): a repository private or gated upstream is asked
each time, as a missing one is, so that how fast it is answered tells no reader that it exists."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

_V = TypeVar("_V")
#: answers kept at most (past it, all are forgotten: each is asked once more)
KEPT = 4096


@dataclass
class _Ask(Generic[_V]):
    done: threading.Event = field(default_factory=threading.Event)
    value: _V | None = None
    error: BaseException | None = None


class AnswerMemo(Generic[_V]):
    """Answers by key, each kept ``window`` seconds from when it was given (0: while asked only)."""

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[float, _V]] = {}
        self._asking: dict[tuple[str, str], _Ask[_V]] = {}
        self.asked = 0  # asks that went to the upstream

    def get(self, key: tuple[str, str], ask: Callable[[], _V], also: Callable[[_V], tuple[str, str] | None], *,
            again: bool = False, keep: Callable[[_V], bool] = lambda value: True) -> _V:
        """The answer for ``key``: kept, or being asked (waited for), or asked now; ``also``: another
        key the answer is kept under (a branch's answer under its commit id). ``again``: what was
        kept is not taken (a re-check its caller spaced by the window already), an ask under way is;
        ``keep``: whether an answer is kept past its ask."""
        with self._lock:
            kept = None if again else self._kept.get(key)
            if kept is not None and self.clock() - kept[0] < self.window:
                return kept[1]
            pending = self._asking.get(key)
            leads = pending is None
            if pending is None:
                pending = self._asking[key] = _Ask()
        if not leads:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            assert pending.value is not None
            return pending.value
        try:
            self.asked += 1
            pending.value = value = ask()
        except BaseException as e:
            pending.error = e
            raise
        finally:
            with self._lock:
                self._asking.pop(key, None)
                if pending.error is None and pending.value is not None and self.window > 0 and keep(pending.value):
                    self._keep(key, pending.value, also(pending.value))
            pending.done.set()
        return value

    def _keep(self, key: tuple[str, str], value: _V, other: tuple[str, str] | None) -> None:
        if len(self._kept) > KEPT:
            self._kept.clear()
        now = self.clock()
        self._kept[key] = (now, value)
        if other is not None:
            self._kept[other] = (now, value)

    def forget(self, repo: str) -> None:
        """What was kept of ``repo`` (the next ask goes to the upstream)."""
        with self._lock:
            self._kept = {k: v for k, v in self._kept.items() if k[0] != repo}
