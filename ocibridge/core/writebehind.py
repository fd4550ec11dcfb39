"""Small writes that no caller waits for, run in order on one thread of their own.

A hint kept on disk (where a blob was seen: stores/registry/blobhomes.py) is written when a
manifest is read, which is before the first byte of a download: in a fresh process the write
(importing sqlite3, opening the index, one transaction) took 12-40 ms here, all of it on the
wire's critical path. Handed to this queue, it runs while the download does.

``settle()`` waits for every job handed over so far (a reader of the same hints in this process
calls it first, so it sees its own writes); the jobs left at exit run before the interpreter
goes (``atexit``). A forked child starts with an empty queue (the parent writes its own jobs);
a process that leaves by ``os._exit`` loses what is still queued, as any hint may be lost.
"""

from __future__ import annotations

import atexit
import collections
import os
import threading
import weakref
from collections.abc import Callable

Job = Callable[[], None]


class WriteBehind:
    """Jobs run one after another on a daemon thread started when one is handed over and gone
    once the queue is empty (no thread left behind by a process's last write); a job's failure is
    its own (each catches what it expects: the hints are silent when they cannot be written)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._reset()
        me = weakref.ref(self)
        atexit.register(_settle_ref, me)
        os.register_at_fork(after_in_child=lambda: _reset_ref(me))

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._jobs: collections.deque[Job] = collections.deque()
        self._busy = False  # a job taken off the queue and running
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        with self._lock:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def settle(self) -> None:
        """Return once every job submitted before this call has run."""
        with self._lock:
            if self._thread is threading.current_thread():
                return  # (a job that reads back: what is queued after it runs after it)
            while self._jobs or self._busy:
                self._done.wait()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._thread = None  # the next submit starts another
                    return
                job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except Exception:  # noqa: BLE001  # a hint not written: the job's own loss, never the caller's
                pass
            finally:
                with self._lock:
                    self._busy = False
                    self._done.notify_all()


def _settle_ref(ref: weakref.ref[WriteBehind]) -> None:
    queue = ref()
    if queue is not None:
        queue.settle()


def _reset_ref(ref: weakref.ref[WriteBehind]) -> None:
    queue = ref()
    if queue is not None:
        queue._reset()
