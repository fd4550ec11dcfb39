"""A relay of bytes whose SHA-256 is not known yet (issue 64): a Xet file built while its xorbs
arrive, before the shard names it. The registry takes it as a chunked upload whose digest is
given only at the end, hashed here while it is sent (:class:`.base.Ingesting`), so its SHA-256
costs no pass of its own. An upload that turns out not to be the file the shard names is cut
before its end: the registry's session is left unfinished, never a blob.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ocibridge.hubserver.reading.sources import Source
from ocibridge.hubserver.uploads.relay import STALL, Following, registry_store
from ocibridge.stores.base import Ingesting

log = logging.getLogger("ocibridge.hubserver")

#: a file being written, ``path``, relayed as it grows; None where there is nowhere to relay to
IngestFor = Callable[[str, Path], "IngestRelay | None"]


class IngestRelay:
    """One growing file ingested into ``store`` on a thread (:meth:`finish` or :meth:`cut`)."""

    def __init__(self, store: Ingesting, path: Path) -> None:
        self.follow = Following(path, 1 << 62)  # its size is told at the end (Following.ends_at)
        self.store = store
        self.got: tuple[str, int] | None = None
        self._thread = threading.Thread(target=self._run, name="relay-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.got = self.store.ingest_blob(io.BufferedReader(self.follow, 1 << 20))
        except Exception as e:  # noqa: BLE001 - the file is then rebuilt and relayed as before
            log.info("relay ahead of a shard: %s", e)
        finally:
            self.follow.close()

    def finish(self, size: int) -> str | None:
        """The SHA-256 (hex) of the ``size`` bytes sent, once the registry holds them; None when
        the relay failed."""
        self.follow.ends_at(size)
        self._thread.join(STALL)
        if self.got is None or self.got[1] != size:
            return None
        return self.got[0].removeprefix("sha256:")

    def cut(self, why: str) -> None:
        """Abandon the upload before its end: the registry makes no blob of it."""
        self.follow.fail(why)
        self._thread.join(STALL)


def ingest_for(source: Source | None, repo_id: str, path: Path) -> IngestRelay | None:
    """A relay of the growing file ``path`` to the registry repository ``repo_id``'s commit will
    push to (``source``: the first source), when that is a registry."""
    store = registry_store(source, repo_id)
    return IngestRelay(store, path) if isinstance(store, Ingesting) else None
