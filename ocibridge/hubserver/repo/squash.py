"""``super_squash_history``: the branch becomes one commit holding its head's files, with the
message given; no HTTP here (the route: ``writeroutes/squashing.py``).

The new commit is the head's manifest with no parent annotation and the squash's summary,
author and date: the same layers and config, so nothing but one manifest is written, landed as
every commit lands (:mod:`.landing`: by digest, signed when serve signs, its commit tag, then the
branch's). The branch's earlier commits keep their commit tags: other branches may hold them
(a branch made from ``main`` keeps its history), and a pinned commit id keeps resolving.
"""

from __future__ import annotations

import logging

from ocibridge.hubserver.repo import commits
from ocibridge.hubserver.repo.landing import land
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.hubserver.repo.refnames import HEADS
from ocibridge.hubserver.repo.refsrecord import record_store
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import CREATED, RevisionNotFound, commit_of
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import RegistryReference

log = logging.getLogger("ocibridge.hubserver")


def squash(repos: Repos, publishing: Publishing, repo_id: str, branch: str, summary: str, author: str) -> str:
    """Squash ``branch`` into one commit of ``summary`` by ``author``, its lock held; its commit id."""
    from ocibridge.oci.models import Manifest
    from ocibridge.transfer.writer import write_artifact

    catalog = repos.catalog
    with repos.branches.lock(repo_id, branch):
        try:
            head = catalog.resolve(repo_id, branch, kind=HEADS)
        except RevisionNotFound:
            raise RevisionNotFound(f"Invalid rev id: {branch} is no branch") from None
        if head.top.digest != head.model.digest or not isinstance(head.manifest, Manifest):
            raise commits.BadCommit(f"{branch}: its head is an index, not one model manifest: serve "
                                    "squashes the commits it wrote")
        notes = {k: v for k, v in (head.manifest.annotations or {}).items()
                 if k not in (commits.PARENT, commits.DESCRIPTION)}
        notes.update({commits.SUMMARY: summary, commits.AUTHOR: author, CREATED: commits.commit_time()})
        body = head.manifest.model_copy(update={"annotations": notes}).to_json_bytes()
        desc = Descriptor.for_bytes(head.model.mediaType, body)
        store = record_store(head.repo)
        tag = head.repo.reference(head.tag or catalog.default_tag)  # where the branch is (refnames.py)
        # by digest into a registry (landing.py tags it); a layout holds no untagged manifest
        write_artifact(store, desc, body, tags=[] if isinstance(head.repo.base, RegistryReference) else [tag])
        land(store, desc.digest, tag, notes, publishing.evidence, repos.lease.ensure)
        repos.lease.confirm()  # answered only while this serve still holds the writer lease
        catalog.forget(repo_id)
    log.info("%s: %s squashed %s into %s", repo_id, author, branch, desc.digest)
    return commit_of(desc.digest)
