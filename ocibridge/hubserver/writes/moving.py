"""``move_repo`` (``POST /api/repos/move`` ``{fromRepo, toRepo}``, huggingface_hub's hf_api.py):
the repository under its new id, then the old one deleted as ``delete_repo`` deletes.

A registry has no rename: every live tag of the old repository (its branches, Hub tags, commit
tags, the refs record, cosign's signature tags) is copied to the new one, its blobs mounted
rather than sent where the registry allows, and with them the referrers of each (signatures,
attestations, chunk tables). Only then is the old one deleted (:mod:`.deleting`): a failure
midway leaves the old repository whole and the new one partial, and the move can be asked again.
Commit ids stay the same (the manifests are the same bytes), so a pinned commit resolves under
the new id.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import NotFound
from ocibridge.hubserver.answers import error, in_thread
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.reading.sources import repo_parts
from ocibridge.hubserver.reading.tombstone import is_tombstone
from ocibridge.hubserver.writes.commits import BadCommit
from ocibridge.hubserver.writes.creating import model_repo_body
from ocibridge.hubserver.writes.deleting import Deleting
from ocibridge.hubserver.writes.refsrecord import RECORD_LOCK, record_store
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
        with branches.lock(new, "main"), branches.lock(new, RECORD_LOCK):
            if self.repos.exists(new):
                raise Conflict(f"A model repository called {new} already exists")
            source = self.deleting.home(old)
            target = self.repos.catalog.sources[0].repository(repo_parts(new) or [])
            if target is None:
                raise BadCommit(f"{new}: no source can hold it")
            store = record_store(target)
            # the refs record first: the new repository is as private and gated as the old from its
            # first tag on, and a record not copied (the registry failed) copies nothing else
            for tag in sorted(source.tags(), key=lambda name: name != REFS_TAG):
                try:
                    top = source.store.resolve(source.reference(tag))
                except NotFound:
                    continue
                if not is_tombstone(top.digest):
                    copy(source.store, top, store, target.reference(tag), referrers=True)
        self.deleting.delete_home(old, source, moved_to=new)
        self.repos.catalog.forget(new)
        log.info("%s: moved to %s (%s)", old, new, target.shown)
