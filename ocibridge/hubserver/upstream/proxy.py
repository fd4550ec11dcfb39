"""The upstream of a proxy (``serve REG/PREFIX --upstream URL``), the source the catalog holds
behind its sources (:class:`.repo.arriving.Upstream`): a read whose repository or revision the
registry lacks is resolved at the upstream, let in or refused at the door, fetched
once (:mod:`.commitfetch`) and answered from the registry; a read of a branch the upstream gave is
re-checked against the upstream's head at most every ``--upstream-fresh`` seconds.

The rules, in the order a miss meets them:

1. a repository made here (no commit of it came from the upstream) never takes the upstream's
   commits: only a repository no source holds, or one the upstream filled (or whose record a
   proxy wrote before its first commit landed: :mod:`.keptaccess`), is asked for;
2. ``--upstream-deny``/``--upstream-allow``: decided on the repository's key (a model's ``ORG/NAME``,
   a dataset's ``datasets/ORG/NAME``: settings.py), before the upstream is asked;
3. the upstream resolves the revision (model_info, a dataset's dataset_info: its commit, its
   files): nothing else is asked before the pickle rule has read the file names;
4. on that metadata (door.py): a repository gated or private at the upstream is refused unless
   ``--upstream-allow-gated``/``--upstream-allow-private`` names it; ``--upstream-license`` (the
   card must name an allowed license); ``--upstream-refuse-files`` globs; pickle formats
   (door.PICKLE) unless ``--upstream-allow-pickle`` (decided again on the listing the fetch
   downloads, and on each file's content as it arrives: pickles.py);
5. one let in gated or private: the request's reader must be one serve's own grants would let
   have it were it so here already (``readers``, :class:`.repo.arriving.ReaderRule`: the Gate's),
   else nothing is fetched and it is answered as a repository that is not there (private) or the
   gate's 401/403 (gated); then the refs record says private or gated (:mod:`.keptaccess`) before
   anything of it lands, so every later request is decided here as for one made so here;
6. the commit fetched (or found fetched: its upstream tag), the revision's name tagged; a read
   route that meets the fetch under way is handed it as :class:`.inflight.InFlight`
   (the catalog's one ``resolve``, asked with ``arriving``): its files streamed as they arrive, its metadata asked
   of the upstream by requests the proxy builds (upstream/session.py), never a client's path;
   every other read waits for the commit to land.

A repository fetched here that the upstream takes back (deleted, made private or gated) is
refused here too at the next check, by branch or by commit id, unless an allow flag keeps it
(``_judged``, revocation.py); an upstream ref named as one of serve's own tags (``latest``) is never
tagged (refguard.py).

Only the writer fetches (``fetches_here``, a constructor argument, as the reader rule and the
door's rules are: the serve's, api/serve.py): on a ``--writer`` reader, or a standby while
another serve holds the writer lease, a miss that would ask the upstream is
:class:`.errors.FetchedElsewhere` (the read forwarded to the writer, which fetches once for every
replica), and a branch is not re-checked there (the writer's re-check moves its tag).

A write's resolution (``ref``, ``kind``) is never proxied: it resolves the registry as it is."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.hubserver.lifetimes.notes import Noting, NotNoted
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.refnames import registry_tag, split_revision
from ocibridge.hubserver.repo.refrules import is_tag
from ocibridge.hubserver.repo.refsrecord import RefsRecord, read_record
from ocibridge.hubserver.repo.sources import (
    COMMIT,
    DIGEST,
    SHORT_COMMIT,
    RepoMoved,
    RepoNotFound,
    Repository,
    RevisionNotFound,
    commit_of,
    repo_parts,
    revision_named,
)
from ocibridge.hubserver.repo.upstreamids import is_proxied
from ocibridge.hubserver.upstream.client import UpstreamHub, UpstreamRevision, not_found
from ocibridge.hubserver.upstream.commitfetch import Ingest, writable
from ocibridge.hubserver.upstream.errors import FetchedElsewhere, UpstreamDown, UpstreamRefused
from ocibridge.hubserver.upstream.inflight import InFlight, landed
from ocibridge.hubserver.upstream.keptaccess import keep_access
from ocibridge.hubserver.upstream.refguard import onto_serves_tag, skipped
from ocibridge.hubserver.upstream.revocation import PRIVATE, REFUSED, Revocations, TakenBack, gated
from ocibridge.hubserver.upstream.session import UpstreamSession
from ocibridge.hubserver.upstream.staleness import note_stale
from ocibridge.oci.bookkeeping import is_reserved

if TYPE_CHECKING:
    from ocibridge.hubserver.quotas.ingests import IngestLimits
    from ocibridge.hubserver.repo.arriving import Here, ReaderRule
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.hubserver.upstream.commitfetch import Audit
    from ocibridge.hubserver.upstream.settings import UpstreamSettings
    from ocibridge.oci.models import Descriptor

log = logging.getLogger("ocibridge.hubserver")
#: branch heads whose last check is remembered (past it, all are forgotten: each is checked once more)
CHECKED = 4096


class UpstreamSource:
    """An upstream Hub behind the catalog (``here``) whose first source, a registry, it fills:
    the door's rules (``settings``), the request's reader (``readers``: serve's grants), whether
    this serve fetches (``fetches_here``: the writer) and what a client may have it fetch
    (``limits``) given at construction."""

    def __init__(self, settings: UpstreamSettings, here: Here, *, readers: ReaderRule,
                 fetches_here: Callable[[], bool], audit: Audit, limits: Callable[[], IngestLimits] | None = None,
                 evidence: Evidence | None = None, notes: Noting | None = None):
        self.settings, self.here = settings, here
        #: every request to the upstream; what it says of a revision kept --upstream-fresh seconds
        self.hub = UpstreamHub(UpstreamSession(settings.url, settings.token), settings.fresh, settings.asks_per_client)
        self.readers, self.fetches_here = readers, fetches_here
        # evidence: serve's --sign-key/--sbom/--provenance
        self.ingest = Ingest(settings, self.hub, audit=audit, evidence=evidence, limits=limits)
        self._lock_checked = threading.Lock()
        self._recording = threading.Lock()  # the refs record's branches, written as names are fetched
        self._checked: dict[tuple[str, str], float] = {}  # (repo id, branch) -> when its head was asked
        self._stale: dict[tuple[str, str], str] = {}  # (repo id, branch) -> why its last check failed
        self.revocations = Revocations(settings.url)  # what the upstream took back since it was fetched
        self.notes: Noting = notes or NotNoted()  # each read of a fetched commit, for --upstream-keep (lifetimes/)

    def describe(self) -> str:
        """serve's second start line: where a miss goes and what the door lets in."""
        return self.settings.describe(self.here.sources[0].shown)

    def close(self) -> None:
        self.hub.session.close()

    def taken_back(self, repo_id: str) -> Exception | None:
        return self.revocations.refusal(repo_id)  # (revocation.py)

    def resolve(self, repo_id: str, revision: str, reuse_for: float, *, arriving: bool) -> Resolved | InFlight:
        """The revision from the registry, fetched first when it lacks it (``arriving``: a fetch
        under way handed out as it arrives, not waited for); a branch's head re-checked."""
        def local(named: str) -> Resolved:
            return self.here.resolve_here(repo_id, named, reuse_for=reuse_for)

        try:
            found = local(revision)
        except RepoMoved:
            raise
        except (RepoNotFound, RevisionNotFound) as missing:
            got = self._miss(repo_id, revision, missing, local, arriving)
        else:
            got = self._checked_again(repo_id, revision, found, local)
        if isinstance(got, Resolved):
            self.notes.read(got)
        return got

    def _checked_again(self, repo_id: str, revision: str, found: Resolved,
                       local: Callable[[str], Resolved]) -> Resolved:
        """``found``, a commit this serve fetched, as the upstream says it is now (``_fresh``, revocation.py)."""
        if not self._filled_here(found):
            return found
        if COMMIT.fullmatch(revision) or DIGEST.fullmatch(revision):
            self._recheck_repository(repo_id, found)  # not a name _fresh re-checks: asked as often
        answered = self._fresh(repo_id, revision, found, local)
        taken = self.revocations.refusal(repo_id)  # what the upstream took back (revocation.py)
        if taken is not None:
            raise taken
        return answered

    # -- a miss -----------------------------------------------------------------------------
    def _miss(self, repo_id: str, revision: str, missing: OcibridgeError,
              local: Callable[[str], Resolved], arriving: bool) -> Resolved | InFlight:
        parts = repo_parts(repo_id)
        repo = None if parts is None else self.here.sources[0].repository(parts)
        if parts is None or DIGEST.fullmatch(revision) or not revision_named(revision) or is_reserved(revision):
            if repo is not None and isinstance(missing, RepoNotFound) and self.ingest.fetching(repo):
                raise RevisionNotFound(f"{repo_id}: no revision {revision}")  # it is here for this reader
            raise missing
        if repo is None or isinstance(missing, RevisionNotFound) and not (
                self.ingest.fetching(repo) or is_proxied(repo) or self.here.states.of(repo_id).upstream):
            raise missing
        self._door_repo(repo_id, revision)
        if not self.fetches_here():
            raise FetchedElsewhere(f"{repo_id}@{revision}: not here yet; the writer fetches it from the upstream")
        joined = self.ingest.in_flight(repo, revision)
        if joined is not None:  # a commit id or a branch whose fetch is under way: its door was passed
            state = self.here.states.of(repo_id)  # (recorded private or gated before it began)
            self._reader_may(repo_id, state.private, state.gated)
            if arriving:
                return InFlight(joined, repo_id, joined.commit, self.hub)
            landed(joined)
            self.here.forget(repo_id, record=False)  # the commit landed; its refs record is as it was
            return local(revision)
        try:
            info = self.hub.revision(repo_id, revision, miss=True)
        except RevisionNotFound:
            self._unseen_if_private(repo_id)
            raise
        named = self._let_in(repo, revision, info, arriving=arriving)
        if isinstance(named, InFlight):
            return named
        self.here.forget(repo_id, record=False)
        return local(named)

    def _unseen_if_private(self, repo_id: str) -> None:
        """Not found (the repository) where the upstream keeps it private from this reader: its "no
        revision", said to serve's token, would tell any reader that the repository exists."""
        try:
            info = self.hub.revision(repo_id, "main")
        except (RepoNotFound, RevisionNotFound):  # no main to ask it by: not known, so not told
            raise not_found(repo_id, self.settings.url) from None
        kept = not self.settings.keeps_private(repo_id) or self._kept_from_reader(repo_id, True, "") is not None
        if info.private and kept:
            raise not_found(repo_id, self.settings.url)

    def _door_repo(self, repo_id: str, revision: str) -> None:
        rule = self.settings.denied_by(repo_id)
        if rule is not None:
            message = f"{repo_id}: not fetched from the upstream: refused by {rule}"
            self.ingest.refused(repo_id, revision, message)
            raise UpstreamRefused(message, rule)

    def _let_in(self, repo: Repository, revision: str, info: UpstreamRevision, *,
                arriving: bool = False) -> str | InFlight:
        """The commit ``info`` names through the pickle rule, fetched (or found), and the
        revision's name tagged; what the revision is resolved as now (its name, or the commit).
        ``arriving``: a fetch under way is handed out as :class:`InFlight` (its files read as they
        arrive), not waited for; its starter's thread tags the revision once the commit landed."""
        self.revocations.asked(info.repo_id)  # the upstream just gave it: asked of it now (revocation.py)
        self._door_revision(revision, info)
        self.revocations.given(info.repo_id)  # ... and the door lets it in: not taken back (any more)
        self._reader_may(info.repo_id, info.private, info.gated)
        self._keep_access(repo, info)
        # the refs record read once (kept a few seconds: states.py) and handed along
        named = self._fetched_tag(self.here.states.of(info.repo_id), revision, info.commit) is not None
        if named:
            self._mark(info.repo_id, revision)  # its head asked now: re-checked --upstream-fresh from now
        flight = self.ingest.begin(repo, info.repo_id, info.commit, revision, info=info.said,
                                   then=lambda root: self._named(repo, revision, info, root))
        if arriving and not flight.done.is_set():
            return InFlight(flight, info.repo_id, info.commit, self.hub)
        landed(flight)  # its follow-ups ran: the revision's name tagged
        return revision if named else info.commit

    def _named(self, repo: Repository, revision: str, info: UpstreamRevision, root: Descriptor) -> bool:
        """The revision's name tagged on the landed commit ``root`` (False: a commit id, no name)."""
        self.here.forget(info.repo_id, record=False)  # what was resolved of the repository before it landed
        record = self.here.states.of(info.repo_id)
        tag = self._fetched_tag(record, revision, info.commit)
        if tag is None:
            if self._onto_serves_tag(record, revision):
                skipped(info.repo_id, revision, info.commit, self.here.default_tag)
            return False
        from ocibridge.transfer.writer import write_artifact

        store = writable(repo)
        self._record_branch(repo, revision, info.repo_id, record)
        write_artifact(store, root, store.fetch_bytes(root), tags=[repo.reference(tag)])
        self.notes.named(repo, tag, info.commit)
        self.here.forget(info.repo_id, record=False)
        return True

    def _door_revision(self, revision: str, info: UpstreamRevision) -> None:
        """The rules decided on model_info's metadata (door.py), in order: gated or private at the
        upstream, the card's license, the refused files; the first that refuses is the Hub's 403
        (a private one: not found, its existence not told)."""
        refused = self._metadata_refuses(info)
        if refused is not None:
            reason, rule = refused
            message = f"{info.repo_id}@{info.commit}: not fetched from the upstream: {reason}"
            self.ingest.refused(info.repo_id, revision, message)
            if info.private:  # its existence is the upstream's secret: not found here (the audit says why)
                raise not_found(info.repo_id, self.settings.url)
            raise UpstreamRefused(message, rule)

    def _reader_may(self, repo_id: str, private: bool, gated: str) -> None:
        refused = self._kept_from_reader(repo_id, private, gated)
        if refused is not None:
            raise refused

    def _kept_from_reader(self, repo_id: str, private: bool, gated: str) -> Exception | None:
        """What the request's reader is answered for a repository private or gated here (or
        about to be), None when it may have it: a private one it may not read is not found, in
        the very words of one the upstream lacks; a gate it is not on the list of, the Hub's
        GatedRepo 401/403."""
        if not (private or gated):
            return None
        refused = self.readers(repo_id, private=private, gated=gated)
        if refused is None:
            return None
        return not_found(repo_id, self.settings.url) if private else refused

    def _keep_access(self, repo: Repository, info: UpstreamRevision) -> None:
        """The upstream's private or gated recorded here (before anything of the repository is
        written), and what this serve knew of its state forgotten: every request after is decided
        by serve's own grants, as for a repository made so here."""
        if (info.private or info.gated) and keep_access(repo, info.private, info.gated):
            self.here.forget(info.repo_id)

    def _metadata_refuses(self, info: UpstreamRevision) -> tuple[str, str] | None:
        u = self.settings
        if info.private and not u.keeps_private(info.repo_id):
            flag = "--upstream-allow-private"
            return f"it is private at the upstream, and {flag} does not name it", flag
        if info.gated and not u.keeps_gated(info.repo_id):
            flag = "--upstream-allow-gated"
            return f"it is gated ({info.gated}) at the upstream, and {flag} does not name it", flag
        why = self.settings.license_refused(info.card)
        if why is not None:
            return why, "--upstream-license"
        files = self.settings.files_refused(list(info.files))
        if files is not None:
            paths, rule = files
            shown = ", ".join(paths[:5]) + (", ..." if len(paths) > 5 else "")
            why = "(pickle formats, which run code when loaded) refused unless --upstream-allow-pickle" \
                if rule == "--upstream-allow-pickle" else f"refused by {rule}"
            return f"{shown} {why}", rule
        return None

    def _record_branch(self, repo: Repository, name: str, repo_id: str, record: RefsRecord) -> None:
        """A name new here (in ``record``, as the request read it) that is a branch at the upstream
        is recorded a branch (refs record), before its tag is written (create_branch's order), so
        list_repo_refs lists it as one."""
        if name == "main" or name in record.branches or name in record.tags \
                or not self.hub.is_branch(repo_id, name):
            return
        from ocibridge.hubserver.repo.refsrecord import write_record

        with self._recording:  # read again under the lock: two names fetched at once both stay branches
            record = read_record(repo)
            if name not in record.branches and name not in record.tags:
                write_record(repo, writable(repo), record.with_ref(name, branch=True))
                self.here.states.forget(repo_id)

    def _fetched_tag(self, record: RefsRecord, revision: str, commit: str) -> str | None:
        """The registry tag a fetched revision's name moves (main: the default tag); None for a
        commit id (whole or abbreviated: 7 hex digits or more, as serve resolves one; a branch ``b1``
        of a commit ``b1…`` is a name) and for a ``refs/...`` name (resolved by commit)."""
        kind, name = split_revision(revision)
        if kind is not None or COMMIT.fullmatch(name) or (SHORT_COMMIT.fullmatch(name) and commit.startswith(name)):
            return None
        default = self.here.default_tag
        tag = registry_tag(record, None, name, default)
        return tag if tag is not None and is_tag(tag) and not onto_serves_tag(name, tag, default) else None

    def _onto_serves_tag(self, record: RefsRecord, revision: str) -> bool:
        """Whether the name ``revision`` would be tagged on one of serve's own tags (refguard.py)."""
        kind, name = split_revision(revision)
        if kind is not None or COMMIT.fullmatch(name):
            return False
        tag = registry_tag(record, None, name, self.here.default_tag)
        return tag is not None and onto_serves_tag(name, tag, self.here.default_tag)

    # -- a branch's head, re-checked ----------------------------------------------------------
    def _filled_here(self, found: Resolved) -> bool:
        """Whether ``found`` is an upstream commit this serve fetched and re-checks (``--upstream-fresh``
        set; a commit the upstream gave, in the registry it fills; the writer)."""
        return self.settings.fresh > 0 and found.commit != commit_of(found.top.digest) \
            and found.source is self.here.sources[0] and self.fetches_here()

    def _recheck_repository(self, repo_id: str, found: Resolved) -> None:
        """A read by commit id: the upstream asked whether it still gives the repository (the
        commit's model_info), when it was not asked of it for ``--upstream-fresh`` seconds."""
        if not self.revocations.due(repo_id, self.settings.fresh):
            return
        try:
            info: UpstreamRevision | None = self.hub.revision(repo_id, found.commit, again=True)
        except RevisionNotFound:  # the repository is there, the commit no longer: still given
            self.revocations.given(repo_id)
            return
        except RepoNotFound:
            info = None
        except UpstreamDown as e:
            log.warning("upstream: %s: not re-checked (%s answered as fetched): %s", repo_id, found.commit, e)
            return
        kept_out = self._judged(found.repo, repo_id, info)
        if kept_out is not None:
            raise kept_out

    def _judged(self, repo: Repository, repo_id: str, info: UpstreamRevision | None) -> Exception | None:
        """What the upstream's answer about a repository fetched here (``info``; None: it refused
        serve's token) makes of it now: taken back unless an allow flag keeps it (revocation.py),
        else kept private or gated here as the upstream says. None: this reader may have it; else
        this reader's answer."""
        u = self.settings
        if info is None and not u.keeps_private(repo_id):
            return self._take_back(repo_id, REFUSED)
        if info is not None and info.private and not u.keeps_private(repo_id):
            return self._take_back(repo_id, PRIVATE)
        if info is not None and info.gated and not u.keeps_gated(repo_id):
            return self._take_back(repo_id, gated(info.gated))
        self.revocations.given(repo_id)
        private, gate = (True, "") if info is None else (info.private, info.gated)
        if not ((private or gate) and keep_access(repo, private, gate)):
            return None  # as it was here: this request's route decided its reader by the record already
        self.here.forget(repo_id)  # made so just now: this request's reader decided here, the next by its route
        return self._kept_from_reader(repo_id, private, gate)

    def _take_back(self, repo_id: str, why: TakenBack) -> Exception:
        """The repository taken back (revocation.py), and what the upstream said of it before forgotten."""
        self.hub.revisions.forget(repo_id)
        return self.revocations.take_back(repo_id, why)

    def _fresh(self, repo_id: str, revision: str, found: Resolved, local: Callable[[str], Resolved]) -> Resolved:
        """``found``, unless the revision is a name the upstream gave whose head was not asked for
        ``--upstream-fresh`` seconds and has moved there: then the new head, fetched; a repository
        the upstream took back since, refused (revocation.py)."""
        fresh = self.settings.fresh
        if COMMIT.fullmatch(revision) or DIGEST.fullmatch(revision) \
                or self._onto_serves_tag(self.here.states.of(repo_id), revision):  # a name of serve's own (refguard.py)
            return found
        key = (repo_id.lower(), revision)
        with self._lock_checked:
            last = self._checked.get(key)
            stale = self._stale.get(key)
            if last is not None and time.monotonic() - last < fresh:
                if stale is not None:  # its last check failed: still answered stale
                    note_stale(stale)
                return found
        self._mark(repo_id, revision)
        self.revocations.asked(repo_id)
        kept_out: Exception | None = None
        try:
            try:
                info: UpstreamRevision | None = self.hub.revision(repo_id, revision, again=True)
            except RepoNotFound:  # the upstream refuses serve's token: deleted, or private to others
                info = None
            kept_out = self._judged(found.repo, repo_id, info)  # taken back, or kept private or gated
            if kept_out is None and (info is None or info.commit == found.commit):
                self._stale.pop(key, None)
                return found
            if kept_out is None:
                assert info is not None
                self._door_repo(repo_id, revision)
                self._let_in(found.repo, revision, info)
        except UpstreamDown as e:
            log.warning("upstream: %s@%s: its head not re-checked, %s answered as last fetched: %s",
                        repo_id, revision, found.commit, e)
            why = f"{repo_id}@{revision} answered as last fetched ({found.commit}): the upstream did not answer"
            with self._lock_checked:
                self._stale[key] = why
            note_stale(why)
            return found
        except (UpstreamRefused, RepoNotFound, RevisionNotFound, NotFound) as e:
            log.warning("upstream: %s@%s: its head not re-checked, %s answered as last fetched: %s",
                        repo_id, revision, found.commit, e)
            return found
        if kept_out is not None:  # outside the try: it is this request's answer, not a failed re-check
            raise kept_out
        self._stale.pop(key, None)
        self.here.forget(repo_id, record=False)
        return local(revision)

    def _mark(self, repo_id: str, revision: str) -> None:
        with self._lock_checked:
            if len(self._checked) > CHECKED:
                self._checked.clear()
                self._stale.clear()
            self._checked[(repo_id.lower(), revision)] = time.monotonic()

