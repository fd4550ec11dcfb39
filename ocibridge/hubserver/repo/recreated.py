"""A repository made again over a deleted one of its name (``delete_repo`` then ``create_repo``,
or ``move_repo`` onto that name) starts anew: what was deleted is never reached through it. The
deleted one's manifests stay in the registry until its garbage collection, every tag of it naming
serve's tombstone, so a revision named by a *tag* cannot find them; one named by digest or commit
id could. Its refs record says ``recreated`` (:mod:`.refsrecord`), and a manifest so named is then
one of its own commits only when its commit tag (``ocibridge-commit-<id>``, written for every
commit serve lands: repo/landing.py, and copied by a move) names it: a deleted commit's tag
names the tombstone."""

from __future__ import annotations

from ocibridge.errors import DigestMismatch, InvalidReference, NotFound
from ocibridge.hubserver.repo.sources import Repository
from ocibridge.oci.bookkeeping import commit_id, commit_tag
from ocibridge.oci.models import Descriptor


def own_commit(repo: Repository, top: Descriptor) -> bool:
    """Whether ``top`` (named by digest or commit id) is a commit of the repository as it is now:
    its commit tag names it."""
    try:
        tagged = repo.store.resolve(repo.reference(commit_tag(commit_id(top.digest))))
    except (NotFound, DigestMismatch, InvalidReference):  # none, or the tombstone (the store's check)
        return False
    return tagged.digest == top.digest
