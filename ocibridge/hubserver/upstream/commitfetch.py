"""One fetch per (repository, upstream commit): the commit downloaded from the upstream as a mirror
job downloads an ``hf://`` source (kinds/hf/commitdownload.py: the files listed, each fetched with
the project's streaming fetch into the Hub cache and checked against the listing's sha256 or git blob
id), read as ``push hf:ORG/NAME@COMMIT`` reads it, so the artifact is that push's with the commit's
``.gitattributes`` and what the upstream says of the commit (upstream/commitfacts.py); then written
to the registry, tagged in the order a reader relies on:

1. the artifact, copied, and tagged ``ocibridge-upstream-<upstream id>`` (the mapping: the
   upstream's id resolves from here on, and the registry's GC keeps the manifest), with the chunk
   table its manifest binds (push's, made as the files streamed in: upstream/tee.py) attached as
   its referrer, as push attaches it;
2. serve's own commit tag ``ocibridge-commit-<id>``, as every commit serve writes has;
3. the revision's registry tag (a branch's or tag's name), moved by the caller.

The push waits until no client is still reading the fetched files (a short quiet, bounded:
:meth:`.StreamedFetch.readers_done`): the fetch, ahead of its readers, would otherwise have the
registry hash and write the model beside the clients' own loads. Until it lands the fetch is still
the one every request for the commit joins (its files read from serve's Hub cache, checked).

Requests for the same missing commit that arrive while it is fetched join that one fetch
(single-flight within this serve), which runs in a thread of its own: its files can be read as they
arrive (upstream/streamed.py, upstream/tee.py), and which leaves them in serve's model cache
(upstream/fetchedfacts.py: the next load reads them there); each fetch is one audit line."""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.hubserver.quotas.ingests import IngestLimits
from ocibridge.hubserver.repo.reponames import hub_id, type_of
from ocibridge.hubserver.repo.sources import commit_of
from ocibridge.hubserver.repo.upstreamids import by_upstream_id
from ocibridge.hubserver.upstream.errors import UpstreamDown, UpstreamRefused
from ocibridge.hubserver.upstream.fetchbounds import FetchBounds, requesting_client
from ocibridge.hubserver.upstream.streamed import StreamedFetch
from ocibridge.oci.bookkeeping import commit_tag, upstream_tag

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.hubserver.repo.sources import Repository
    from ocibridge.hubserver.upstream.client import UpstreamHub
    from ocibridge.hubserver.upstream.settings import UpstreamSettings
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")
Audit = Callable[[dict[str, Any]], None]
#: commits whose fetch the file rules refused, remembered (past it, all are forgotten)
REMEMBERED = 4096


def writable(repo: Repository) -> WritableStore:
    """The registry repository a proxy writes what it fetched to."""
    from ocibridge.stores.base import WritableStore

    store = repo.store
    if not isinstance(store, WritableStore):
        raise OcibridgeError(f"{repo.shown}: not a store serve can write what the upstream gives to")
    return store


@dataclass
class Flight:
    """One commit's fetch in progress (its files readable as they arrive: ``fetch``), and what
    it ended with."""

    done: threading.Event
    thens: list[Callable[[Descriptor], object]] = field(default_factory=list)  # run once it landed
    commit: str = ""  # the upstream commit fetched
    names: set[str] = field(default_factory=set)  # the revisions (commit ids, branch names) it was begun for
    info: dict[str, Any] | None = None  # the upstream's model_info of the commit, as the door read it
    fetch: StreamedFetch | None = None
    result: Descriptor | None = None
    error: BaseException | None = None
    release: Callable[[], None] = lambda: None  # its place among the fetches under way (fetchbounds.py)

    def ended(self) -> Descriptor:
        """The landed manifest (waiting for it), or the fetch's error raised."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class Ingest:
    """Fetches commits from the upstream into the registry, each once at a time."""

    def __init__(self, settings: UpstreamSettings, hub: UpstreamHub, audit: Audit | None = None,
                 evidence: Evidence | None = None, limits: Callable[[], IngestLimits] | None = None):
        self.settings = settings
        self.hub = hub  # the proxy's one session with the upstream
        self.evidence = evidence  # serve's --sign-key, --sbom, --provenance: each fetched commit's too
        self.audit: Audit = audit or (lambda entry: None)
        self._lock = threading.Lock()
        self._flights: dict[tuple[str, str], Flight] = {}
        self._refused: dict[tuple[str, str], UpstreamRefused] = {}  # commits whose fetch the file rules refused
        self.fetches = 0  # commits fetched from the upstream (not counting those waited for)
        self.bounds = FetchBounds(settings.max_fetches, settings.max_fetches_per_client)
        none = IngestLimits(None)
        #: what a client may have fetched (the serve's --quotas and flags), asked at each fetch
        self.limits: Callable[[], IngestLimits] = limits or (lambda: none)

    def commit(self, repo: Repository, repo_id: str, commit: str, revision: str) -> Descriptor:
        """The manifest of the upstream's ``commit`` in ``repo``: found there, else fetched (or
        the fetch another request started waited for)."""
        return self.begin(repo, repo_id, commit, revision).ended()

    def in_flight(self, repo: Repository, revision: str) -> Flight | None:
        """The fetch under way of the commit ``revision`` names (a commit id, or a branch's name a
        fetch was begun for: the upstream was asked for it once), if one is."""
        with self._lock:
            found = self._flights.get((repo.shown, revision))
            return found or next((f for (shown, _), f in self._flights.items()
                                  if shown == repo.shown and revision in f.names), None)

    def fetching(self, repo: Repository) -> bool:
        """Whether a commit of ``repo`` is being fetched (the repository came from the upstream,
        though no commit of it landed yet)."""
        with self._lock:
            return any(shown == repo.shown for shown, _ in self._flights)

    def begin(self, repo: Repository, repo_id: str, commit: str, revision: str,
              then: Callable[[Descriptor], object] | None = None, info: dict[str, Any] | None = None) -> Flight:
        """The fetch of ``commit``: found done in the registry, joined, or started in a thread of
        its own (``then``: what each asker does once it landed, its revision's tag moved; run by
        the fetch's thread, or here when the commit is found landed; ``info``: its model_info,
        as the door read it)."""
        try:
            found = Flight(threading.Event(), commit=commit, result=by_upstream_id(repo, commit))
            found.done.set()
            if then is not None:
                assert found.result is not None
                then(found.result)
            return found
        except NotFound:
            pass
        key = (repo.shown, commit)
        with self._lock:
            if key in self._refused:  # its files were refused: not fetched again
                raise UpstreamRefused(str(self._refused[key]), self._refused[key].rule)
            flight = self._flights.get(key)
            if flight is not None:
                flight.thens += [then] if then is not None else []
                flight.names.add(revision)
                return flight
            release = self.bounds.admit(requesting_client(), f"{repo_id}@{commit}")  # FetchesBusy: over a bound
            try:  # the client's hourly ingests and the ingest namespace's quota (quotas/ingests.py)
                admitted = self.limits().admit(requesting_client(), repo_id, f"{repo_id}@{commit}")
            except BaseException:
                release()
                raise
            flight = self._flights[key] = Flight(threading.Event(), [then] if then is not None else [], commit,
                                                 {revision}, info)
            flight.release = release
            # made before the thread starts: a read that joins at once finds the files to follow
            # (a flight without it yet would have its readers wait for the whole commit)
            flight.fetch = self._streamed(repo_id, commit, info)
            flight.fetch.sized = admitted.listed  # its size decided on the listing, before a file is asked
        threading.Thread(target=self._lead, args=(key, flight, repo, repo_id, commit, revision),
                         name=f"upstream-{repo_id}", daemon=True).start()
        return flight

    def _streamed(self, repo_id: str, commit: str, info: dict[str, Any] | None) -> StreamedFetch:
        """The download of ``commit``'s files, readable as they arrive."""
        from ocibridge.hubserver.upstream.pickles import FilesDoor
        from ocibridge.hubserver.upstream.scanned import CommitScan
        from ocibridge.kinds.hf.commitdownload import HubSource
        from ocibridge.kinds.hf.hubcache import hub_cache

        settings = self.settings
        # the key's type picks the upstream's routes (a dataset's: /api/datasets/, /datasets/.../resolve/)
        source = HubSource(hub_id(repo_id), settings.url, settings.token, None, repo_type=type_of(repo_id))
        return StreamedFetch(source, commit, settings.concurrency, settings.hub_cache or hub_cache(), self.hub,
                             settings.chunks, info, FilesDoor(settings),
                             CommitScan(repo_id, commit, settings.scan) if settings.scan else None)

    def _lead(self, key: tuple[str, str], flight: Flight, repo: Repository, repo_id: str, commit: str,
              revision: str) -> None:
        try:
            flight.result = self._fetch(flight, repo, repo_id, commit, revision)
            while True:  # each asker's follow-up, those that joined meanwhile too
                with self._lock:
                    thens, flight.thens = flight.thens, []
                    if not thens:
                        del self._flights[key]
                        break
                for then in thens:
                    then(flight.result)
            self._tidy(repo.shown, repo_id)  # the last of the repository's fetches empties the Hub cache
        except BaseException as e:
            flight.error = e
            with self._lock:
                self._flights.pop(key, None)
            if refused_at_the_door(e):  # no later fetch resumes what the door refused: none kept
                self._tidy(repo.shown, repo_id)
        finally:
            flight.release()  # its place among the fetches under way
            flight.done.set()

    def _fetch(self, flight: Flight, repo: Repository, repo_id: str, commit: str, revision: str) -> Descriptor:
        from ocibridge.model.deliver import attach_bound_table
        from ocibridge.transfer.copy import copy
        from ocibridge.transfer.writer import write_artifact

        settings = self.settings
        started = time.monotonic()
        line: dict[str, Any] = {"action": "upstream_ingest", "repository": repo_id, "revision": revision,
                                "commit": commit, "upstream": settings.url}
        try:
            assert flight.fetch is not None
            artifact, reference = flight.fetch()
            flight.fetch.readers_done()  # the clients answered first: the push after, not beside them
            self._keep(flight.fetch)
            store = writable(repo)
            mapping = repo.reference(upstream_tag(commit))
            # the manifest by digest, the chunk table it binds and its evidence, then its tags
            # (landing.py's order): a reader that resolves the commit finds the table kept
            stats = copy(artifact, reference, store, None, concurrency=settings.concurrency)
            root = stats.root
            assert root is not None
            attach_bound_table(artifact, store)  # as push keeps it: a referrer holding the table blob
            self._attach_scan(flight.fetch, store, root)
            if self.evidence is not None and self.evidence.wanted:
                from ocibridge.hubserver.repo.commits import AUTHOR, SUMMARY
                from ocibridge.hubserver.repo.evidence import attach

                said = {SUMMARY: f"fetched from the upstream {settings.url}: {repo_id}@{commit}",
                        AUTHOR: f"upstream {settings.url}"}
                attach(store, root, mapping, said, self.evidence)
            tags = [mapping, repo.reference(commit_tag(commit_of(root.digest)))]
            write_artifact(store, root, store.fetch_bytes(root), tags=tags)
        except UpstreamRefused as e:  # a file the door's rules refuse, in the listing or by its content
            self._record(line, "refused", 403, reason=str(e))
            with self._lock:
                if len(self._refused) > REMEMBERED:
                    self._refused.clear()
                if e.lasting:
                    self._refused[(repo.shown, commit)] = e
            log.warning("upstream: %s", e)
            raise
        except OcibridgeError as e:
            self._record(line, "failed", 503, reason=str(e))
            raise UpstreamDown(f"{repo_id}@{commit}: fetching it from the upstream failed: {e}") from None
        self.fetches += 1
        self.limits().landed(repo_id)
        self._record(line, "landed", 200, digest=root.digest, bytes_received=flight.fetch.bytes_received,
                     seconds=round(time.monotonic() - started, 3))
        log.info("upstream: %s@%s fetched from %s as %s", repo_id, commit, settings.url, root.digest)
        return root

    def _attach_scan(self, fetch: StreamedFetch, store: WritableStore, root: Descriptor) -> None:
        """The clean commit's scan report on its manifest, before any tag names it: signed with
        serve's key where it signs evidence, else attached plain."""
        report = None if fetch.scan is None else fetch.scan.report(root.digest)
        if report is None:
            return
        from ocibridge.scanning.stored import attach_report

        evidence = self.evidence
        key = None if evidence is None else evidence.attest_key or evidence.sign_key
        identity = "" if evidence is None else evidence.identity or ""
        attach_report(store, root, report, key, identity)

    def _keep(self, fetch: StreamedFetch) -> None:
        """The checked files linked into serve's model cache (upstream/fetchedfacts.py), before the
        commit lands: its first read from the registry is a warm one. Only from serve's own Hub
        cache (emptied after), never the operator's."""
        if self.settings.hub_cache is None:
            return
        from ocibridge.cache.modelcache import ModelCache
        from ocibridge.hubserver.upstream.fetchedfacts import into_model_cache

        into_model_cache(ModelCache(), fetch.files)

    def _tidy(self, shown: str, repo_id: str) -> None:
        """Once the registry holds a commit, serve's own Hub cache keeps nothing of the
        repository (a model is on disk once, in the registry): its folder goes, with the shared
        Xet entries its files link to, unless another fetch of it is under way (that one's end tidies;
        held under the lock: no fetch of it starts meanwhile). Called once a fetch ended and left the
        fetches under way. The operator's own Hub cache is left as it is."""
        cache = self.settings.hub_cache
        if cache is None:
            return
        import os
        import shutil

        from ocibridge.kinds.hf.hubcache import repo_folder

        folder = repo_folder(hub_id(repo_id), cache, type_of(repo_id))
        with self._lock:
            if any(other == shown for other, _ in self._flights):
                return
            blobs = folder / "blobs"
            for entry in blobs.iterdir() if blobs.is_dir() else ():
                if entry.is_symlink():  # huggingface_hub 2.x: a Xet file, in the cache-wide store
                    target = os.path.realpath(entry)
                    if target.startswith(os.path.realpath(cache) + os.sep):
                        with contextlib.suppress(OSError):
                            os.unlink(target)
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(cache / ".locks" / folder.name, ignore_errors=True)

    def refused(self, repo_id: str, revision: str, reason: str) -> None:
        """The audit line of a repository or file the door kept out."""
        self._record({"action": "upstream_ingest", "repository": repo_id, "revision": revision,
                      "upstream": self.settings.url}, "refused", 403, reason=reason)

    def _record(self, line: dict[str, Any], outcome: str, status: int, **facts: Any) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        self.audit({"time": now, **line, "outcome": outcome, "status": status, "token": None, **facts})


def refused_at_the_door(error: BaseException) -> bool:
    """Whether a fetch ended because a rule refused what it brought (a pickle, a flagged scan),
    rather than because the upstream or the network failed (whose partial files a retry resumes)."""
    seen: BaseException | None = error
    for _ in range(8):  # the refusal, or what a download thread wrapped it in
        if seen is None:
            return False
        if isinstance(seen, UpstreamRefused):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
