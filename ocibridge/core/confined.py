"""One rule for every tree ocibridge writes from untrusted input: nothing reaches outside it.

A link checked on its own (lexically) can look harmless and still escape once other links are
followed: ``d/a -> ..`` stays inside, but ``d/b -> a/../..`` then climbs above the root. The
resolver here walks a path component by component through the links of the tree being written,
as the kernel would, and refuses any step above the root. Directory pulls, archive exports,
``k8s mount`` and ``k8s check`` all call it, so the rule lives once and ``check`` predicts
exactly what ``mount`` refuses.

Whiteouts (the names that delete in image layers) are read in one place,
:mod:`ocibridge.layers.applier`, which refuses those that would delete the directory itself, its
parent, or anything named with a separator.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from ocibridge.errors import UnsafePath

MAX_LINK_HOPS = 40  # Linux's MAXSYMLINKS: a longer chain is a loop, or built to waste time

LinkLookup = Callable[[str], "str | None"]  # path inside the tree -> its link target, or None


def resolve_inside(path: str, link_at: LinkLookup, *, what: str = "path") -> str:
    """Where ``path`` (relative to the root) really leads, following links; '' is the root.

    Raises :class:`UnsafePath` when a step climbs above the root, a link is absolute, or the
    chain is longer than :data:`MAX_LINK_HOPS`.
    """
    pending = [p for p in path.split("/") if p not in ("", ".")]
    pending.reverse()
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                raise UnsafePath(f"{what} {path!r} leads outside the tree")
            resolved.pop()
            continue
        candidate = "/".join([*resolved, part])
        target = link_at(candidate)
        if target is None:
            resolved.append(part)
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            raise UnsafePath(f"{what} {path!r}: more than {MAX_LINK_HOPS} links to follow (a loop?)")
        if target.startswith("/"):
            raise UnsafePath(f"{what} {path!r}: link {candidate} is absolute ({target})")
        pending.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
    return "/".join(resolved)


def check_link(link_path: str, target: str, link_at: LinkLookup) -> None:
    """Refuse a link at ``link_path`` whose target, followed through the tree, leaves it."""
    if not target or "\x00" in target:
        raise UnsafePath(f"{link_path}: empty or NUL-containing link target")
    if target.startswith("/"):
        raise UnsafePath(f"{link_path}: symlink points outside the tree ({target})")
    parent = posixpath.dirname(link_path)
    try:
        resolve_inside(posixpath.join(parent, target) if parent else target, link_at, what="link")
    except UnsafePath:
        raise UnsafePath(f"{link_path}: symlink points outside the tree ({target})") from None


def check_links(links: dict[str, str], also: LinkLookup | None = None) -> None:
    """Every link of a finished tree, resolved through all the others (and ``also``, links
    already at the destination), stays inside it."""

    def link_at(path: str) -> str | None:
        if path in links:
            return links[path]
        return also(path) if also is not None else None

    for path in sorted(links):
        check_link(path, links[path], link_at)


def no_link_on_the_way(path: str, is_link: Callable[[str], bool], *, what: str = "path") -> None:
    """Refuse ``path`` when one of its parent directories is a link: a write or a deletion
    through a link lands wherever the link points."""
    parts = path.split("/")[:-1]
    for i in range(len(parts)):
        parent = "/".join(parts[: i + 1])
        if is_link(parent):
            raise UnsafePath(f"{what} {path}: a parent directory is a symlink ({parent})")
