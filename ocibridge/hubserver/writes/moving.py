"""``move_repo`` (``POST /api/repos/move`` ``{fromRepo, toRepo}``, huggingface_hub's hf_api.py):
the repository under its new id, then the old one deleted as ``delete_repo`` deletes.

A registry has no rename: the new repository's refs record is written first (the old one's:
private, gated, its refs), so nothing of it is readable by anyone the old one hid it from, at any
moment; when private or gated, the move then waits out what another serve believes of the new
id (:data:`ocibridge.hubserver.repo.states.KEEP`). Then every live tag of the old repository (its branches,
Hub tags, commit tags, cosign's signature tags) is copied to the new one, its blobs mounted
rather than sent where the registry allows, and with them the referrers of each (signatures,
attestations, chunk tables). Only then is the old one deleted (:mod:`.deleting`): a failure
midway leaves the old repository whole and the new one partial. While it runs, every other
write to either repository is refused (the Hub's 409: :mod:`.branchlocks`), so a commit is never
acknowledged and then left behind in the deleted one.
Commit ids stay the same (the manifests are the same bytes), so a pinned commit resolves under
the new id.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import NotFound
from ocibridge.hubserver.answers import error, in_thread
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.sources import repo_parts
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.hubserver.writes.creating import model_repo_body
from ocibridge.hubserver.writes.deleting import Deleting
from ocibridge.oci.bookkeeping import REFS_TAG

log = logging.getLogger("ocibridge.hubserver")


class Conflict(BadCommit):
    """The target of a move exists (the Hub's 409)."""


class Moving:
    """The move route, over the delete routes (the old repository is deleted as they delete)."""

    def __init__(self, deleting: Deleting):
        self.deleting = deleting
        self.repos = deleting.repos

    async def move_repo(self, request: Request) -> Response:
        body = await model_repo_body(request)
        if isinstance(body, Response):
            return body
        old, new = body.get("fromRepo"), body.get("toRepo")
        if not isinstance(old, str) or not isinstance(new, str) or repo_parts(old) is None \
                or repo_parts(new) is None or "/" not in old or "/" not in new:
            return error(400, "BadRequest", "Invalid repo_id: fromRepo and toRepo are namespace/repo_name")
        note(request, repository=old, revision=new)
        self.repos.writer(request, old)
        self.repos.writer(request, new)
        try:
            await in_thread(self._move, old, new)
        except Conflict as e:
            return error(409, None, str(e))
        return JSONResponse({})

    def _move(self, old: str, new: str) -> None:
        from ocibridge.transfer.copy import copy

        branches = self.repos.branches
        with branches.lock(new, "main"), branches.lock(new, RECORD_LOCK), \
                branches.moving(old, f"{old} is being moved to {new}: ask again once the move is done"), \
                branches.moving(new, f"{old} is being moved to {new}: ask again once the move is done"):
            if self.repos.exists(new):
                raise Conflict(f"A model repository called {new} already exists")
            source = self.deleting.home(old)
            target = self.repos.catalog.sources[0].repository(repo_parts(new) or [])
            if target is None:
                raise BadCommit(f"{new}: no source can hold it")
            store = record_store(target)
            record = arrival_record(read_record(source), read_record(target))
            write_record(target, store, record)  # first: who may read it, before there is anything to read
            self.repos.catalog.forget(new)
            if record.private or record.gated:  # what another serve believes of it has expired
                time.sleep(self.repos.catalog.states.keep)
            for tag in source.tags():
                if tag == REFS_TAG:
                    continue
                try:
                    top = source.store.resolve(source.reference(tag))
                except NotFound:
                    continue
                if not is_tombstone(top.digest):
                    copy(source.store, top, store, target.reference(tag), referrers=True)
            self.deleting.delete_home(old, source, moved_to=new)
        self.repos.catalog.forget(new)
        log.info("%s: moved to %s (%s)", old, new, target.shown)


def arrival_record(source: RefsRecord, there: RefsRecord) -> RefsRecord:
    """The destination's refs record: the source's (its refs, who may read it), made again over
    a deleted repository of that name when one was there (repo/reborn.py)."""
    return dataclasses.replace(source, deleted=False, moved="",
                               recreated=source.recreated or there.deleted or there.recreated)
