"""A repository's revisions as the Hub lists its refs (main, branches, Hub tags)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ocibridge.hubserver.repo.sources import DEFAULT_TAG


@dataclass(frozen=True)
class Refs:
    """A repository's revisions as the Hub lists its refs: ``main`` (the default tag), the
    branches and the Hub tags, each at the registry tag :mod:`.refnames` says (serve's
    bookkeeping tags left out of ``tags``)."""

    repo_id: str
    main: str | None  # the commit of the default tag; None when the repository lacks it
    tags: tuple[tuple[str, str], ...]  # (registry tag, commit) of every plain tag, sorted by tag
    branches: tuple[tuple[str, str], ...] = ()  # (name, commit) of each branch besides main, sorted
    labels: tuple[tuple[str, str], ...] = ()  # (name, commit) of each Hub tag, sorted
    default_tag: str = DEFAULT_TAG  # main's tag

    def hub_branches(self) -> list[tuple[str, str]]:
        """(name, commit) of each branch: ``main`` first, then the others."""
        return ([("main", self.main)] if self.main is not None else []) + list(self.branches)

    def hub_tags(self) -> list[tuple[str, str]]:
        """(name, commit) of each Hub tag."""
        return list(self.labels)


def named_upstream(refs: Refs, ids: dict[str, str]) -> Refs:
    """``refs`` with each commit the upstream gave named by the upstream's id (``ids``)."""
    if not ids:
        return refs

    def named(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((name, ids.get(commit, commit)) for name, commit in pairs)

    main = ids.get(refs.main, refs.main) if refs.main is not None else None
    return dataclasses.replace(refs, main=main, tags=named(refs.tags), branches=named(refs.branches),
                               labels=named(refs.labels))
