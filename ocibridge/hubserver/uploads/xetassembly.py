"""Where a Xet file built while its xorbs arrive goes before the shard names it: the
registry repository its commit will push to, as a chunked upload whose digest is given only at
the end, hashed while it is sent (:class:`.base.Ingesting`), so its SHA-256 costs no pass of its
own. The build reads it to the registry from the xorbs (:mod:`..xet.ahead`); an upload that turns
out not to be the file the shard names is cut before its end: the registry's session is left
unfinished, never a blob.
"""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.hubserver.repo.sources import Source
from ocibridge.hubserver.uploads.relay import registry_store
from ocibridge.stores.base import Ingesting

#: the store a file built for the repository (the argument) goes to as it is built; None where
#: there is nowhere to relay to
IngestFor = Callable[[str], "Ingesting | None"]


def ingest_for(source: Source | None, repo_id: str) -> Ingesting | None:
    """The registry repository ``repo_id``'s commit will push to (``source``: the first source),
    when that is a registry that takes a blob whose digest is given at its end."""
    store = registry_store(source, repo_id)
    return store if isinstance(store, Ingesting) else None
