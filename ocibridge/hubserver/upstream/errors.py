"""What the proxy answers when the upstream cannot or may not give a repository: each is a row of
serve's one table (hubserver/failures.py)."""

from __future__ import annotations

from ocibridge.core.addressrule import AddressRefused
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.sources import UpstreamRefused as UpstreamRefused  # where the quotas refuse too

#: seconds a client is told to wait when the upstream cannot be reached
RETRY_AFTER = 30


class UpstreamDown(OcibridgeError):
    """The upstream did not answer (or answered a 5xx): what was fetched before is served, a
    miss is the Hub's 503 with Retry-After."""

    retry_after = RETRY_AFTER


class UpstreamAddressRefused(AddressRefused, UpstreamDown):
    """A URL the upstream pointed at is refused by the address rule (core/addressrule.py): the
    fetch fails as one the upstream did not answer does."""


class UpstreamBusy(UpstreamDown):
    """The upstream asked for a pause (its 429's ``Retry-After``): the Hub's 503, told how long to
    wait; nothing is sent to the upstream meanwhile (upstream/ratewindow.py)."""


class FetchedElsewhere(OcibridgeError):
    """A read that would start a fetch on a serve that is not the writer (a ``--writer`` reader,
    or a standby while another serve holds the writer lease): the writer fetches, so that a commit
    is asked of the upstream and lands once for all the replicas. The route forwards the read to
    the writer (replicas/forward.py), or answers the Hub's 503 with Retry-After."""

    retry_after = 5
