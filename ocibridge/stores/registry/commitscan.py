"""A serve commit id, whole or abbreviated, found among a repository's tags, as git finds an
object by a prefix of its id: the commit tags' names (``ocibridge-commit-<id>``: no request)
and, for manifests pushed outside ``ocibridge serve`` (no commit tag), the digests the plain
tags resolve to (oci/bookkeeping.py). Two commits starting with the prefix name neither: the
abbreviation is refused, naming them, as git refuses an ambiguous short id."""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.errors import InvalidReference, NotFound
from ocibridge.oci.bookkeeping import commit_id, commit_of_tag, is_hidden
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
