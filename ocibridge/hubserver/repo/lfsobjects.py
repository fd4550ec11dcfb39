"""A repository's LFS objects, listed and permanently deleted (huggingface_hub's ``list_lfs_files``
and ``permanently_delete_lfs_files``); no HTTP here (the routes: ``writeroutes/lfsfiles.py``).

An LFS object is a raw layer of a commit that the commit does not record as a regular file
(:mod:`ocibridge.hubserver.repo.regularfiles`), named by its SHA-256; it is listed once, with the first branch that
holds it (``main`` first), the path it has there and the date of the oldest commit that holds it.

A registry deletes no blob on request, and a blob stays while a tagged manifest names it, so a
permanent delete rewrites history: on every branch whose commits hold one of the objects, each
commit from the first that holds one is written again without those layers (its config without
their digests, its parent the rewritten one), given its commit tag, and the branch and the Hub
tags naming a rewritten commit move to its new one. The old commits that held the objects get
their commit tags moved to the tombstone (:mod:`ocibridge.hubserver.repo.tombstone`), so nothing tags them and
the registry's garbage collection takes them and the objects' blobs. Rewriting is the same
bytes whoever asks, so branches that shared commits share their rewritten ones too.
``rewriteHistory: false`` is taken as true: leaving commits that name a blob is leaving the blob.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.commits import PARENT
from ocibridge.hubserver.repo.deletes import bury
from ocibridge.hubserver.repo.history import COMMITS_MAX, NO_DATE, annotations_of, parent_of, read_manifest
from ocibridge.hubserver.repo.landing import bookkept, land
from ocibridge.hubserver.repo.refnames import HEADS, TAGS, registry_tag
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, read_record, record_store
from ocibridge.hubserver.repo.regularfiles import recorded
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import CREATED, RevisionNotFound
from ocibridge.oci.bookkeeping import commit_tag
from ocibridge.oci.layerinfo import raw_file_path
from ocibridge.oci.models import Descriptor

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.stores.base import ReadableStore, WritableStore

log = logging.getLogger("ocibridge.hubserver")

@dataclass
class LfsObject:
    """One LFS object as ``list_lfs_files`` shows it."""

    sha256: str
    filename: str
    size: int
    pushed_at: str
    ref: str

    def as_json(self) -> dict[str, Any]:
        return {"fileOid": self.sha256, "oid": self.sha256, "filename": self.filename, "size": self.size,
                "pushedAt": self.pushed_at, "ref": self.ref}


@dataclass
class _Commit:
    digest: str
    doc: dict[str, Any]
    lfs: dict[str, tuple[str, int]] = field(default_factory=dict)  # layer digest -> (path, size)


def _lfs_layers(doc: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """The raw layers of a manifest that it does not record as regular files: digest -> (path, size)."""
    regular = recorded(annotations_of(doc))
    found: dict[str, tuple[str, int]] = {}
    for raw in doc.get("layers") or []:
        try:
            layer = Descriptor.model_validate(raw)
            path = raw_file_path(layer)
        except (ValueError, OcibridgeError):
            continue
        if path is not None and path not in regular:
            found[layer.digest] = (path, layer.size)
    return found


def history_of(store: ReadableStore, head: str) -> list[_Commit]:
    """The commits from ``head`` back (newest first, at most :data:`COMMITS_MAX`), each with its LFS layers."""
    commits: list[_Commit] = []
    digest: str | None = head
    seen: set[str] = set()
    while digest is not None and digest not in seen and len(commits) < COMMITS_MAX:
        seen.add(digest)
        doc = read_manifest(store, digest)
        if doc is None:
            break
        commits.append(_Commit(digest, doc, _lfs_layers(doc)))
        digest = parent_of(annotations_of(doc))
    return commits


class LfsObjects:
    """The LFS objects of the repositories; ``publishing``: how rewritten heads are signed (as
    every commit serve lands)."""

    def __init__(self, repos: Repos, publishing: Publishing | None):
        self.repos = repos
        self.publishing = publishing

    def branches(self, repo_id: str) -> list[tuple[str, Resolved]]:
        """(name, head) of ``main`` and every recorded branch, ``main`` first."""
        catalog = self.repos.catalog
        main = catalog.resolve(repo_id, "main")
        found = [("main", main)]
        for name in sorted(read_record(main.repo).branches):
            try:
                found.append((name, catalog.resolve(repo_id, name, kind=HEADS)))
            except RevisionNotFound:
                continue
        return found

    def objects(self, repo_id: str) -> list[LfsObject]:
        seen: dict[str, LfsObject] = {}
        for name, head in self.branches(repo_id):
            for commit in history_of(head.repo.store, head.top.digest):
                date = str(annotations_of(commit.doc).get(CREATED) or NO_DATE)
                for digest, (path, size) in commit.lfs.items():
                    sha = digest.split(":", 1)[1]
                    known = seen.get(sha)
                    if known is None:
                        seen[sha] = LfsObject(sha, path, size, date, f"refs/heads/{name}")
                    elif date < known.pushed_at:
                        known.pushed_at = date
        return list(seen.values())

    def delete(self, repo_id: str, doomed: set[str], author: str) -> list[str]:
        """Rewrite every branch holding one of ``doomed`` (layer digests); the branches rewritten."""
        rewritten: list[str] = []
        old_tagged: set[str] = set()
        with self.repos.branches.lock(repo_id, RECORD_LOCK):
            for name, head in self.branches(repo_id):
                with self.repos.branches.lock(repo_id, name):
                    history = history_of(head.repo.store, head.top.digest)
                    if not any(doomed & c.lfs.keys() for c in history):
                        continue
                    moved = self._rewrite(head, name, history[::-1], doomed)
                    old_tagged |= {c.digest for c in history if doomed & c.lfs.keys()}
                    self._move_tags(head, moved)
                    rewritten.append(name)
            if rewritten:
                repo = self.branches(repo_id)[0][1].repo
                bury(record_store(repo), repo, [commit_tag(d.split(":", 1)[1][:40]) for d in sorted(old_tagged)])
        self.repos.catalog.forget(repo_id)
        log.info("%s: %s deleted %d LFS object(s) for good, rewriting %s", repo_id, author, len(doomed),
                 ", ".join(rewritten) or "nothing")
        return rewritten

    def _rewrite(self, head: Resolved, branch: str, oldest_first: list[_Commit], doomed: set[str]) -> dict[str, str]:
        """Each commit from the first holding a doomed layer written again without them; old digest -> new."""
        from ocibridge.transfer.writer import write_artifact

        store = record_store(head.repo)
        tag = head.repo.reference(head.tag or self.repos.catalog.default_tag)  # where the branch is (refnames.py)
        moved: dict[str, str] = {}
        started = False
        for number, commit in enumerate(oldest_first):
            started = started or bool(doomed & commit.lfs.keys())
            if not started:
                continue
            doc = dict(commit.doc)
            doc["layers"] = [raw for raw in doc.get("layers") or [] if raw.get("digest") not in doomed]
            notes = dict(annotations_of(doc))
            parent = notes.get(PARENT)
            if isinstance(parent, str) and parent in moved:
                notes[PARENT] = moved[parent]
            doc["annotations"] = notes
            if doomed & commit.lfs.keys():
                doc["config"] = _config_without(store, doc["config"], doomed)
            body = json.dumps(doc, separators=(",", ":")).encode()
            desc = Descriptor.for_bytes(str(doc.get("mediaType") or "application/vnd.oci.image.manifest.v1+json"),
                                        body)
            write_artifact(store, desc, body)  # by digest: its layers and config are there
            if number == len(oldest_first) - 1:  # the new head: signed and tagged as a commit lands
                land(store, desc.digest, tag, notes, self.publishing.evidence if self.publishing else None,
                     self.repos.lease.ensure)
                self.repos.lease.confirm()
            else:
                from ocibridge.transfer.writer import retag

                retag(store, desc, [bookkept(tag, desc.digest)])
            moved[commit.digest] = desc.digest
        return moved

    def _move_tags(self, head: Resolved, moved: dict[str, str]) -> None:
        """The Hub tags that named a rewritten commit name its new one."""
        from ocibridge.transfer.writer import retag

        repo, store = head.repo, record_store(head.repo)
        record = read_record(repo)
        for name in record.tags:
            tag = registry_tag(record, TAGS, name, self.repos.catalog.default_tag) or name
            try:
                now = store.resolve(repo.reference(tag)).digest
            except (NotFound, InvalidReference):
                continue
            if now in moved:
                retag(store, store.resolve(moved[now]), [repo.reference(tag)])


def _config_without(store: WritableStore, raw: Any, doomed: set[str]) -> dict[str, Any]:
    """The config descriptor of a commit whose ``doomed`` layers go: the same config with their
    digests taken out of its lists (ModelPack's diffIds), pushed as a blob."""
    from ocibridge.transfer.writer import Blob, write_blob

    config = Descriptor.model_validate(raw)
    doc = boundedjson.loads(store.fetch_bytes(config))
    data = json.dumps(_without(doc, doomed), separators=(",", ":")).encode()
    desc = Descriptor.for_bytes(config.mediaType, data)
    write_blob(store, Blob.of_bytes(desc, data))
    return desc.model_dump(exclude_none=True)


def _without(doc: Any, doomed: set[str]) -> Any:
    if isinstance(doc, dict):
        return {k: _without(v, doomed) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_without(v, doomed) for v in doc if not (isinstance(v, str) and v in doomed)]
    return doc
