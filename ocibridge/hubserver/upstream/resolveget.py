"""A file by its ``resolve`` route (``GET /REPO/resolve/COMMIT/PATH``): :class:`ResolveGet`, the
project's own streaming fetch in place of huggingface_hub's download engine. The body is read
off the connection's socket straight into one reused buffer (``recv_into``), written to the
partial file, hashed and told to its readers once per :data:`.fileget.RECEIVE_BATCH` (the tee: one copy
into the process, one into the file, one pass of the hash); a cut is resumed from what the
partial file holds (``Range``), a few times, before the fetch fails (the next request resumes it).

Measured (bench/upstream_cpu.py, 1 GiB, plain HTTP on loopback, 3 runs alternating with the
engine's): the proxy's user CPU until the client had its files 1.10 s a GiB against 1.61 s; by
perf, the interpreter's share 0.46 s against 0.88 s and libc's copies 0.11 s against 0.36 s (the
engine's 64 KiB pieces, copied by h11 and joined again into its chunks; docs/benchmarks.md, "the
proxy's first load").

The upstream's token goes to the upstream's own origin only (:meth:`.session.UpstreamSession.auth_for`):
a redirect elsewhere (a CDN's signed URL) is followed without ``Authorization``."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.fileget import RECEIVE_BATCH
from ocibridge.hubserver.upstream.session import TIMEOUT, UpstreamSession, later
from ocibridge.stores.registry.blobstream import receivable_socket
from ocibridge.stores.registry.bodies import read_prefix

if TYPE_CHECKING:
    import httpx

    from ocibridge.hubserver.upstream.tee import FileFlight, TeeFile
    from ocibridge.kinds.hf.commitdownload import HubSource

#: tries of one file in a row that bring no new byte before the fetch fails
TRIES = 3
#: redirects followed at most (the Hub: one, to its CDN)
REDIRECTS = 5
_REDIRECT = (301, 302, 303, 307, 308)


class Refused(OcibridgeError):
    """The upstream's answer that another try would not change (a 4xx): not retried."""


def direct_socket(response: httpx.Response) -> socket.socket | None:
    """The socket a plain HTTP/1.1 body of known length can be received from straight into a
    buffer (the registry download's rule: :func:`.blobstream.receivable_socket`); None where the
    body must be read through httpx (chunked, compressed, TLS through a proxy, HTTP/2)."""
    stream = response.extensions.get("network_stream")
    if stream is None or response.http_version != "HTTP/1.1" or "content-length" not in response.headers \
            or "transfer-encoding" in response.headers \
            or response.headers.get("content-encoding", "identity") != "identity":
        return None
    return receivable_socket(stream)[0]


class ResolveGet:
    """``GET /REPO/resolve/COMMIT/PATH``, streamed into the tee, resumed from what it holds."""

    def __init__(self, src: HubSource, commit: str, session: UpstreamSession):
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        self.src, self.commit, self.session = src, commit, session
        self._headers = {**build_hf_headers(token=False, library_name="ocibridge"), "Accept-Encoding": "identity"}

    def close(self) -> None:
        """Nothing to close: the connections are the proxy's session's."""

    def get(self, flight: FileFlight, tee: TeeFile) -> int:
        import httpx

        url = self.session.file_url(self.src.typed_id, self.commit, flight.path)
        held = tee.tell()
        if held > flight.size:  # more than the file: nothing of it can be trusted
            tee.truncate(0)
        stalled = 0
        while tee.tell() < flight.size:
            before = tee.tell()
            try:
                self._once(url, flight, tee)
                if tee.tell() < flight.size:
                    raise httpx.ReadError(f"the body ended at byte {tee.tell()} of {flight.size}")
            except httpx.TransportError:
                stalled = 0 if tee.tell() > before else stalled + 1
                if stalled >= TRIES:
                    raise
                time.sleep(min(2.0, 0.2 * 2 ** stalled))
        return max(0, tee.tell() - held)

    def _once(self, url: str, flight: FileFlight, tee: TeeFile) -> None:
        """One request for the rest of the file, its body appended to ``tee`` as it arrives."""
        at = tee.tell()
        ranged = {"Range": f"bytes={at}-"} if at else {}
        for _ in range(REDIRECTS + 1):
            # a CDN's signed URL: never the upstream's token
            headers = {**self._headers, **ranged, **self.session.auth_for(url)}
            with self.session.http.stream("GET", url, headers=headers) as answer:
                if answer.status_code in _REDIRECT and "location" in answer.headers:
                    url = urljoin(url, answer.headers["location"])
                    continue
                self._status(answer, flight, tee, at)
                self._body(answer, tee, flight.size)
                return
        raise OcibridgeError(f"{flight.path}: more than {REDIRECTS} redirects from {self.src.endpoint}")

    def _status(self, answer: httpx.Response, flight: FileFlight, tee: TeeFile, at: int) -> None:
        """A 206 from where the file is held on, or a 200 (the whole file: what is held is dropped)."""
        import httpx

        status = answer.status_code
        if status == 206 and at:
            said = answer.headers.get("content-range", "")
            if not said.startswith(f"bytes {at}-"):
                raise httpx.ReadError(f"{flight.path}: asked from byte {at}, the upstream answered {said!r}")
            return
        if status == 200:
            if at:
                tee.truncate(0)  # the upstream ignored the Range: the whole file again
            return
        read_prefix(answer)  # its first 64 KiB at most: the rest of a refusal is never downloaded
        what = f"{flight.path}: {self.src.endpoint} answered {status}"
        if later(status):
            raise httpx.RemoteProtocolError(what)  # tried again, as a cut
        raise Refused(what)

    def _body(self, answer: httpx.Response, tee: TeeFile, size: int) -> None:
        """The body into ``tee``: what h11 buffered with the headers first, then off the socket
        into one reused buffer, written a whole buffer at a time (the connection is closed
        after: h11 did not see the body end). Never past the ``size`` the listing states: a body
        longer than the file (its Content-Length, or a chunked one as it comes) is refused before
        the bytes past it are read, so an upstream's lie fills no disk beyond the file it named."""
        declared = answer.headers.get("content-length", "")
        if declared.isdigit():
            _within(tee, int(declared), size)
        sock = direct_socket(answer)
        chunks = answer.iter_raw()  # held until the end: dropped, it would close the connection
        if sock is None:
            for data in chunks:
                _within(tee, len(data), size)
                tee.write(data)
            return
        first = next(chunks, b"")
        tee.write(first)
        left = int(answer.headers["content-length"]) - len(first)
        if left <= 0:
            return
        buffer = bytearray(RECEIVE_BATCH)
        view = memoryview(buffer)
        sock.settimeout(TIMEOUT[1])
        filled = 0
        try:
            while left > 0:
                n = sock.recv_into(view[filled:min(RECEIVE_BATCH, filled + left)])
                if not n:
                    raise ConnectionError(f"the upstream closed the connection {left} bytes short")
                filled += n
                left -= n
                if filled == RECEIVE_BATCH or left == 0:
                    tee.write(view[:filled])
                    filled = 0
        except OSError as e:
            import httpx

            raise httpx.ReadError(str(e) or type(e).__name__) from e
        finally:
            if filled:  # what arrived before a cut is kept: the next try resumes after it
                tee.write(view[:filled])


def _within(tee: TeeFile, more: int, size: int) -> None:
    """:class:`Refused` when ``more`` bytes after what ``tee`` holds would pass the file's ``size``."""
    if tee.tell() + more > size:
        raise Refused(f"{tee.flight.path}: the upstream sends more than the {size} bytes its listing states "
                      f"({tee.tell() + more} or more): refused")
