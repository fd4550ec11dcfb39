"""A serve commit id whose bookkeeping tag is missing (a manifest pushed outside ``ocibridge
serve``, or a commit made before serve tagged its commits): found among the repository's tags,
the one manifest whose digest it abbreviates (oci/bookkeeping.py)."""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.errors import InvalidReference, NotFound
from ocibridge.oci.bookkeeping import commit_id, is_hidden
from ocibridge.oci.models import Descriptor

#: tags resolved at most looking for a commit id
MAX_TAGS_SCANNED = 1000


def find_commit(commit: str, tags: list[str], resolve: Callable[[str], Descriptor]) -> str | None:
    """The digest of the one manifest among ``tags`` (resolved by ``resolve``) whose commit id is
    ``commit``; None when none or several (an ambiguous id names nothing)."""
    found: set[str] = set()
    for tag in [t for t in tags if not is_hidden(t)][:MAX_TAGS_SCANNED]:  # ours and cosign's name no commit
        try:
            digest = resolve(tag).digest
        except (NotFound, InvalidReference):
            continue
        if commit_id(digest) == commit:
            found.add(digest)
    return found.pop() if len(found) == 1 else None
