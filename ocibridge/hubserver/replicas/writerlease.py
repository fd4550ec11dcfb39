"""The writer lease kept in a registry (:mod:`.leaserecord`), taken, renewed and waited for by
one thread per serve.

**Taking it** (a registry has no compare-and-swap): a serve that finds no lease, a released
one, its own, or one that stayed unchanged for its expiry writes its own record, waits
``settle``, and reads it back: of two serves that wrote at once the later write won, and only
the one whose id is read back takes writes; the other waits. A serve that finds a live lease of
another's waits too, looking every half renewal period, and takes over once that record stayed
unchanged for the expiry (measured on its own clock from when it first saw it: no clocks are
compared across hosts).

**Holding it**: every ``renew`` seconds the holder reads the record and, if it still names it,
writes the next renewal; one that finds another's id has lost it and stops taking writes. The
holder takes writes only until ``expiry - renew`` seconds after its last renewal began: a waiting
serve takes over no sooner than ``expiry`` after it first saw that renewal, so a holder that
was paused (a stopped VM, a long GC, SIGSTOP) finds its lease lapsed on waking and moves no
branch (:meth:`RegistryLease.ensure`, just before a branch's tag moves). After the tag moved, the
record is read again (:meth:`RegistryLease.confirm`): a commit is answered as landed only if the
lease still names this serve then, so no commit acknowledged is lost to a takeover.

**What is left** (said in docs/serve-replicas.md): a registry write delayed longer than ``settle`` (two
serves taking a free lease at the same instant may then both hold it until the holder's next
renewal, each commit still confirmed as above), and a process paused for longer than ``renew``
exactly between its last check and the registry receiving its branch's tag. A lease without a
fencing token the store checks cannot rule those out; a registry cannot check one.

**A renewal that lands late** (one ``PUT``, sent right after the deadline check,
:func:`.leaserecord.renew_lease`) takes nothing back: its writer doubts its own record
(:meth:`RegistryLease._doubt_if_late`), and the serve that took over writes its own again
(:meth:`RegistryLease._late_renewal`).

**A registry that refuses the lease** (read-only credentials for that repository, a registry
that wants repositories made first): said once at the start, and this serve takes writes
without one, as serve did before the lease; a registry that does not answer is asked again.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable

from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.hubserver.replicas.lease import Lease, LeaseLost
from ocibridge.hubserver.replicas.leaserecord import Holder, LeaseRecord, read_lease, renew_lease, write_lease
from ocibridge.hubserver.replicas.leasetimes import EXPIRY_MAX, LeaseTimes
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.serve")

#: seconds the start waits for the first look at the lease (a registry that does not answer
#: is left to the thread: the start line then says writes are on, as they will be once it answers)
FIRST_LOOK_WAIT = 2.0
#: seconds past ``settle`` a write waits for the lease to be decided before it is refused
DECIDING_WAIT = 10.0
#: what the registry answers a write it will never take: the lease is done without (401, 403:
#: credentials; 404: a registry that wants repositories made first; 400, 405: a registry that
#: takes no such manifest)
REFUSED = frozenset({400, 401, 403, 404, 405})

IDLE, DECIDING, HOLDING, STANDBY, UNKNOWN, UNLEASED, CLOSED = (
    "idle", "deciding", "holding", "standby", "unknown", "unleased", "closed")


class RegistryLease(Lease):
    """The writer lease in ``store`` (its ``ocibridge-writer`` tag; ``shown`` names it),
    held by ``me`` with ``times``."""

    def __init__(self, store: WritableStore, shown: str, me: Holder, times: LeaseTimes,
                 clock: Callable[[], float] = time.monotonic):
        self.store, self.shown, self.me, self.times, self._clock = store, shown, me, times, clock
        self._cond = threading.Condition()
        self._state = IDLE
        self._renewal = 0
        self._confirmed = -math.inf  # when the last write of ours that holds began (clock)
        self._holder: LeaseRecord | None = None  # another's lease, while this serve waits
        self._taken_from: LeaseRecord | None = None  # the lapsed lease this serve took over, if it did
        self._doubted: LeaseRecord | None = None  # a write of ours that may have landed after a takeover
        self._watched: tuple[str, int, bool] | None = None  # the version being watched, since _seen_at
        self._seen_at = self._sampled_at = -math.inf
        self._problem = ""
        self._looked = threading.Event()  # the first look is done: the start line may say what it found
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the routes ask -----------------------------------------------------------------
    def start(self, url: str | None = None) -> None:
        with self._cond:
            if self._state != IDLE:
                return
            if url:
                self.me = dataclasses.replace(self.me, url=url)
            self._state = DECIDING
        self._thread = threading.Thread(target=_run, args=(weakref.ref(self), self._stop), name="writer-lease",
                                        daemon=True)
        weakref.finalize(self, self._stop.set)  # an application dropped without close: the thread ends
        self._thread.start()
        self._looked.wait(FIRST_LOOK_WAIT)

    def standing_by(self) -> str | None:
        with self._cond:
            if self._state == STANDBY and self._holder is not None:
                return (f"writes refused here: {self._holder.holder.shown()} holds the writer lease "
                        f"({self.shown}) and takes them")
        return None

    def holder(self) -> Holder | None:
        with self._cond:
            return self._holder.holder if self._state == STANDBY and self._holder is not None else None

    def holding(self) -> bool:
        with self._cond:
            return self._state == UNLEASED or self._state == HOLDING and self._clock() < self._deadline()

    def admit(self) -> None:
        if self._state == IDLE:
            self.start()
        deadline = self._clock() + self.times.settle + DECIDING_WAIT
        with self._cond:
            while self._state == DECIDING and (left := deadline - self._clock()) > 0:
                self._cond.wait(left)
        self.ensure()

    def ensure(self) -> None:
        if not self.holding():
            raise self._refusal()

    def confirm(self) -> None:
        with self._cond:
            if self._state == UNLEASED:
                return
        try:
            record = read_lease(self.store)
        except (OcibridgeError, OSError) as e:
            raise LeaseLost(f"the writer lease ({self.shown}) could not be read back once the branch moved "
                            f"({_one_line(e)}): the commit is not confirmed; check the branch and commit again",
                            self.times.renew) from None
        if record is not None and record.holder.id != self.me.id and self._late_renewal(record):
            return  # the lease this serve took over stands (the renewal writes its own again)
        if record is None or record.holder.id != self.me.id:
            if record is not None:
                self._stand_by(record, lost=True)
            taken = f"{record.holder.shown()} holds it" if record is not None else "it is gone"
            raise LeaseLost(f"this serve lost the writer lease ({self.shown}) while committing: {taken}. The "
                            "commit is not confirmed (a takeover may not keep it): check the branch and commit "
                            "again", self.times.expiry)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        with self._cond:
            held, self._state = self._state == HOLDING, CLOSED
            self._cond.notify_all()
        if held:  # the next serve takes over at once instead of after the expiry
            try:
                write_lease(self.store, self._record(released=True))
            except (OcibridgeError, OSError) as e:
                log.info("the writer lease (%s) was not released: %s; another serve takes it after %gs",
                         self.shown, _one_line(e), self.times.expiry)

    # -- the thread --------------------------------------------------------------------------
    def _period(self) -> float:
        with self._cond:
            return self.times.renew if self._state == HOLDING else self.times.renew / 2

    def _step(self) -> bool:
        """One look or renewal; False once there is nothing more to do."""
        with self._cond:
            state = self._state
        if state == HOLDING:
            self._renew()
        elif state in (DECIDING, STANDBY, UNKNOWN):
            self._look()
        return state not in (UNLEASED, CLOSED)

    def _look(self) -> None:
        """Not holding: take a free lease, or wait for the holder's to lapse."""
        try:
            record = read_lease(self.store)
        except (OcibridgeError, OSError) as e:
            self._unknown(e)
            return
        doubted = record is not None and self._doubted is not None and record.version == self._doubted.version
        if record is None or record.released or record.holder.id == self.me.id and not doubted \
                or self._lapsed(record):
            self._taken_from = record if record is not None and record.holder.id != self.me.id \
                and not record.released else None
            self._acquire()
        elif doubted:  # no other serve named yet: it may have taken the lease, and will write it again
            self._unknown(OcibridgeError("a renewal of its own landed late; waiting to see whether another "
                                         "serve took the lease over"))
        else:
            self._stand_by(record)

    def _lapsed(self, record: LeaseRecord) -> bool:
        """Whether ``record`` stayed unchanged for its expiry, as this serve has watched it (a
        gap in the watching, this thread stalled, starts the watch again: never a guess)."""
        now = self._clock()
        if record.version != self._watched or now - self._sampled_at > 2 * self.times.renew:
            self._watched, self._seen_at = record.version, now
        self._sampled_at = now
        expiry = min(max(record.expiry, self.times.expiry), EXPIRY_MAX)  # the longer of the two
        return now - self._seen_at >= expiry

    def _acquire(self) -> None:
        """Write, wait ``settle``, read back: held if the record read names this serve."""
        with self._cond:
            self._state = DECIDING
            self._renewal += 1
            record = self._record()
        began = self._clock()
        try:
            write_lease(self.store, record)
        except RegistryError as e:
            if e.status in REFUSED:
                self._unleased(e)
            else:
                self._unknown(e)
            return
        except (OcibridgeError, OSError) as e:
            self._unknown(e)
            return
        self._looked.set()
        if self._stop.wait(self.times.settle):
            return
        try:
            back = read_lease(self.store)
        except (OcibridgeError, OSError) as e:
            self._unknown(e)
            return
        if back is None or back.holder.id != self.me.id:
            if back is None:
                self._unknown(OcibridgeError("the lease written was not read back"))
            else:
                self._stand_by(back)
            return
        with self._cond:
            waited = self._holder is not None or self._problem != ""
            self._state, self._confirmed, self._holder, self._problem = HOLDING, began, None, ""
            self._watched = self._doubted = None
            self._cond.notify_all()
        if waited:
            log.info("this serve holds the writer lease (%s) now: writes on", self.shown)

    def _renew(self) -> None:
        """Holding: the next renewal, unless the record names another (lost) or this serve's
        own lease lapsed (it was paused: it must take the lease again like any other)."""
        if self._clock() >= self._deadline():
            self._lapse()
            return
        try:
            record = read_lease(self.store)
        except (OcibridgeError, OSError) as e:  # held still, until the deadline
            log.info("the writer lease (%s) was not read to renew it: %s", self.shown, _one_line(e))
            return
        if record is not None and record.holder.id != self.me.id:
            if not self._late_renewal(record):
                self._stand_by(record, lost=True)
                return
            log.warning("warning: a renewal of the writer lease (%s) by %s, whose lease this serve took over, "
                        "landed late (it was paused, or its write delayed); this serve writes its own again",
                        self.shown, record.holder.shown())
        with self._cond:
            self._renewal += 1
            renewed = self._record()
        began = self._clock()
        if began >= self._deadline():
            self._lapse()
            return
        try:
            renew_lease(self.store, renewed)
        except (OcibridgeError, OSError) as e:
            log.info("the writer lease (%s) was not renewed: %s", self.shown, _one_line(e))
            self._doubt_if_late(renewed)
            return
        if self._doubt_if_late(renewed):
            return
        with self._cond:
            self._confirmed = began

    def _doubt_if_late(self, written: LeaseRecord) -> bool:
        """A renewal still on its way at this lease's deadline (the process paused, the write
        delayed) may have landed after another serve took the lease over, over its record: this
        serve then takes that record for no proof of its own lease (:meth:`_look` watches it as
        another's), and the serve that took over writes its own again (:meth:`_late_renewal`)."""
        if self._clock() < self._deadline():
            return False
        self._doubted = written
        self._lapse()
        return True

    def _late_renewal(self, record: LeaseRecord) -> bool:
        """Whether ``record``, another's, is the renewal the holder this serve took the lease from
        sent before its lease lapsed, landed late (it read its own record before the takeover, so
        it can write nothing else): this serve's lease stands, and is written again."""
        return self._taken_from is not None and record.continues(self._taken_from)

    # -- states ------------------------------------------------------------------------------
    def _deadline(self) -> float:
        return self._confirmed + self.times.expiry - self.times.renew

    def _record(self, released: bool = False) -> LeaseRecord:
        return LeaseRecord(self.me, self._renewal, self.times.expiry, self.times.renew, released)

    def _lapse(self) -> None:
        log.warning("warning: the writer lease (%s) lapsed: not renewed for %gs (this process was paused, or "
                    "the registry did not answer); writes wait until it is held again", self.shown,
                    self._clock() - self._confirmed)
        with self._cond:
            self._state, self._problem = UNKNOWN, "its renewal lapsed"
            self._cond.notify_all()
        self._look()

    def _stand_by(self, record: LeaseRecord, *, lost: bool = False) -> None:
        with self._cond:
            if self._state == CLOSED:
                return
            told = self._state == STANDBY and self._holder is not None \
                and self._holder.holder.id == record.holder.id
            self._state, self._holder = STANDBY, record
            self._cond.notify_all()
        if lost:
            log.warning("warning: this serve lost the writer lease (%s) to %s: writes refused here from now on",
                        self.shown, record.holder.shown())
        elif not told and self._looked.is_set():
            log.info("%s holds the writer lease (%s): writes refused here until it lets go or stops renewing it",
                     record.holder.shown(), self.shown)
        self._looked.set()

    def _unknown(self, error: BaseException) -> None:
        with self._cond:
            if self._state == CLOSED:
                return
            first = self._problem == ""
            self._state, self._problem = UNKNOWN, _one_line(error)
            self._cond.notify_all()
        if first and self._looked.is_set():
            log.info("the writer lease (%s) could not be read or written: %s; writes wait until it can",
                     self.shown, self._problem)
        self._looked.set()

    def _unleased(self, error: RegistryError) -> None:
        with self._cond:
            self._state = UNLEASED
            self._cond.notify_all()
        log.warning("warning: the registry refused the writer lease (%s: %s): this serve takes writes without "
                    "one, and a second serve taking writes over the same SOURCE would lose commits (run the "
                    "others with --writer URL)", self.shown, _one_line(error))
        self._looked.set()

    def _refusal(self) -> LeaseLost:
        with self._cond:
            state, holder, problem = self._state, self._holder, self._problem
        if state == STANDBY and holder is not None:
            return LeaseLost(f"this serve does not take writes: {holder.holder.shown()} holds the writer lease "
                             f"({self.shown}) and takes them; send writes there, or start this serve with "
                             "--writer URL", self.times.renew,  # huggingface_hub asks again after it, 5 times
                             holder=holder.holder)
        if state == HOLDING:
            return LeaseLost(f"this serve's writer lease ({self.shown}) lapsed (not renewed in time): writes "
                             "wait until it is renewed; try again shortly", self.times.renew)
        if state == CLOSED:
            return LeaseLost("this serve is stopping: it takes no more writes", self.times.renew)
        why = problem or "it is being decided"
        return LeaseLost(f"this serve does not hold the writer lease ({self.shown}) yet ({why}); try again "
                         "shortly", self.times.renew)


def _run(ref: weakref.ref[RegistryLease], stop: threading.Event) -> None:
    """The lease's thread: holds no reference to it between steps, so a lease dropped without
    :meth:`RegistryLease.close` (an application a test let go) ends its thread."""
    lease = ref()
    if lease is None:
        return
    lease._look()  # the first look
    lease._looked.set()
    period = lease._period()
    del lease
    while not stop.wait(period):
        lease = ref()
        if lease is None:
            return
        try:
            going = lease._step()
        except Exception:  # noqa: BLE001 - the thread must outlive any one failure; logged
            log.exception("the writer lease (%s): a renewal failed", lease.shown)
            going = True
        period = lease._period()
        del lease
        if not going:
            return


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
