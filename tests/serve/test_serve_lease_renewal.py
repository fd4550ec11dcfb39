"""A holder's renewal of the writer lease is one manifest PUT, nothing asked first: a holder
paused mid-renewal (SIGSTOP, a stopped VM) then has the least time in which a renewal is on its
way, one that, landing after a waiting serve took the lease over, would overwrite its record.
(CI caught it: the renewal was a copy that asked for the manifest and its blob before its PUT,
a paused writer's renewal landed on the second's lease and took it back.) A renewal that lands
late all the same (a write delayed on its way) is known for what it is on both sides: the serve
that took over writes its lease again, the late writer takes its own record for no proof. The
real registry behind a proxy that records, and holds, what the lease asks."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from support.faultproxy import FaultProxy, delay

from ocibridge.hubserver.replicas.lease import this_process
from ocibridge.hubserver.replicas.leaserecord import read_lease
from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
from ocibridge.hubserver.replicas.writerlease import RegistryLease
from ocibridge.places.locate import open_target
from ocibridge.stores.base import WritableStore


def test_a_renewal_is_one_put_of_the_record_after_one_read(registry):
    with FaultProxy(registry) as proxy:
        repo = f"test/{uuid.uuid4().hex[:8]}/ocibridge-serve"
        store = open_target(f"{proxy.host}/{repo}:ocibridge-writer", for_write=True).store
        assert isinstance(store, WritableStore)
        me = this_process(uuid.uuid4().hex)
        times = LeaseTimes(expiry=3.0, renew=0.5, settle=0.1)  # 2.5 s to renew in: a loaded machine does
        lease = RegistryLease(store, "the test's lease", me, times)
        lease.start()
        try:
            deadline = time.monotonic() + 30
            while not lease.holding():
                assert time.monotonic() < deadline, "the free lease was never taken"
                time.sleep(0.02)
            taken = len(proxy.requests)
            while len(proxy.requests_matching("PUT", rf"/{repo}/manifests/ocibridge-writer$")) < 4:
                assert time.monotonic() < deadline, "the lease was not renewed three times"
                time.sleep(0.05)
            renewed = len(proxy.requests)
        finally:
            lease.close()  # the release: a take's write (it may ask first), left out below
        tag = f"/v2/{repo}/manifests/ocibridge-writer"
        renewals = [(r.method, r.path) for r in proxy.requests[taken:renewed]]
        assert renewals.count(("PUT", tag)) >= 3, renewals
        assert set(renewals) == {("GET", tag), ("PUT", tag)}, renewals  # no HEAD of the manifest or its blob
        assert all(renewals[i - 1] == ("GET", tag) for i, r in enumerate(renewals) if r == ("PUT", tag)), renewals
        record = read_lease(store)
        assert record is not None and record.holder.id == me.id and record.released  # the close let it go


def until(done: Callable[[], bool], what: str, seconds: float = 30,
          watch: Callable[[], None] = lambda: None) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        watch()
        time.sleep(0.02)


def test_a_renewal_landing_after_a_takeover_takes_nothing_back(registry, caplog):
    """The holder's renewal is held on its way past the holder's deadline; the second serve takes
    the lease over; then the renewal lands, over the second's record. The second writes its own
    again at its next renewal and keeps taking writes; the first never takes writes again and
    ends standing by, naming the second."""
    times = LeaseTimes(expiry=3.0, renew=0.5, settle=0.1)  # 2.5 s to renew in: a loaded machine does
    with FaultProxy(registry) as proxy:
        repo = f"test/{uuid.uuid4().hex[:8]}/ocibridge-serve"
        through_proxy = open_target(f"{proxy.host}/{repo}:ocibridge-writer", for_write=True).store
        direct = open_target(f"{registry.host}/{repo}:ocibridge-writer", for_write=True).store
        assert isinstance(through_proxy, WritableStore) and isinstance(direct, WritableStore)
        first = RegistryLease(through_proxy, "the lease", this_process(uuid.uuid4().hex, "http://first"), times)
        second = RegistryLease(direct, "the lease", this_process(uuid.uuid4().hex, "http://second"), times)
        caplog.set_level(logging.INFO, logger="ocibridge.serve")
        try:
            first.start()
            until(first.holding, "the free lease was never taken")
            second.start()
            until(lambda: second.holder() == first.me, "the second never stood by naming the first")

            release = threading.Event()
            writes = rf"/{repo}/manifests/ocibridge-writer$"
            before = len(proxy.requests_matching("PUT", writes))
            proxy.add("PUT", writes, delay(60, release))
            until(lambda: len(proxy.requests_matching("PUT", writes)) > before, "no renewal was sent")
            held = proxy.requests_matching("PUT", writes)[before]
            until(second.holding, "the second never took over from the first, whose renewal is held")
            assert not first.holding()  # its deadline passed while its renewal was on the way

            def first_takes_no_write() -> None:
                assert not first.holding(), "the first took writes again after its late renewal"

            release.set()
            until(lambda: held.upstream_status is not None, "the held renewal never reached the registry",
                  watch=first_takes_no_write)
            assert held.upstream_status == 201  # it landed, over the second's record
            until(lambda: first.holder() == second.me, "the first never stood by naming the second",
                  watch=first_takes_no_write)
            record = read_lease(direct)
            assert record is not None and record.holder == second.me
            assert second.holding()
            assert "landed late" in caplog.text
        finally:
            second.close()
            first.close()
