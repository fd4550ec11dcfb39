"""Which registry tag holds a Hub branch or a Hub tag: the one place a ref's (kind, name) becomes
a registry tag, for every read and write of a ref.

The Hub keeps ``refs/heads/x`` and ``refs/tags/x`` apart; a registry has one tag ``x``. So a ref
is at the registry tag of its own name unless the other kind had that name first: then it is at
``ocibridge-branch-x`` or ``ocibridge-tag-x`` (serve's own names, that no push may take), as the
repository's refs record says (:mod:`.refsrecord`). A plain ``pull REG/repo:x`` so gets what it
got before the second ref was made, and the one ref of a name is always at that name.

A revision ``refs/heads/x`` or ``refs/tags/x`` names its kind; a bare ``x`` is the branch when
there is one, else the tag, as the Hub answers it (and as ``git checkout x`` picks). ``main`` is
always the branch at the default tag.
"""

from __future__ import annotations

import hashlib

from ocibridge.hubserver.repo.refrules import is_tag
from ocibridge.hubserver.repo.refsrecord import RefsRecord
from ocibridge.oci.bookkeeping import PREFIX

#: a revision's kind: a branch (``refs/heads/``) or a Hub tag (``refs/tags/``)
HEADS = "heads"
TAGS = "tags"
#: the reserved registry tags of a branch or a Hub tag whose name the other kind holds
ASIDE = {HEADS: PREFIX + "branch-", TAGS: PREFIX + "tag-"}


def split_revision(revision: str) -> tuple[str | None, str]:
    """``refs/heads/x`` -> (HEADS, x), ``refs/tags/x`` -> (TAGS, x), anything else -> (None, it)."""
    for kind in (HEADS, TAGS):
        prefix = f"refs/{kind}/"
        if revision.startswith(prefix) and len(revision) > len(prefix):
            return kind, revision[len(prefix):]
    return None, revision


def aside_tag(kind: str, name: str) -> str:
    """The reserved registry tag of the ref ``name`` of ``kind`` when the other kind holds
    ``name``, or when ``name`` is no registry tag at all (``feature/x``; one past a tag's 128
    characters once prefixed): then ``ocibridge-branch-sha256-`` and 40 hex of the name's
    SHA-256, which the refs record names."""
    tag = ASIDE[kind] + name
    if is_tag(tag):
        return tag
    return ASIDE[kind] + "sha256-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def other(kind: str) -> str:
    return TAGS if kind == HEADS else HEADS


def registry_tag(record: RefsRecord, kind: str | None, name: str, default_tag: str) -> str | None:
    """The registry tag that holds the ref ``name`` of ``kind`` (None: a bare name, the branch
    first); None when the record says there is no ref of that kind by that name. A plain tag the
    record does not name is a Hub tag (pushed outside serve), and a bare name no ref has is
    the registry tag of that name (``latest``, main's tag, included)."""
    if kind is None:
        if name == "main" or name in record.branches:
            kind = HEADS
        elif name in record.tags:
            kind = TAGS
        else:
            return name
    if kind == HEADS:
        if name == "main":
            return default_tag
        if name not in record.branches or name == default_tag:
            return None
        return aside_tag(HEADS, name) if name in record.branches_aside else name
    if name in record.tags:
        return aside_tag(TAGS, name) if name in record.tags_aside else name
    if name in record.branches or name in ("main", default_tag):
        return None
    return name


def held_by(record: RefsRecord, tag: str, default_tag: str) -> tuple[str, str] | None:
    """(kind, name) of the ref a plain registry tag holds (main: (HEADS, "main")); None when it
    holds none (a ref's old tag the record no longer names while it moves back)."""
    if tag == default_tag:
        return HEADS, "main"
    for kind in (HEADS, TAGS):
        if registry_tag(record, kind, tag, default_tag) == tag:
            return kind, tag
    return None
