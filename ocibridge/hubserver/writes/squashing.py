"""``super_squash_history`` (``POST /api/models/REPO/super-squash/{branch}``, huggingface_hub's
hf_api.py): the branch becomes one commit holding its head's files, with the message given.

The new commit is the head's manifest with no parent annotation and the squash's summary,
author and date: the same layers and config, so nothing but one manifest is written, landed as
every commit lands (:mod:`.landing`: by digest, signed when serve signs, its commit tag, then the
branch's). The branch's earlier commits keep their commit tags: other branches may hold them
(a branch made from ``main`` keeps its history), and a pinned commit id keeps resolving.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import NOT_JSON, branch_of, in_thread, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo import commits
from ocibridge.hubserver.repo.landing import land
from ocibridge.hubserver.repo.refnames import HEADS
from ocibridge.hubserver.repo.refsrecord import record_store
from ocibridge.hubserver.repo.sources import CREATED, RevisionNotFound, commit_of
from ocibridge.hubserver.writes.repos import Repos
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import RegistryReference

if TYPE_CHECKING:
    from ocibridge.hubserver.access import Grant
    from ocibridge.hubserver.repo.publishing import Publishing

log = logging.getLogger("ocibridge.hubserver")


class Squashing:
    """The squash route, over what the write routes share; ``publishing``: how commits are
    signed (None: this serve makes no commits)."""

    def __init__(self, repos: Repos, publishing: Publishing | None):
        self.repos = repos
        self.publishing = publishing

    async def squash(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        grant = self.repos.writer(request, repo_id)
        if self.publishing is None:
            raise commits.BadCommit("this serve does not publish (its application was built without publishing)")
        branch = branch_of(request.path_params["branch"])
        body = await json_body(request) if await request.body() else {}
        message = body.get("message") if isinstance(body, dict) and body is not NOT_JSON else None
        summary = message if isinstance(message, str) and message else f"Super-squash branch '{branch}'"
        commit = await in_thread(self._squash, repo_id, branch, summary[:commits.TEXT_MAX], grant)
        note(request, commit=commit)
        return JSONResponse({"commitOid": commit})

    def _squash(self, repo_id: str, branch: str, summary: str, grant: Grant) -> str:
        from ocibridge.hubserver.repo.commits import commit_time
        from ocibridge.oci.models import Manifest
        from ocibridge.transfer.writer import write_artifact

        assert self.publishing is not None
        catalog = self.repos.catalog
        with self.repos.branches.lock(repo_id, branch):
            try:
                head = catalog.resolve(repo_id, branch, kind=HEADS)
            except RevisionNotFound:
                raise RevisionNotFound(f"Invalid rev id: {branch} is no branch") from None
            if head.top.digest != head.model.digest or not isinstance(head.manifest, Manifest):
                raise commits.BadCommit(f"{branch}: its head is an index, not one model manifest: serve "
                                        "squashes the commits it wrote")
            notes = {k: v for k, v in (head.manifest.annotations or {}).items()
                     if k not in (commits.PARENT, commits.DESCRIPTION)}
            notes.update({commits.SUMMARY: summary, commits.AUTHOR: grant.name, CREATED: commit_time()})
            body = head.manifest.model_copy(update={"annotations": notes}).to_json_bytes()
            desc = Descriptor.for_bytes(head.model.mediaType, body)
            store = record_store(head.repo)
            tag = head.repo.reference(head.tag or catalog.default_tag)  # where the branch is (refnames.py)
            # by digest into a registry (landing.py tags it); a layout holds no untagged manifest
            write_artifact(store, desc, body, tags=[] if isinstance(head.repo.base, RegistryReference) else [tag])
            land(store, desc.digest, tag, notes, self.publishing.evidence, self.repos.lease.ensure)
            self.repos.lease.confirm()  # answered only while this serve still holds the writer lease
            catalog.forget(repo_id)
        log.info("%s: %s squashed %s into %s", repo_id, grant.name, branch, desc.digest)
        return commit_of(desc.digest)
