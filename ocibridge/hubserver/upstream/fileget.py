"""How one file of an upstream commit comes into its partial file (:mod:`.tee`), resumed from what
the partial file already holds: a :class:`FileGet`. Two ways, tried in order per file
(upstream/streamed.py): over Xet where the upstream offers the file there (:mod:`.xetfetch`), else
by its ``resolve`` route (:class:`.resolveget.ResolveGet`: an LFS file, or a file in git)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.tee import FileFlight, TeeFile

#: bytes received from the upstream before they are written, hashed and told to the readers at
#: once (what a reader waits for at most beyond the last write; a cut keeps what arrived)
RECEIVE_BATCH = 512 << 10


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
