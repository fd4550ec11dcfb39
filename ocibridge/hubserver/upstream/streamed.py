"""A commit's files fetched from the upstream with huggingface_hub's download engine (its GET:
``http_get``, retried and resumed within a call), each teed (:mod:`.tee`) so that the clients that
asked for a file read it as it arrives; each checked against the listing's sha256 or git blob id,
then the snapshot read as ``push hf:ORG/NAME@COMMIT`` reads it (kinds/hf/commitdownload.py's listing
and reading: the same artifact, the same digest), each file's SHA-256 the one the tee made as it
wrote it (upstream/checked.py: no file is hashed twice).

The files land in serve's own Hub cache as a snapshot (``snapshots/<commit>/<path>``) once checked;
until then in ``ocibridge-partial/`` beside it, kept when the fetch is cut: the next fetch resumes
each file from what it holds (a ``Range`` request), so a cut costs the bytes after the cut."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.tee import FileCut, FileFlight

if TYPE_CHECKING:
    from ocibridge.kinds.hf.commitdownload import HubSource
    from ocibridge.stores.base import Store

#: the folder of a repository's Hub cache folder where files in flight are written
PARTIAL = "ocibridge-partial"
#: bytes the engine reads from the upstream at once (its default, 10 MB, is what a reader waits
#: for before its first byte, and what a cut loses): set in serve's process, the engine's only user
CHUNK = 512 << 10


class StreamedFetch:
    """One commit's fetch whose files can be read while they arrive (:attr:`files`, once :attr:`listed`)."""

    def __init__(self, src: HubSource, commit: str, workers: int, cache: Path):
        from ocibridge.kinds.hf.commitdownload import CommitDownload

        self.src, self.commit, self.workers, self.cache = src, commit, workers, cache
        self.download = CommitDownload(src, commit, workers, cache)
        self.files: dict[str, FileFlight] = {}
        self.listed = threading.Event()  # set once :attr:`files` is filled (or the listing failed)
        self.bytes_received = 0  # from the upstream, this fetch (a resumed file: the rest only)
        self._count = threading.Lock()

    def __call__(self) -> tuple[Store, str]:
        """The artifact of the commit, every file fetched and checked."""
        from ocibridge.hubserver.upstream.checked import vouch
        from ocibridge.kinds.hf.commitdownload import said
        from ocibridge.model.builder import PlannedArtifact

        src = self.src
        try:
            listed = self.download.listing()
            self.files = {entry.path: self._flight(entry) for entry in listed}
        except Exception as e:
            raise self._failed(e) from None
        finally:
            self.listed.set()
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="upstream-file") as pool:
                list(pool.map(self._fetch, self.files.values()))
        except Exception as e:
            for flight in self.files.values():
                flight.fail(f"{src.repo_id}@{self.commit}: the fetch from the upstream failed: {said(e)}")
            raise self._failed(e) from None
        artifact, reference = self.download.snapshot(listed)
        assert isinstance(artifact, PlannedArtifact)
        vouch(artifact.package, self.files)  # hashed once, by the tee: the build reads them unhashed
        return artifact, reference

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
        folder = repo_folder(self.src.repo_id, self.cache)
        named = hashlib.sha256(f"{expected}\0{entry.path}".encode()).hexdigest()
        return FileFlight(entry.path, int(entry.size), kind, expected, folder / PARTIAL / named,
                          folder / "snapshots" / self.commit / entry.path)

    def _fetch(self, flight: FileFlight) -> None:
        """One file from the upstream into its partial file (resumed from its length), checked,
        moved into the snapshot."""
        from huggingface_hub import constants, hf_hub_url
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        from ocibridge.kinds.hf.commitdownload import _quiet_tqdm

        src = self.src
        if flight.adopt():
            return
        constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK)
        try:
            url = hf_hub_url(src.repo_id, flight.path, revision=self.commit, endpoint=src.endpoint)
            headers = build_hf_headers(token=src.token, library_name="ocibridge")
            with flight.opened() as tee:
                held = tee.tell()
                # the engine's GET (its retries, a Range from ``held``); a redirect to another host
                # goes without the token (httpx drops Authorization across origins)
                http_get(url, tee, resume_size=held, headers=headers, expected_size=flight.size,  # type: ignore[arg-type]
                         tqdm_class=_quiet_tqdm())  # type: ignore[arg-type]
                with self._count:
                    self.bytes_received += tee.tell() - held
                flight.finish(tee.hexdigest(), tee.sha256())
        except FileCut as e:
            raise OcibridgeError(f"{src.name}@{self.commit}: {e} (removed: fetched whole next time)") from None
        except Exception as e:
            from ocibridge.kinds.hf.commitdownload import said

            flight.fail(f"{src.repo_id}@{self.commit}: {flight.path}: the fetch from the upstream failed: {said(e)}")
            raise
