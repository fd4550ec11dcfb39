"""How one file of an upstream commit comes into its partial file (:mod:`.tee`), resumed from what
the partial file already holds: a :class:`FileGet`. Two ways, tried in order per file
(upstream/streamed.py): over Xet where the upstream offers the file there (:mod:`.xetfetch`), else
by its ``resolve`` route (:class:`ResolveGet`: an LFS file, or a file in git)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.tee import FileFlight, TeeFile
    from ocibridge.kinds.hf.commitdownload import HubSource

#: bytes the engine reads from the upstream at once (its default, 10 MB, is what a reader waits
#: for before its first byte, and what a cut loses): set in serve's process, the engine's only user
CHUNK = 512 << 10


class XetUnavailable(Exception):  # noqa: N818 - an answer, not a failure: the next way is tried
    """The upstream does not give this file over Xet (no grant, no reconstruction of its name):
    nothing was written, the file's next way is tried."""


class FileGet(Protocol):
    """One way a file's bytes come from the upstream."""

    def get(self, flight: FileFlight, tee: TeeFile) -> int:
        """The rest of ``flight``'s file appended to ``tee`` (what an earlier fetch kept is in it:
        a way may cut it back to where it can go on from); the bytes received from the upstream.
        :class:`XetUnavailable` when this way does not serve the file (the next is tried)."""
        ...


class ResolveGet:
    """``GET /REPO/resolve/COMMIT/PATH`` with huggingface_hub's engine (``http_get``: its retries,
    a ``Range`` from what the partial file holds)."""

    def __init__(self, src: HubSource, commit: str):
        self.src, self.commit = src, commit

    def get(self, flight: FileFlight, tee: TeeFile) -> int:
        from huggingface_hub import constants, hf_hub_url
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        from ocibridge.kinds.hf.commitdownload import _quiet_tqdm

        src = self.src
        constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, CHUNK)
        url = hf_hub_url(src.repo_id, flight.path, revision=self.commit, endpoint=src.endpoint)
        headers = build_hf_headers(token=src.token, library_name="ocibridge")
        held = tee.tell()
        # a redirect to another host goes without the token (httpx drops Authorization across origins)
        http_get(url, tee, resume_size=held, headers=headers, expected_size=flight.size,  # type: ignore[arg-type]
                 tqdm_class=_quiet_tqdm())  # type: ignore[arg-type]
        return tee.tell() - held
