"""The commit page's data (``/{repo}/commit/{rev}``, the Hub's own path): one commit as serve's
publishing recorded it in its manifest's annotations (title, description, author, date, parent),
and the files it changed against its parent: the compare page's files table
(:func:`ocibridge.lazyread.diff.changed_files`, ``ocibridge diff``'s own), made from the two
manifests' layers, by digest and size, with no byte of a file read.

A manifest pushed outside serve records no parent: its files are shown as a first commit's
(every one added), as git shows a root commit's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.commits import AUTHOR, DESCRIPTION, SUMMARY
from ocibridge.hubserver.repo.history import annotations_of, parent_of, read_manifest
from ocibridge.hubserver.repo.sources import CREATED, commit_of

if TYPE_CHECKING:
    from ocibridge.lazyread.diff import FileChange
    from ocibridge.oci.models import Descriptor

#: the title of a manifest serve's publishing did not write (as the history shows it)
OUTSIDE = "pushed outside serve"


@dataclass(frozen=True)
class Parent:
    commit: str
    digest: str


@dataclass(frozen=True)
class CommitView:
    """One commit; ``files`` against its parent (every file added: it has none); ``why``: why
    they are not shown (the parent is gone from the registry, or refused by the policy)."""

    resolved: Resolved
    title: str
    message: str
    author: str | None
    date: str | None
    parents: tuple[Parent, ...]
    files: tuple[FileChange, ...]
    why: str | None = None

    @property
    def commit(self) -> str:
        return self.resolved.commit

    @property
    def digest(self) -> str:
        return self.resolved.top.digest


def commit_view(catalog: Catalog, repo_id: str, revision: str) -> CommitView:
    """The commit ``revision`` names (raises as :meth:`Catalog.resolve`); its parent resolved as
    every read is (the policy checked), so a parent the policy refuses shows no files."""
    from ocibridge.lazyread.diff import changed_files

    resolved = catalog.resolve(repo_id, revision)
    notes = annotations_of(read_manifest(resolved.repo.store, resolved.top.digest) or {})
    author, created = notes.get(AUTHOR), notes.get(CREATED)
    parent = parent_of(notes)
    before: list[Descriptor] = []
    why = None
    if parent:
        try:
            before = list(catalog.resolve(repo_id, parent).manifest.layers)
        except OcibridgeError as e:
            why = f"its parent cannot be read: {e}"
    files = () if why else tuple(changed_files(before, resolved.manifest.layers))
    return CommitView(resolved, str(notes.get(SUMMARY) or OUTSIDE), str(notes.get(DESCRIPTION) or ""),
                      str(author) if author else None,
                      created if isinstance(created, str) and created else resolved.created,
                      (Parent(commit_of(parent), parent),) if parent else (), files, why)
