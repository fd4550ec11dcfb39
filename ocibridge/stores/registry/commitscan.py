"""A serve commit id, whole or abbreviated, found among a repository's tags, as git finds an
object by a prefix of its id: the commit tags' names (``ocibridge-commit-<id>``: no request)
and, for manifests pushed outside ``ocibridge serve`` (no commit tag), the digests the plain
tags resolve to (oci/bookkeeping.py). Two commits starting with the prefix name neither: the
abbreviation is refused, naming them, as git refuses an ambiguous short id."""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.errors import DigestMismatch, InvalidReference, NotFound
from ocibridge.oci.bookkeeping import commit_id, commit_of_tag, is_hidden, prefix_of_tag
from ocibridge.oci.digest import is_digest
from ocibridge.oci.models import Descriptor

#: tags resolved at most looking for a commit id
MAX_TAGS_SCANNED = 1000
#: candidates an ambiguous abbreviation's message names
NAMED = 5


class AmbiguousCommit(NotFound):
    """An abbreviated commit id that more than one commit of the repository starts with."""

    def __init__(self, shown: str, prefix: str, candidates: list[str]):
        self.prefix, self.candidates = prefix, sorted(candidates)
        named = ", ".join(self.candidates[:NAMED]) + (", ..." if len(self.candidates) > NAMED else "")
        super().__init__(f"{shown}: the commit id {prefix} is ambiguous: {len(self.candidates)} commits start "
                         f"with it ({named}); give more of its digits")


def find_commit(commit: str, tags: list[str], resolve: Callable[[str], Descriptor], shown: str = "") -> str | None:
    """What names the one commit whose id starts with ``commit`` (a whole id or an abbreviation)
    among ``tags``: the digest a plain tag resolves to (``resolve``), else the commit tag naming
    it; None when none does; :class:`AmbiguousCommit` (``shown``: where, for its message) when
    several do. Plain tags are resolved at most :data:`MAX_TAGS_SCANNED`, and not once two
    commit tags already make the abbreviation ambiguous."""
    found: dict[str, str] = {}  # commit id -> the digest or the commit tag naming it
    for tag in tags:
        named = commit_of_tag(tag)
        if named is not None and named.startswith(commit):
            found.setdefault(named, tag)
    for tag in [t for t in tags if not is_hidden(t)][:MAX_TAGS_SCANNED]:
        if len(found) > 1:
            break
        try:
            digest = resolve(tag).digest
        except (NotFound, InvalidReference):
            continue
        if commit_id(digest).startswith(commit):
            found[commit_id(digest)] = digest
    if len(found) > 1:
        raise AmbiguousCommit(shown or "this repository", commit, list(found))
    return next(iter(found.values()), None)


def check_commit_tag(reference: str, digest: str, shown: str) -> None:
    """A serve commit tag (``ocibridge-commit-<id>``) names the manifest whose digest its id
    abbreviates, or what the registry answers is not that commit (``shown``: the repository)."""
    commit = commit_of_tag(reference)
    if commit is not None and not digest.startswith(f"sha256:{commit}"):
        raise DigestMismatch(f"{shown}@{commit}: its tag {reference} names {digest}, another manifest")


def commit_behind(reference: str, tags: Callable[[], list[str]], resolve: Callable[[str], Descriptor],
                  shown: str) -> str:
    """What a missing serve commit tag (``ocibridge-commit-<id>``), or an abbreviated commit
    id's (``ocibridge-commit-<7 to 39 hex>``), stands for, found among the other ``tags`` of the
    repository ``shown`` (:func:`find_commit`): a digest, or the commit tag of the one commit an
    abbreviation names; NotFound for a missing tag or digest of any other kind, or an ambiguous
    abbreviation."""
    commit = prefix_of_tag(reference)
    if commit is None:
        sep = "@" if is_digest(reference) else ":"
        raise NotFound(f"{shown}{sep}{reference}: manifest not found")
    at = f"{shown}@{commit}"
    found = find_commit(commit, [t for t in tags() if t != reference], resolve, at)
    if found is None:
        if len(commit) < 40:
            raise NotFound(f"{at}: no commit of this repository has an id starting with {commit}")
        raise NotFound(f"{at}: no manifest of this repository has this commit id")
    return found
