"""A commit's files fetched from the upstream, each teed (:mod:`.tee`) so that the clients that
asked for a file read it as it arrives; each checked against the listing's sha256 or git blob id,
then the snapshot read as ``push hf:ORG/NAME@COMMIT`` reads it (kinds/hf/commitdownload.py's listing
and reading: the same layers), ``.gitattributes`` kept and what the upstream says of the commit
annotated (:mod:`.commitfacts`), each file's SHA-256 the one the tee made as it wrote it
(upstream/fetchedfacts.py: no file is hashed twice), each whole file scanned by its content before its
last byte reaches a reader (``--upstream-scan``: upstream/scanned.py), and each file push would give a chunk table (the
fetch's :class:`ChunkPolicy`, push's defaults) its chunk digests made in that same pass: the
artifact binds the table ``push`` binds, with no file read again for it.

A file comes over Xet where the upstream offers it (the listing names its ``xetHash``:
:mod:`.xetfetch`), else, or where the upstream grants no Xet read, by its ``resolve`` route with
the project's own streaming fetch (LFS, or a file in git: :class:`.resolveget.ResolveGet`).
``HF_HUB_DISABLE_XET`` (huggingface_hub's switch) keeps every file on ``resolve``.

The files land in serve's own Hub cache as a snapshot (``snapshots/<commit>/<path>``) once checked;
until then in ``ocibridge-partial/`` beside it, kept when the fetch is cut: the next fetch resumes
each file from what it holds (a ``Range`` request; over Xet, from the chunk it lacks), so a cut
costs the bytes after the cut."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.core.keyedlocks import KeyedLocks
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.fileget import FileGet, XetUnavailable
from ocibridge.hubserver.upstream.resolveget import ResolveGet
from ocibridge.hubserver.upstream.tee import FileCut, FileFlight

if TYPE_CHECKING:
    from ocibridge.chunks.chunking import ChunkPolicy
    from ocibridge.hubserver.upstream.client import UpstreamHub
    from ocibridge.hubserver.upstream.pickles import FilesDoor
    from ocibridge.hubserver.upstream.scanned import CommitScan
    from ocibridge.hubserver.upstream.tee import TeeFile
    from ocibridge.hubserver.upstream.xetfetch import XetGet
    from ocibridge.kinds.hf.commitdownload import HubSource
    from ocibridge.model.builder import PlannedArtifact

log = logging.getLogger("ocibridge.hubserver")
#: the folder of a repository's Hub cache folder where files in flight are written
PARTIAL = "ocibridge-partial"


#: seconds no file of a fetched commit must have been read before its push to the registry begins
#: (a client between two of its requests is not yet done) ...
READERS_GRACE = 0.3
#: ... waited for at most: a reader slower than that (or one that never ends) does not hold the
#: commit back longer
READERS_MOST = 30.0


#: one writer a partial file in this process: two commits fetched at once that share a file (the
#: same bytes at the same path) name one partial file, and two writers appending to it would mix
#: their bytes (the check then refuses both). The second waits; the first's was moved into its own
#: snapshot, so the second fetches it whole (correct, not yet shared across commits)
PARTIALS: KeyedLocks[Path] = KeyedLocks()


class StreamedFetch:
    """One commit's fetch whose files can be read while they arrive (:attr:`files`, once :attr:`listed`)."""

    def __init__(self, src: HubSource, commit: str, workers: int, cache: Path, hub: UpstreamHub,
                 chunking: ChunkPolicy | None = None, info: dict[str, Any] | None = None,
                 door: FilesDoor | None = None, scan: CommitScan | None = None):
        from ocibridge.kinds.hf.commitdownload import CommitDownload

        self.src, self.commit, self.workers, self.cache = src, commit, workers, cache
        self.hub = hub  # the proxy's one session with the upstream: every request of the fetch
        self.info = info  # the commit's model_info, as the door read it (commitfacts.py reads it too)
        self.chunking = chunking  # which files the artifact binds a chunk table of (None: none)
        self.door = door  # the file rules, on the very listing fetched (None: every file let in)
        self.scan = scan  # each whole file's content scan (None: --upstream-scan off)
        # .gitattributes kept: the Hub lists it as a file of the commit (push hf: leaves it out)
        self.download = CommitDownload(src, commit, workers, cache, gitattributes=True, http=hub.session.http)
        self.files: dict[str, FileFlight] = {}
        self.listed = threading.Event()  # set once :attr:`files` is filled (or the listing failed)
        self.bytes_received = 0  # from the upstream, this fetch (a resumed file: the rest only)
        self._count = threading.Lock()
        self.resolve = ResolveGet(src, commit, hub.session)
        self.xet: XetGet | None = None  # made with the listing, when it names a file's Xet hash
        self.sized: Callable[[list[int]], None] | None = None  # the listing's sizes, checked (quotas/ingests.py)

    def __call__(self) -> tuple[PlannedArtifact, str]:
        """The artifact of the commit, every file fetched and checked."""
        from ocibridge.hubserver.upstream.commitfacts import commit_facts
        from ocibridge.hubserver.upstream.fetchedfacts import vouch
        from ocibridge.kinds.hf.commitdownload import said
        from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact

        src = self.src
        try:
            listed = self.download.listing()
            if self.door is not None:
                self.door.listed(src.typed_id, self.commit, [entry.path for entry in listed])
            if self.sized is not None:  # the ingest's size against its limits, before any file is asked
                self.sized([int(entry.size or 0) for entry in listed])
            self.files = {entry.path: self._flight(entry) for entry in listed}
            self.xet = self._over_xet(listed)
        except Exception as e:
            self.resolve.close()
            raise self._failed(e) from None
        finally:
            self.listed.set()
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="upstream-file") as pool:
                list(pool.map(self._fetch, self.files.values()))
        except Exception as e:
            for flight in self.files.values():
                flight.fail(f"{src.typed_id}@{self.commit}: the fetch from the upstream failed: {said(e)}")
            raise self._failed(e) from None
        finally:
            self.resolve.close()
            if self.xet is not None:
                self.xet.close()
        facts = commit_facts(self.hub, src.typed_id, self.commit, listed, self.info)
        package = self.download.package(listed)
        vouch(package, self.files)  # hashed once, by the tee: the build reads them unhashed
        package.annotations.update(facts)  # what the upstream says of the commit (commitfacts.py)
        # the chunks the tee made: a file without them (none made) is read for them, as push reads it
        tabled = {f.chunks.digest: f.chunks for f in self.files.values() if f.chunks is not None}
        return PlannedArtifact(package, None, self.chunking, tabled), ARTIFACT_TAG

    def readers_done(self, grace: float = READERS_GRACE, most: float = READERS_MOST) -> float:
        """Until no file of the commit has been read for ``grace`` seconds (``most`` at most): the
        push to the registry (hashing and writing the model again, in the registry's process) then
        does not compete with the clients still reading the files, which the fetch, ahead of them,
        has checked already. The seconds waited."""
        started = time.monotonic()
        while (waited := time.monotonic() - started) < most:
            since = [f.unread_since() for f in self.files.values()]
            quiet = [s for s in since if s is not None]
            if len(quiet) == len(since) and time.monotonic() - max(quiet, default=0.0) >= grace:
                break
            time.sleep(0.05)
        return waited

    def _over_xet(self, listed: list[Any]) -> XetGet | None:
        """What fetches the files the listing names a Xet hash of (none under ``HF_HUB_DISABLE_XET``)."""
        from huggingface_hub import constants

        from ocibridge.hubserver.upstream.xetfetch import XetGet, is_xet_hash

        names = {e.path: str(e.xet_hash).lower() for e in listed
                 if e.size and isinstance(e.xet_hash, str) and is_xet_hash(e.xet_hash)}
        if not names or constants.HF_HUB_DISABLE_XET:
            return None
        return XetGet(self.src, self.commit, names, self.hub.session)

    def _failed(self, e: Exception) -> OcibridgeError:
        from ocibridge.kinds.hf.commitdownload import said

        if isinstance(e, OcibridgeError):
            return e
        return OcibridgeError(f"{self.src.name}@{self.commit}: download from {self.src.endpoint} failed "
                              f"(the next request resumes it): {said(e)}")

    def _flight(self, entry: Any) -> FileFlight:
        from ocibridge.kinds.hf.hubcache import repo_folder

        lfs = entry.lfs
        if lfs is not None and lfs.sha256:
            kind, expected = "sha256", str(lfs.sha256)
        elif entry.blob_id:
            kind, expected = "git blob id", str(entry.blob_id)
        else:
            raise OcibridgeError(f"{self.src.name}@{self.commit}: {self.src.endpoint} lists {entry.path!r} with no "
                                 "sha256 and no blob id: nothing to check it against")
        folder = repo_folder(self.src.repo_id, self.cache, self.src.repo_type)
        named = hashlib.sha256(f"{expected}\0{entry.path}".encode()).hexdigest()
        refuse = None if self.door is None or not self.door.sniffs else self._pickled(entry.path)
        return FileFlight(entry.path, int(entry.size), kind, expected, folder / PARTIAL / named,
                          folder / "snapshots" / self.commit / entry.path, self.chunking, refuse,
                          None if self.scan is None else self.scan.judge)

    def _pickled(self, path: str) -> Callable[[str], Exception]:
        from ocibridge.hubserver.upstream.pickles import refused

        return lambda why: refused(self.src.typed_id, self.commit, path, why)

    def _fetch(self, flight: FileFlight) -> None:
        """One file from the upstream into its partial file (resumed from what it holds), checked,
        moved into the snapshot."""
        src = self.src
        if flight.adopt():
            return
        try:
            with PARTIALS.hold(flight.partial), flight.opened() as tee:
                received = self._got(flight, tee)
                with self._count:
                    self.bytes_received += received
                flight.finish(tee.hexdigest(), tee.sha256(), tee.chunks())
        except FileCut as e:
            raise OcibridgeError(f"{src.name}@{self.commit}: {e} (removed: fetched whole next time)") from None
        except Exception as e:
            from ocibridge.kinds.hf.commitdownload import said

            flight.fail(f"{src.typed_id}@{self.commit}: {flight.path}: the fetch from the upstream failed: {said(e)}")
            raise

    def _got(self, flight: FileFlight, tee: TeeFile) -> int:
        """The file's bytes by the first way that gives it: Xet where it is offered, else resolve."""
        ways: list[FileGet] = [self.resolve]
        if self.xet is not None and self.xet.offers(flight.path):
            ways.insert(0, self.xet)
        for way in ways[:-1]:
            try:
                return way.get(flight, tee)
            except XetUnavailable as e:
                log.info("upstream: %s@%s: %s not over Xet (%s): by resolve", self.src.typed_id, self.commit,
                         flight.path, e)
        return ways[-1].get(flight, tee)
