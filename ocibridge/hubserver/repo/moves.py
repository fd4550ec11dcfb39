"""``move_repo``: the repository under its new id, then the old one deleted as ``delete_repo``
deletes (:mod:`.deletes`); no HTTP here (the route: ``writeroutes/moving.py``).

A registry has no rename: the new repository's refs record is written first (the old one's:
private, gated, its refs), so nothing of it is readable by anyone the old one hid it from, at any
moment; when private or gated, the move then waits out what another serve believes of the new
id (:data:`.repostates.KEEP`). Then every live tag of the old repository (its branches, Hub tags,
commit tags, cosign's signature tags) is copied to the new one, its blobs mounted rather than
sent where the registry allows, and with them the referrers of each (signatures, attestations,
chunk tables). Only then is the old one deleted: a failure midway leaves the old repository
whole and the new one partial. While it runs, every other write to either repository is refused
(the Hub's 409: :mod:`.branchlocks`), so a commit is never acknowledged and then left behind in
the deleted one. Commit ids stay the same (the manifests are the same bytes), so a pinned commit
resolves under the new id.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from ocibridge.errors import NotFound
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.deletes import delete_repo, home
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.oci.bookkeeping import REFS_TAG

log = logging.getLogger("ocibridge.hubserver")


class Conflict(BadCommit):
    """The target of a move exists (the Hub's 409)."""


def move_repo(repos: Repos, old: str, new: str) -> None:
    """Move ``old`` to ``new`` (the module's docstring); :class:`Conflict` when ``new`` exists."""
    from ocibridge.transfer.copy import copy

    branches = repos.branches
    busy = f"{old} is being moved to {new}: ask again once the move is done"
    with branches.lock(new, "main"), branches.lock(new, RECORD_LOCK), branches.moving(old, busy), \
            branches.moving(new, busy):
        if repos.exists(new):
            raise Conflict(f"A model repository called {new} already exists")
        source = home(repos, old)
        target = repos.first_repository(new)
        if target is None:
            raise BadCommit(f"{new}: no source can hold it")
        store = record_store(target)
        record = arrival_record(read_record(source), read_record(target))
        write_record(target, store, record)  # first: who may read it, before there is anything to read
        repos.catalog.forget(new)
        if record.private or record.gated:  # what another serve believes of it has expired
            time.sleep(repos.catalog.states.keep)
        for tag in source.tags():
            if tag == REFS_TAG:
                continue
            try:
                top = source.store.resolve(source.reference(tag))
            except NotFound:
                continue
            if not is_tombstone(top.digest):
                copy(source.store, top, store, target.reference(tag), referrers=True)
        delete_repo(repos, old, source, moved_to=new)
    repos.catalog.forget(new)
    log.info("%s: moved to %s (%s)", old, new, target.shown)


def arrival_record(source: RefsRecord, there: RefsRecord) -> RefsRecord:
    """The destination's refs record: the source's (its refs, who may read it), made again over
    a deleted repository of that name when one was there (:mod:`.recreated`)."""
    return dataclasses.replace(source, deleted=False, moved="",
                               recreated=source.recreated or there.deleted or there.recreated)
