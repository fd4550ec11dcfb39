"""A relay of bytes whose SHA-256 is not known yet (issue 64): a Xet file built while its xorbs
arrive, before the shard names it. The registry takes it as a chunked upload whose digest is
given only at the end, hashed here while it is sent (:class:`.base.Ingesting`), so its SHA-256
costs no pass of its own; its bytes come from the builder's buffers (:class:`.handoff.Handoff`),
never from a file. An upload that turns out not to be the file the shard names is cut before its
end: the registry's session is left unfinished, never a blob.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable

from ocibridge.hubserver.reading.sources import Source
from ocibridge.hubserver.uploads.handoff import Handoff
from ocibridge.hubserver.uploads.relay import STALL, registry_store
from ocibridge.stores.base import Ingesting

log = logging.getLogger("ocibridge.hubserver")

#: the store a file built for the repository (the argument) goes to as it is built; None where
#: there is nowhere to relay to
IngestFor = Callable[[str], "Ingesting | None"]


class IngestRelay:
    """What is handed to ``feed`` ingested into ``store`` on a thread (:meth:`finish` or :meth:`cut`)."""

    def __init__(self, store: Ingesting) -> None:
        self.feed = Handoff()
        self.store = store
        self.got: tuple[str, int] | None = None
        self._thread = threading.Thread(target=self._run, name="relay-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.got = self.store.ingest_blob(io.BufferedReader(self.feed, 1 << 20))
        except Exception as e:  # noqa: BLE001 - the file is then rebuilt and relayed as before
            log.info("relay ahead of a shard: %s", e)
        finally:
            self.feed.close()

    def finish(self, size: int) -> str | None:
        """The SHA-256 (hex) of the ``size`` bytes sent, once the registry holds them; None when
        the relay failed."""
        self.feed.ends()
        self._thread.join(STALL)
        if self.got is None or self.got[1] != size:
            return None
        return self.got[0].removeprefix("sha256:")

    def cut(self, why: str) -> None:
        """Abandon the upload before its end: the registry makes no blob of it."""
        self.feed.fail(why)
        self._thread.join(STALL)


def ingest_for(source: Source | None, repo_id: str) -> Ingesting | None:
    """The registry repository ``repo_id``'s commit will push to (``source``: the first source),
    when that is a registry that takes a blob whose digest is given at its end."""
    store = registry_store(source, repo_id)
    return store if isinstance(store, Ingesting) else None
