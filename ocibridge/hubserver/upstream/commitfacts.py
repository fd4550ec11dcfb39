"""What the upstream says of a fetched commit beyond its files' bytes, kept as annotations of the
manifest the proxy writes, so that serve answers it as the upstream did once the commit landed
(the annotations serve reads for a commit of its own):

- the git blob id of each file the upstream keeps in git rather than LFS (:data:`..repo.regularfiles.REGULAR`):
  its tree ``oid``, sibling ``blobId`` and resolve ``ETag``, where ``push hf:`` names every file by
  its SHA-256 (the Hub cache it reads does not say which files are in git);
- the commit's date (``org.opencontainers.image.created``: model_info's ``lastModified`` of the
  revision, the commit's date in its list), title, message and first author (:mod:`.commits`'
  annotations), from the upstream's commit list at the commit (``list_repo_commits`` and the files'
  ``lastCommit`` say them); the date is model_info's ``lastModified`` where it lists no commits
  (the commit's own date first: a ``lastModified`` that said the repository's last change would
  move, and the same commit would make another manifest);
- the repository's ``createdAt`` (:data:`.upstreamids.REPO_CREATED`), from the upstream's
  model_info of the commit.

Each is a fact of the commit, the same at every ask: the same commit makes the same manifest. An
upstream that lists no commits (a 4xx) gives no title; one that cannot be asked (no answer, a
5xx) fails the fetch, which the next request starts again, rather than land a commit with fewer
facts (another digest)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ocibridge.hubserver.repo.commits import AUTHOR, DESCRIPTION, SUMMARY
from ocibridge.hubserver.repo.regularfiles import REGULAR, annotation
from ocibridge.hubserver.repo.sources import CREATED
from ocibridge.hubserver.repo.upstreamids import REPO_CREATED

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.client import UpstreamHub

#: characters of a title or message kept (the Hub's commit messages are short; a manifest is not a log)
TEXT_MAX = 16 * 1024


def regular_files(listed: Iterable[Any]) -> dict[str, str]:
    """path -> git blob id of each listed file (huggingface_hub's ``RepoFile``) not in LFS."""
    return {e.path: str(e.blob_id) for e in listed if e.lfs is None and isinstance(e.blob_id, str) and e.blob_id}


def commit_facts(hub: UpstreamHub, repo_id: str, commit: str, listed: Iterable[Any],
                 info: dict[str, Any] | None = None) -> dict[str, str]:
    """The annotations that keep what the upstream says of ``commit`` (above); ``info``: its
    model_info when the proxy holds it already (else asked)."""
    facts: dict[str, str] = {}
    regular = regular_files(listed)
    if regular:
        facts[REGULAR] = annotation(regular)
    what = f"{repo_id}@{commit}"
    if info is None:  # (asked by the fetch: after the upstream's pause, if it asked for one)
        info = hub.said(hub.session.api(repo_id, "revision", commit), what, waits=True)
    listed_commits = hub.said(hub.session.api(repo_id, "commits", commit), what, waits=True)
    entry = next((c for c in listed_commits if isinstance(c, dict) and c.get("id") == commit), None) \
        if isinstance(listed_commits, list) else None
    if entry is not None:
        _put(facts, CREATED, entry.get("date"))
        _put(facts, SUMMARY, entry.get("title"))
        _put(facts, DESCRIPTION, entry.get("message"))
        authors = entry.get("authors")
        first = authors[0] if isinstance(authors, list) and authors and isinstance(authors[0], dict) else {}
        _put(facts, AUTHOR, first.get("user"))
    if isinstance(info, dict):
        if CREATED not in facts:
            _put(facts, CREATED, info.get("lastModified"))
        _put(facts, REPO_CREATED, info.get("createdAt"))
    return facts


def _put(facts: dict[str, str], key: str, value: Any) -> None:
    if isinstance(value, str) and value:
        facts[key] = value[:TEXT_MAX]
