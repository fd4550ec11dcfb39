"""The tags ocibridge keeps in a repository for its own bookkeeping, named here once: what the
registry store writes beside every referrer, what it resolves a commit id by, what serve writes,
and what ``tags``, ``ls`` and serve's ref listings hide unless asked (docs/signing.md, "Tags
ocibridge keeps"; docs/serve.md, "History in the registry").

Only a tag protects a manifest from a registry's garbage collection: distribution's
``--delete-untagged`` deletes an untagged manifest even when a tagged index names it
(distribution#3004), and the referrers fallback index ``sha256-<hex>`` is such an index.

- ``ocibridge-ref-<64 hex>``: every manifest with a ``subject`` the registry store writes (a
  signature bundle, an OMS signature, an attestation, a chunk table, what ``attach`` adds),
  tagged by its own digest. Named by the referrer's digest, not by its subject's and a number:
  the same referrer gets the same tag in every registry, on every retry and copy, with no count
  to read or race on, and deleting the referrer by digest takes its tag with it.
- ``ocibridge-commit-<40 hex>``: every commit manifest serve writes, tagged by its commit id (the
  first 40 hex digits of its digest), which a tag then resolves with one HEAD.
  A commit id may be abbreviated, as git abbreviates one: its first :data:`SHORT_MIN` to 39 hex
  digits, unique among the repository's commits, name it (commitscan.py finds it). No tag is
  ever written for an abbreviation: :func:`commit_tag` of one is only the name a registry store
  looks it up by.
- ``ocibridge-refs``: the repository's refs record (:data:`REFS_ARTIFACT_TYPE`): which of its
  plain tags are branches, which are Hub tags; whether the repository is private or deleted.
- ``ocibridge-branch-<name>``, ``ocibridge-tag-<name>``: a Hub branch or tag whose name the
  other kind had first (the Hub keeps them apart, a registry has one tag of a name), as the refs
  record says (hubserver/repo/refnames.py).
- ``ocibridge-upstream-<40 hex>``: a commit serve's ``--upstream`` fetched, tagged by the
  upstream Hub's own commit id (hubserver/upstream/): the id a client pinned resolves, and the
  commit answers as that id (the manifest's ``org.opencontainers.image.revision`` says it too).
- ``ocibridge-reads``: when each commit a proxy fetched was last read (:data:`READS_ARTIFACT_TYPE`),
  and which names the proxy tagged on them: what ``--upstream-keep`` drops by
  (hubserver/lifetimes/).
- ``ocibridge-writer``: the writer lease of a whole SOURCE prefix (:data:`WRITER_ARTIFACT_TYPE`),
  in serve's own repository :data:`LEASE_REPO` under it: which serve process takes the writes
  there (hubserver/replicas/leaserecord.py).

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
REFERRER_TAG_PREFIX = PREFIX + "ref-"
UPSTREAM_TAG_PREFIX = PREFIX + "upstream-"
REFS_TAG = PREFIX + "refs"
#: the artifact type of the refs record's manifest, and its one layer's media type
REFS_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.refs.v1+json"
REFS_LAYER_TYPE = REFS_ARTIFACT_TYPE
#: the tag of a proxied repository's reads record, and its manifest's artifact type (its one layer's too)
READS_TAG = PREFIX + "reads"
READS_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.reads.v1+json"
#: the writer lease's tag, and the repository (a one-part repo id under the SOURCE prefix) it is kept in
WRITER_TAG = PREFIX + "writer"
LEASE_REPO = PREFIX + "serve"
#: the artifact type of the writer lease's manifest (its holder in annotations: one PUT a renewal)
WRITER_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.writer.v1+json"
#: the artifact type of the manifest a deleted tag names (the same bytes in every repository)
TOMBSTONE_ARTIFACT_TYPE = "application/vnd.ocibridge.serve.deleted.v1+json"
#: a serve commit id: the first 40 hex digits of its manifest's SHA-256 digest
COMMIT_ID = re.compile(r"[0-9a-f]{40}")
#: the fewest hex digits a commit id is abbreviated to (git's default abbreviation)
SHORT_MIN = 7
#: a commit id, whole or abbreviated (:data:`SHORT_MIN` to 40 hex digits)
COMMIT_PREFIX = re.compile(rf"[0-9a-f]{{{SHORT_MIN},40}}")
_COMMIT_TAG = re.compile(re.escape(COMMIT_TAG_PREFIX) + r"([0-9a-f]{40})")
_REFERRER_TAG = re.compile(re.escape(REFERRER_TAG_PREFIX) + r"([0-9a-f]{64})")
#: cosign's tags beside a subject: the referrers fallback index ``sha256-<hex>`` and its
#: ``.sig``, ``.att``, ``.sbom`` (any suffix: other tools add their own)
_COSIGN_TAG = re.compile(r"sha256-[0-9a-f]{64}(\.[A-Za-z0-9_-]+)?")
_PREFIX_TAG = re.compile(re.escape(COMMIT_TAG_PREFIX) + rf"([0-9a-f]{{{SHORT_MIN},40}})")


def commit_id(digest: str) -> str:
    """The commit id of a manifest digest (``sha256:HEX``)."""
    return digest.split(":", 1)[1][:40]


def commit_tag(commit: str) -> str:
    """The bookkeeping tag of a commit id; of an abbreviated one, the name a store looks it up
    by (never written: :func:`short_of_tag`)."""
    if not COMMIT_PREFIX.fullmatch(commit):
        raise ValueError(f"{commit!r}: not a commit id ({SHORT_MIN} to 40 lowercase hex digits)")
    return COMMIT_TAG_PREFIX + commit


def upstream_tag(commit: str) -> str:
    """The bookkeeping tag of a commit an upstream Hub names ``commit`` (40 hex digits)."""
    if not COMMIT_ID.fullmatch(commit):
        raise ValueError(f"{commit!r}: not an upstream commit id (40 lowercase hex digits)")
    return UPSTREAM_TAG_PREFIX + commit


def commit_of_tag(tag: str) -> str | None:
    """The commit id a bookkeeping commit tag names; None for any other tag."""
    match = _COMMIT_TAG.fullmatch(tag)
    return match.group(1) if match else None


def referrer_tag(digest: str) -> str:
    """The bookkeeping tag of a referrer manifest's digest (``sha256:HEX``); a digest of another
    algorithm keeps its name in the tag, cut at a tag's 128 characters."""
    algorithm, _, hexpart = digest.partition(":")
    if algorithm == "sha256":
        return REFERRER_TAG_PREFIX + hexpart
    return f"{REFERRER_TAG_PREFIX}{algorithm}-{hexpart}"[:128]


def referrer_of_tag(tag: str) -> str | None:
    """The digest a referrer's bookkeeping tag names (``sha256:HEX``); None for any other tag."""
    match = _REFERRER_TAG.fullmatch(tag)
    return f"sha256:{match.group(1)}" if match else None


def prefix_of_tag(tag: str) -> str | None:
    """The commit id, whole or abbreviated, a commit tag names; None for any other tag."""
    match = _PREFIX_TAG.fullmatch(tag)
    return match.group(1) if match else None


def short_of_tag(tag: str) -> str | None:
    """The abbreviated commit id of a commit tag no commit has (``ocibridge-commit-<7 to 39
    hex>``: a lookup, never a tag in a registry); None for any other tag."""
    prefix = prefix_of_tag(tag)
    return prefix if prefix is not None and len(prefix) < 40 else None


def is_bookkeeping(tag: str) -> bool:
    """Whether ``tag`` (a registry tag, or the TAG of a layout's ``NAME:TAG``) is ocibridge's own."""
    return tag.rpartition(":")[2].startswith(PREFIX)


def is_hidden(tag: str) -> bool:
    """Whether a listing of tags leaves ``tag`` out unless asked for all: ocibridge's own, and
    cosign's tags beside a subject (``sha256-<hex>``, ``.sig``, ``.att``, ``.sbom``), which name
    signatures and attachments, never a model."""
    return is_reserved(tag)


def is_evidence(tag: str) -> bool:
    """Whether ``tag`` is one of cosign's tags beside a subject (``sha256-<hex>`` and its
    ``.sig``, ``.att``, ``.sbom`` or any other suffix): a signature, attestation or referrers
    index of that subject, which only a signer writes (deleting one makes a signed model read as
    unsigned)."""
    return _COSIGN_TAG.fullmatch(tag.rpartition(":")[2]) is not None


def is_reserved(tag: str) -> bool:
    """Whether ``tag`` is no Hub branch or tag a writer may name: ocibridge's bookkeeping or
    cosign's evidence (:func:`is_bookkeeping`, :func:`is_evidence`)."""
    return is_bookkeeping(tag) or is_evidence(tag)


def refuse_as_destination(tag: str | None, shown: str) -> None:
    """``ocibridge-*`` tags are written by ocibridge itself (a commit's tag, the refs record, a
    referrer's, the writer lease): a push, copy, tag or load naming one as its destination would
    move a pinned commit or a record; refused with one line (:class:`UsageError`). Mirror jobs copy
    them as they are, under the same names."""
    from ocibridge.errors import UsageError

    if tag and is_bookkeeping(tag):  # a layout's NAME:TAG too
        raise UsageError(f"{shown}: tags starting with '{PREFIX}' are ocibridge's own bookkeeping "
                         "(docs/serve.md, History in the registry): name another tag")


def version_tags(tags: list[str]) -> list[str]:
    """The tags of ``tags`` that name versions: neither serve's bookkeeping nor cosign's evidence."""
    return [t for t in tags if not is_hidden(t)]


def version_order(tag: str) -> tuple[tuple[int, int | str], ...]:
    """A tag's place in version order: its runs of digits compared as numbers (``v9`` < ``v10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", tag))
