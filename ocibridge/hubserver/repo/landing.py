"""How a commit lands in the registry, in the order every reader and a crash rely on:

1. the commit's manifest, pushed by digest only (no tag);
2. its content scan's report, when serve scans (``--scan refuse``: a flagged commit refused here,
   nothing tagged; ``quarantine``: it lands, read by its owners alone, repo/quarantined.py), then
   its signature and attestations, when serve signs (:mod:`.evidence`);
3. its bookkeeping tag ``ocibridge-commit-<id>`` (oci/bookkeeping.py): from here on the commit id
   resolves on any process, and the registry's garbage collection keeps the manifest (only a
   tag protects one from distribution's ``garbage-collect --delete-untagged``);
4. the writer lease checked (``before_branch``: still held, replicas/writerlease.py), then the
   branch's tag, moved to it.

A crash between two steps leaves the branch where it was: at worst an untagged manifest (collected)
or a commit tag no branch reaches yet. An OCI layout source, which has no garbage collection and
cannot hold an untagged manifest, gets the branch's tag from the push itself, the commit tag after.

Commits serve wrote before it tagged its commits, and manifests pushed outside serve, get their
tag when the next commit lands on top of them (:func:`tag_ancestors`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.evidence import Evidence, EvidenceFailed, attach
from ocibridge.hubserver.repo.sources import commit_of
from ocibridge.oci.bookkeeping import commit_tag

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")


def bookkept(tag: str, digest: str) -> str:
    """The commit tag of ``digest`` beside ``tag``: a registry's ``ocibridge-commit-<id>``; in a
    layout, whose names are ``org/name:TAG``, ``org/name:ocibridge-commit-<id>``."""
    head, sep, _ = tag.rpartition(":")
    return f"{head}{sep}{commit_tag(commit_of(digest))}"


def land(store: WritableStore, digest: str, tag: str, annotations: Mapping[str, str],
         evidence: Evidence | None, before_branch: Callable[[], None] | None = None) -> None:
    """Steps 2 to 4 for the manifest ``digest`` ``store`` holds, the branch's tag being ``tag``.
    Nothing is tagged when the evidence fails (:class:`.EvidenceFailed`, saying so); the branch
    is not moved when ``before_branch`` raises (a lease no longer held)."""
    subject = store.resolve(digest)
    if evidence is not None and evidence.scan in ("refuse", "quarantine"):
        _scanned(store, subject, tag, evidence)
    if evidence is not None and evidence.wanted:
        try:
            attach(store, subject, tag, annotations, evidence)
        except (OcibridgeError, OSError) as e:
            raise EvidenceFailed(f"{store.describe()}: commit {commit_of(digest)} was refused: its evidence "
                                 f"could not be written ({e}); {tag} was not moved") from e
    from ocibridge.transfer.writer import tag_held

    body = store.fetch_bytes(subject)
    # the manifest is there (pushed by digest): each tag is one write of its bytes, no copy's
    # question first of whether it is
    tag_held(store, subject, body, bookkept(tag, digest))  # the commit tag first
    if before_branch is not None:
        before_branch()
    tag_held(store, subject, body, tag)


def tag_ancestors(store: WritableStore, head: str, tag: str, most: int) -> int:
    """Tag ``head`` and its ancestors (their parent annotations) that lack their commit tag, newest
    first, stopping at the first that has it (serve tags in order: those before it have theirs)
    or after ``most``; how many were tagged. One HEAD a commit when the history is tagged already."""
    from ocibridge.hubserver.repo.history import chain
    from ocibridge.transfer.writer import retag

    tagged = 0
    for number, (digest, _) in enumerate(chain(store, head)):
        if number >= most:
            break
        wanted = bookkept(tag, digest)
        try:
            if store.resolve(wanted).digest == digest:
                break
        except (NotFound, InvalidReference):
            pass
        retag(store, store.resolve(digest), [wanted])
        tagged += 1
    if tagged:
        log.info("%s: tagged %d earlier commit(s) of %s", store.describe(), tagged, tag)
    return tagged


class ScanFlagged(BadCommit):
    """A commit whose files the scanner flags (``serve --scan refuse``): refused, nothing tagged."""


def _scanned(store: WritableStore, subject: Descriptor, tag: str, evidence: Evidence) -> None:
    """The commit's files scanned and the report attached (signed where serve signs); a flagged one refused."""
    from ocibridge.scanning.screening import judge_stored

    verdict = judge_stored(store, subject, mode=evidence.scan, key=evidence.attest_key or evidence.sign_key,
                           identity=evidence.identity or "")
    if verdict.refused:
        raise ScanFlagged(f"{store.describe()}: commit {commit_of(subject.digest)} was refused: {verdict.line()}; "
                          f"{tag} was not moved")
