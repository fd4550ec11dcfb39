"""The writer lease of an OCI layout source (``oci:DIR``, the local store): ``flock`` on the
file ``.ocibridge-writer`` in the layout's directory, beside the layout's own lock and blob
leases (stores/layout.py, stores/leases.py).

A layout is one machine's directory (or a shared file system that honours ``flock``), so the
kernel is the compare-and-swap a registry lacks: the holder keeps the lock for its life, the
kernel drops it with the process (a ``kill -9`` frees it at once: no expiry to wait out), and a
second serve that cannot take it refuses writes, naming the holder the file describes (JSON:
``id``, ``url``, ``host``, ``pid``), and tries again every half renewal period. Applications of
one process share the lock (the lease is a process's). A directory serve cannot write the
file in (read-only) is said once at the start, and writes are taken without a lease.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import weakref
from pathlib import Path

from ocibridge.core.lockfile import open_in_dir
from ocibridge.hubserver.replicas.lease import Lease, LeaseLost
from ocibridge.hubserver.replicas.leaserecord import Holder
from ocibridge.hubserver.replicas.leasetimes import LeaseTimes

log = logging.getLogger("ocibridge.serve")

#: the lock file, in the layout's directory (the local store's empty directory counts it as nothing)
FILE = ".ocibridge-writer"
_shared: dict[str, tuple[int, int]] = {}  # path -> (descriptor held, applications holding it)
_shared_lock = threading.Lock()


class LayoutLease(Lease):
    """The writer lease of the layout at ``root`` (``shown`` names it), for ``me``."""

    def __init__(self, root: Path, shown: str, me: Holder, times: LeaseTimes):
        self.path, self.shown, self.me, self.times = root / FILE, shown, me, times
        self._key = str(self.path.absolute())
        self._state = "idle"  # idle, holding, standby, unleased, closed
        self._holder: Holder | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self, url: str | None = None) -> None:
        with self._lock:
            if self._state != "idle":
                return
            if url:
                self.me = Holder(self.me.id, url, self.me.host, self.me.pid)
            self._take()
            waiting = self._state == "standby"
        if waiting:
            weakref.finalize(self, self._stop.set)
            threading.Thread(target=_wait, args=(weakref.ref(self), self._stop, self.times.renew / 2),
                             name="writer-lease", daemon=True).start()

    def standing_by(self) -> str | None:
        with self._lock:
            if self._state == "standby":
                holder = self._shown_holder()
                return f"writes refused here: {holder} holds the writer lease ({self.path}) and takes them"
        return None

    def holding(self) -> bool:
        return self._state in ("holding", "unleased")

    def holder(self) -> Holder | None:
        with self._lock:
            return self._holder if self._state == "standby" else None

    def admit(self) -> None:
        if self._state == "idle":
            self.start()
        self.ensure()

    def ensure(self) -> None:
        if not self.holding():
            retry = self.times.renew
            if self._state == "closed":
                raise LeaseLost("this serve is stopping: it takes no more writes", retry)
            raise LeaseLost(f"this serve does not take writes: {self._shown_holder()} holds the writer lease "
                            f"({self.path}) and takes them; send writes there, or start this serve with --writer URL",
                            retry, holder=self._holder)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            held, self._state = self._state == "holding", "closed"
            if not held:
                return
            with _shared_lock:
                fd, count = _shared.pop(self._key)
                if count > 1:
                    _shared[self._key] = (fd, count - 1)
                    return
            os.close(fd)  # the lock goes with it

    # -- taking it ---------------------------------------------------------------------------
    def _take(self) -> None:
        """Take the lock (call with ``_lock`` held): holding, or standby naming the holder."""
        with _shared_lock:
            found = _shared.get(self._key)
            if found is not None:  # another application of this process holds it
                _shared[self._key] = (found[0], found[1] + 1)
                self._state = "holding"
                return
            try:
                fd = open_in_dir(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                self._state = "unleased"
                log.warning("warning: the writer lease of %s could not be made (%s: %s): this serve takes writes "
                            "without one, and a second serve taking writes there would lose commits", self.shown,
                            self.path, e.strerror or e)
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._holder = _described(fd)
                os.close(fd)
                self._state = "standby"
                return
            _shared[self._key] = (fd, 1)
        was_waiting, self._state = self._state == "standby", "holding"
        me = {"id": self.me.id, "url": self.me.url, "host": self.me.host, "pid": self.me.pid}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode() + b"\n", 0)
        except OSError:
            pass  # the lock is what counts; the description only names the holder
        if was_waiting:
            log.info("this serve holds the writer lease (%s) now: writes on", self.path)

    def _shown_holder(self) -> str:
        return self._holder.shown() if self._holder is not None else "another serve"


def _described(fd: int) -> Holder | None:
    """The holder the lock file describes (None: it says nothing readable)."""
    try:
        doc = json.loads(os.pread(fd, 4096, 0) or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    pid = doc.get("pid")
    return Holder(str(doc.get("id", ""))[:64], str(doc.get("url", ""))[:300], str(doc.get("host", ""))[:100],
                  pid if isinstance(pid, int) else 0)


def _wait(ref: weakref.ref[LayoutLease], stop: threading.Event, period: float) -> None:
    """A serve that waits: try the lock every ``period`` until it is held."""
    while not stop.wait(period):
        lease = ref()
        if lease is None:
            return
        with lease._lock:
            if lease._state != "standby":
                return
            lease._take()
        del lease
