"""What the history and compare pages show, as data (the templates only lay it out).

- **History** (``/{repo}/commits/{rev}``): the commits of a branch as serve's publishing links
  them (each manifest names its parent's digest: :func:`..history.walk`, what
  ``list_repo_commits`` lists); a model pushed outside serve has no such links, so its
  history is then its tags, newest first by the date each artifact records.
- **Compare** (``/{repo}/compare/{a}...{b}``): :mod:`.compare` (its budgets and its kept diffs);
  here only how the two revisions are written in its path (:func:`split_compare`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError, RegistryError
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.commits import AUTHOR, DESCRIPTION, SUMMARY
from ocibridge.hubserver.repo.history import walk
from ocibridge.hubserver.repo.sources import CREATED, Refused, commit_of

#: tags resolved at most for a history by tags (each is a registry request)
TAGS_MAX = 200
#: what separates the two revisions in a compare path, as on the Hub and GitHub
SEPARATOR = "..."
#: the tags cosign's tag scheme gives signatures, attestations and SBOMs (``sha256-HEX.sig``):
#: artifacts about a version, never a version
EVIDENCE_TAG = re.compile(r"sha256-[0-9a-f]{64}(\.[A-Za-z0-9_-]+)?")


@dataclass(frozen=True)
class Commit:
    """One entry of a history: a manifest, what it says of itself, and the tags naming it."""

    commit: str  # the first 40 hex digits of the digest: the Hub's commit id
    digest: str
    title: str
    message: str
    author: str | None
    date: str | None
    tags: tuple[str, ...]
    previous: str | None  # the digest of the entry before it (what the compare link diffs against)


@dataclass(frozen=True)
class History:
    repo_id: str
    revision: str
    linked: bool  # True: commits linked by their parent; False: the repository's tags by date
    commits: tuple[Commit, ...]
    truncated: bool = False  # more tags than :data:`TAGS_MAX`: the oldest are left out


def history(catalog: Catalog, repo_id: str, revision: str | None) -> History:
    """The history shown for ``revision`` of ``repo_id`` (raises as :meth:`Catalog.resolve`)."""
    head = catalog.resolve(repo_id, revision)
    tags_of: dict[str, list[str]] = {}
    try:
        refs = catalog.refs(repo_id)
    except OcibridgeError:
        refs = None
    for tag, commit in refs.tags if refs else ():
        tags_of.setdefault(commit, []).append(tag)
    chain = walk(head)
    if len(chain) > 1:
        entries = []
        for number, (digest, notes) in enumerate(chain):
            previous = chain[number + 1][0] if number + 1 < len(chain) else None
            author = notes.get(AUTHOR)
            entries.append(Commit(commit_of(digest), digest, str(notes.get(SUMMARY) or "pushed outside serve"),
                                  str(notes.get(DESCRIPTION) or ""), str(author) if author else None,
                                  _text(notes.get(CREATED)), tuple(tags_of.get(commit_of(digest), ())), previous))
        return History(repo_id, head.revision, True, tuple(entries))
    return _by_tags(catalog, head, refs.tags if refs else ())


def _by_tags(catalog: Catalog, head: Resolved, tags: tuple[tuple[str, str], ...]) -> History:
    """The repository's tags as a history: one entry per manifest, newest first by its date
    (undated ones last), each diffed against the one after it."""
    found: dict[str, tuple[Resolved, list[str]]] = {}
    tags = tuple((tag, commit) for tag, commit in tags if not EVIDENCE_TAG.fullmatch(tag))
    for tag, _ in tags[:TAGS_MAX]:
        try:
            resolved = catalog.resolve(head.repo_id, tag)
        except (Refused, NotFound, InvalidReference, RegistryError, OcibridgeError):
            continue  # refused by the policy, or gone since it was listed: not shown
        found.setdefault(resolved.top.digest, (resolved, []))[1].append(tag)
    found.setdefault(head.top.digest, (head, []))
    ordered = sorted(found.values(), key=lambda item: (item[0].created is not None, item[0].created or ""),
                     reverse=True)
    entries = []
    for number, (resolved, names) in enumerate(ordered):
        previous = ordered[number + 1][0].top.digest if number + 1 < len(ordered) else None
        title = "tag " + ", ".join(sorted(names)) if names else "untagged"
        entries.append(Commit(resolved.commit, resolved.top.digest, title, "", None, resolved.created,
                              tuple(sorted(names)), previous))
    return History(head.repo_id, head.revision, False, tuple(entries), truncated=len(tags) > TAGS_MAX)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def split_compare(spec: str) -> tuple[str, str] | None:
    """``A...B`` as its two revisions; None when it is not two revisions joined by ``...``."""
    a, sep, b = spec.partition(SEPARATOR)
    return (a, b) if sep and a and b else None
