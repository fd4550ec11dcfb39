"""The tags ``ocibridge serve`` keeps in a repository for its own bookkeeping, named here once:
what the registry store resolves a commit id by, what serve writes, and what ``tags``, ``ls``
and serve's ref listings hide unless asked (docs/serve.md, "History in the registry").

- ``ocibridge-commit-<40 hex>``: every commit manifest serve writes, tagged by its commit id (the
  first 40 hex digits of its digest). Only a tag protects a manifest from a registry's garbage
  collection (distribution's ``--delete-untagged`` deletes an untagged manifest even when a
  tagged index names it: distribution#3004), and a tag resolves a commit id with one HEAD.
- ``ocibridge-refs``: the repository's refs record (:data:`REFS_ARTIFACT_TYPE`): which of its
  plain tags are branches, which are Hub tags; whether the repository is private or deleted.

A tag serve deleted (a branch, a Hub tag, every tag of a deleted repository) names serve's
tombstone (:data:`TOMBSTONE_ARTIFACT_TYPE`): most registries delete a manifest with every tag
naming it, not one tag, so a deleted tag is moved to a manifest that says "no such ref" instead.

The tags that name a *version* are the others, less cosign's (``sha256-<hex>.sig``, ``.att``,
``.sbom``, and the referrers fallback ``sha256-<hex>``): what a listing offers as versions, in
version order (:func:`version_tags`, :func:`version_order`).
"""

from __future__ import annotations

import re

#: what every bookkeeping tag starts with
PREFIX = "ocibridge-"
COMMIT_TAG_PREFIX = PREFIX + "commit-"
REFS_TAG = PREFIX + "refs"
#: the artifact type of the refs record's manifest, and its one layer's media type
REFS_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.refs.v1+json"
REFS_LAYER_TYPE = REFS_ARTIFACT_TYPE
#: the artifact type of the manifest a deleted tag names (the same bytes in every repository)
TOMBSTONE_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.deleted.v1+json"
#: a serve commit id: the first 40 hex digits of its manifest's SHA-256 digest
COMMIT_ID = re.compile(r"[0-9a-f]{40}")
_COMMIT_TAG = re.compile(re.escape(COMMIT_TAG_PREFIX) + r"([0-9a-f]{40})")


def commit_id(digest: str) -> str:
    """The commit id of a manifest digest (``sha256:HEX``)."""
    return digest.split(":", 1)[1][:40]


def commit_tag(commit: str) -> str:
    """The bookkeeping tag of a commit id."""
    if not COMMIT_ID.fullmatch(commit):
        raise ValueError(f"{commit!r}: not a commit id (40 lowercase hex digits)")
    return COMMIT_TAG_PREFIX + commit


def commit_of_tag(tag: str) -> str | None:
    """The commit id a bookkeeping commit tag names; None for any other tag."""
    match = _COMMIT_TAG.fullmatch(tag)
    return match.group(1) if match else None


def is_bookkeeping(tag: str) -> bool:
    """Whether ``tag`` (a registry tag, or the TAG of a layout's ``NAME:TAG``) is serve's own."""
    return tag.rpartition(":")[2].startswith(PREFIX)


#: cosign's ``sha256-<hex>.sig/.att/.sbom`` tags and the referrers fallback ``sha256-<hex>``:
#: evidence about a version, never a version
EVIDENCE_TAG = re.compile(r"sha256-[0-9a-f]{64}(\.[A-Za-z0-9_-]+)?")


def version_tags(tags: list[str]) -> list[str]:
    """The tags of ``tags`` that name versions: neither serve's bookkeeping nor cosign's evidence."""
    return [t for t in tags if not is_bookkeeping(t) and not EVIDENCE_TAG.fullmatch(t)]


def version_order(tag: str) -> tuple[tuple[int, int | str], ...]:
    """A tag's place in version order: its runs of digits compared as numbers (``v9`` < ``v10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", tag))
