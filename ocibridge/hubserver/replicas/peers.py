"""Writes sent on to the serve that holds the writer lease, when it is one of this serve's peers.

A second serve with write tokens over one SOURCE stands by (:mod:`.writerlease`): without
this, it answers every write with the Hub's 503 and huggingface_hub gives up after retrying for
about a minute. Given ``--peer URL`` for each other serve that may hold the lease, a standby
sends the write to the holder, as a ``--writer`` reader does (:mod:`.forward`), and takes over
by itself when the holder dies. Only a URL the operator named is ever sent a client's token:
the holder's URL comes from the lease record in the registry, which anyone who can push there
could rewrite, so a URL that is not a peer gets the 503 as before, never the request.
"""

from __future__ import annotations

from collections.abc import Iterable

from ocibridge.hubserver.replicas.forward import Forwarder
from ocibridge.hubserver.replicas.leaserecord import Holder


class Peers:
    """The other serves (``--peer``) a standby may send writes to, one :class:`Forwarder` each."""

    def __init__(self, urls: Iterable[str]) -> None:
        self._forwarders = {url.rstrip("/"): Forwarder(url) for url in urls}

    def forwarder_for(self, holder: Holder | None) -> Forwarder | None:
        """The forwarder to ``holder``, or None: no holder known, or its URL is no peer's."""
        if holder is None or not holder.url:
            return None
        return self._forwarders.get(holder.url.rstrip("/"))
