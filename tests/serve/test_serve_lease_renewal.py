"""A holder's renewal of the writer lease is one manifest PUT, nothing asked first: a holder
paused mid-renewal (SIGSTOP, a stopped VM) then has the least time in which a renewal is on its
way, one that, landing after a waiting serve took the lease over, would overwrite its record.
(CI caught it: the renewal was a copy that asked for the manifest and its blob before its PUT,
a paused writer's renewal landed on the second's lease and took it back.) The real registry
behind a proxy that records what the lease asks."""

from __future__ import annotations

import time
import uuid

from support.faultproxy import FaultProxy

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
        lease = RegistryLease(store, "the test's lease", me, LeaseTimes(expiry=0.9, renew=0.3, settle=0.1))
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
