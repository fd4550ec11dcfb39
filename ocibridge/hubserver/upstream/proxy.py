"""The catalog of a proxy (``serve REG/PREFIX --upstream URL``): a read whose repository or
revision the registry lacks is resolved at the upstream, let in or refused at the door, fetched
once (:mod:`.ingest`) and answered from the registry; a read of a branch the upstream gave is
re-checked against the upstream's head at most every ``--upstream-fresh`` seconds.

The rules, in the order a miss meets them:

1. a repository made here (no commit of it came from the upstream) never takes the upstream's
   commits: only a repository no source holds, or one the upstream filled, is asked for;
2. ``--upstream-deny``/``--upstream-allow``: decided on the repo id, before the upstream is asked;
3. the upstream resolves the revision (model_info: its commit, its files): nothing else is asked
   before the pickle rule has read the file names;
4. pickle formats (settings.PICKLE) refused unless ``--upstream-allow-pickle``;
5. the commit fetched (or found fetched: its upstream tag), the revision's name tagged.

A write's resolution (``ref``, ``kind``) is never proxied: it resolves the registry as it is."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.refnames import registry_tag, split_revision
from ocibridge.hubserver.repo.refrules import is_tag
from ocibridge.hubserver.repo.refsrecord import read_record
from ocibridge.hubserver.repo.sources import (
    COMMIT,
    DIGEST,
    RepoMoved,
    RepoNotFound,
    Repository,
    RevisionNotFound,
    commit_of,
    repo_parts,
    revision_named,
)
from ocibridge.hubserver.repo.upstreamids import is_proxied
from ocibridge.hubserver.upstream.client import UpstreamHub, UpstreamRevision
from ocibridge.hubserver.upstream.errors import UpstreamDown, UpstreamRefused
from ocibridge.hubserver.upstream.ingest import Audit, Ingest, writable
from ocibridge.oci.bookkeeping import is_reserved

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.hubserver.repo.sources import Source
    from ocibridge.hubserver.upstream.settings import UpstreamSettings

log = logging.getLogger("ocibridge.hubserver")
#: branch heads whose last check is remembered (past it, all are forgotten: each is checked once more)
CHECKED = 4096


class ProxyCatalog(Catalog):
    """A :class:`Catalog` whose first source (a registry) is filled from an upstream Hub."""

    def __init__(self, sources: Sequence[Source], upstream: UpstreamSettings, *, evidence: Evidence | None = None,
                 **kwargs: Any):
        super().__init__(sources, **kwargs)
        self.upstream = upstream
        self.hub = UpstreamHub(upstream.url, upstream.token)
        self.ingest = Ingest(upstream, evidence=evidence)  # evidence: serve's --sign-key/--sbom/--provenance
        self._lock_checked = threading.Lock()
        self._checked: dict[tuple[str, str], float] = {}  # (repo id, branch) -> when its head was asked

    def describe(self) -> str:
        """serve's second start line: where a miss goes and what the door lets in."""
        u = self.upstream
        rules = [f"deny {', '.join(u.deny)}"] if u.deny else []
        rules += [f"allow only {', '.join(u.allow)}"] if u.allow else []
        rules += [] if u.allow_pickle else ["pickle formats refused"]
        fresh = f"a branch re-checked every {u.fresh:g} s" if u.fresh > 0 else "a branch never re-checked"
        token = "with --upstream-token-file's token" if u.token else "with no token"
        return (f"a proxy of {u.url} ({token}): what {self.sources[0].shown} lacks is fetched from it once; "
                f"{fresh}; {'; '.join(rules) or 'every repository let in'}")

    def attach_audit(self, audit: Audit) -> None:
        """Where each ingest's audit line goes (serve's --audit-log)."""
        self.ingest.audit = audit

    def close(self) -> None:
        self.hub.close()
        super().close()

    def resolve(self, repo_id: str, revision: str | None, *, reuse_for: float = 0, ref: bool = False,
                kind: str | None = None) -> Resolved:
        if ref or kind is not None:
            return super().resolve(repo_id, revision, reuse_for=reuse_for, ref=ref, kind=kind)
        revision = revision or "main"

        def local(named: str) -> Resolved:
            return Catalog.resolve(self, repo_id, named, reuse_for=reuse_for)

        try:
            found = local(revision)
        except RepoMoved:
            raise
        except (RepoNotFound, RevisionNotFound) as missing:
            return self._miss(repo_id, revision, missing, local)
        return self._fresh(repo_id, revision, found, local)

    # -- a miss -----------------------------------------------------------------------------
    def _miss(self, repo_id: str, revision: str, missing: OcibridgeError,
              local: Callable[[str], Resolved]) -> Resolved:
        parts = repo_parts(repo_id)
        if parts is None or DIGEST.fullmatch(revision) or not revision_named(revision) or is_reserved(revision):
            raise missing
        repo = self.sources[0].repository(parts)
        if repo is None or isinstance(missing, RevisionNotFound) and not is_proxied(repo):
            raise missing
        self._door_repo(repo_id, revision)
        info = self.hub.revision(repo_id, revision)
        named = self._let_in(repo, revision, info)
        self.forget(repo_id)
        return local(named)

    def _door_repo(self, repo_id: str, revision: str) -> None:
        rule = self.upstream.denied_by(repo_id)
        if rule is not None:
            message = f"{repo_id}: not fetched from the upstream: refused by {rule}"
            self.ingest.refused(repo_id, revision, message)
            raise UpstreamRefused(message, rule)

    def _let_in(self, repo: Repository, revision: str, info: UpstreamRevision) -> str:
        """The commit ``info`` names through the pickle rule, fetched (or found), and the
        revision's name tagged; what the revision is resolved as now (its name, or the commit)."""
        pickled = self.upstream.pickled(list(info.files))
        if pickled:
            shown = ", ".join(pickled[:5]) + (", ..." if len(pickled) > 5 else "")
            message = (f"{info.repo_id}@{info.commit}: not fetched from the upstream: {shown} "
                       "(pickle formats, which run code when loaded) refused unless --upstream-allow-pickle")
            self.ingest.refused(info.repo_id, revision, message)
            raise UpstreamRefused(message, "--upstream-allow-pickle")
        root = self.ingest.commit(repo, info.repo_id, info.commit, revision)
        tag = self._fetched_tag(repo, revision, info.commit)
        if tag is None:
            return info.commit
        from ocibridge.transfer.writer import write_artifact

        store = writable(repo)
        write_artifact(store, root, store.fetch_bytes(root), tags=[repo.reference(tag)])
        self._mark(info.repo_id, revision)
        return revision

    def _fetched_tag(self, repo: Repository, revision: str, commit: str) -> str | None:
        """The registry tag a fetched revision's name moves (main: the default tag); None for a
        commit id (whole or abbreviated) and for a ``refs/...`` name (resolved by commit)."""
        kind, name = split_revision(revision)
        if kind is not None or COMMIT.fullmatch(name) or commit.startswith(name):
            return None
        tag = registry_tag(read_record(repo), None, name, self.default_tag)
        return tag if tag is not None and is_tag(tag) and not is_reserved(tag) else None

    # -- a branch's head, re-checked ----------------------------------------------------------
    def _fresh(self, repo_id: str, revision: str, found: Resolved, local: Callable[[str], Resolved]) -> Resolved:
        """``found``, unless the revision is a name the upstream gave whose head was not asked for
        ``--upstream-fresh`` seconds and has moved there: then the new head, fetched."""
        fresh = self.upstream.fresh
        if fresh <= 0 or COMMIT.fullmatch(revision) or DIGEST.fullmatch(revision) \
                or found.commit == commit_of(found.top.digest) \
                or found.source is not self.sources[0]:  # a commit id; no commit of the upstream; not filled here
            return found
        key = (repo_id.lower(), revision)
        with self._lock_checked:
            last = self._checked.get(key)
            if last is not None and time.monotonic() - last < fresh:
                return found
        self._mark(repo_id, revision)
        try:
            info = self.hub.revision(repo_id, revision)
            if info.commit == found.commit:
                return found
            self._door_repo(repo_id, revision)
            self._let_in(found.repo, revision, info)
        except (UpstreamDown, UpstreamRefused, RepoNotFound, RevisionNotFound, NotFound) as e:
            log.warning("upstream: %s@%s: its head not re-checked, %s answered as last fetched: %s",
                        repo_id, revision, found.commit, e)
            return found
        self.forget(repo_id)
        return local(revision)

    def _mark(self, repo_id: str, revision: str) -> None:
        with self._lock_checked:
            if len(self._checked) > CHECKED:
                self._checked.clear()
            self._checked[(repo_id.lower(), revision)] = time.monotonic()

