"""One registry blob's bytes as they arrive, resuming with Range after drops and short bodies.

The connection's side of a download (download.py hands the bytes over, on a thread of its own
or not): the GET, the answers to a Range, a large body read straight off its socket (into the
caller's buffer, or spliced into a file: splicing.py), drops and short bodies resumed from the
byte that is here.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx

from ocibridge.core import interrupt
from ocibridge.core.fsutil import pwrite_all
from ocibridge.core.httpheaders import header_int
from ocibridge.errors import NotFound, RegistryError
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry.bodies import read_prefix
from ocibridge.stores.registry.client import RegistryClient, TransportFailure
from ocibridge.stores.registry.splicing import AVAILABLE as SPLICE_AVAILABLE
from ocibridge.stores.registry.splicing import ReceiveFailed, Splicer

#: A download gives up after this many attempts in a row that bring no new bytes.
MAX_STALLED_RESUMES = 5
#: and after this many resumes in total, progress or not.
MAX_TOTAL_RESUMES = 50
#: Downloads are handed over in pieces of this size (what the callers read at a time).
PIECE = CHUNK
#: Bodies of at least this size are read off the socket, not through h11 (see _receive).
DIRECT_MIN = 16 * 1024 * 1024
#: The most asked of one read of a TLS socket as bytes (a record is at most 16 KiB).
TLS_READ = 64 * 1024

BytesHook = Callable[[Descriptor, int], None]


def pull_scope(repository: str) -> str:
    return f"repository:{repository}:pull"


class BlobStream:
    """The blob's bytes as they arrive, resuming with Range after drops and short bodies.

    Used by one thread at a time: the prefetch thread while it runs, else the reader."""

    def __init__(self, client: RegistryClient, repository: str, desc: Descriptor,
                 on_bytes: BytesHook | None, stop: threading.Event,
                 start: int = 0, end: int | None = None, ask_range: bool = False):
        self.client = client
        self.repository = repository
        self.desc = desc
        self.offset = start
        #: bytes [start, end) are wanted: a part of a ranged download, or the rest of a blob
        self.end = desc.size if end is None else end
        self.ranged = False  # whether the server answered a Range with 206
        #: a Range even for the whole blob (``bytes=0-``): a ranged download learns from the
        #: answer whether it may ask for parts
        self.ask_range = ask_range
        self.piece = PIECE  # bytes handed over at a time
        self.resumes = 0
        self._stalled = 0
        self._on_bytes = on_bytes
        self._stop = stop
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._skip = 0
        self._carry = b""
        self._socket: Any = None  # httpcore's network stream, once reading the body off it
        self._socket_left: int | None = None
        self._raw: socket.socket | None = None  # its socket (plain, or TLS to the server), for recv_into
        self._plain = False  # that socket carries the body's own bytes (no TLS): it may be spliced
        self._pending = b""  # received by next_into beyond the buffer it was given
        self._h11_first = True
        self._splicer: Splicer | None = None  # made by the first land_into, kept across resumes
        self._open()

    def _open(self) -> None:
        # identity: the digest is over the stored bytes, never a transfer-compressed form
        headers = {"Accept-Encoding": "identity"}
        if self.end < self.desc.size:
            headers["Range"] = f"bytes={self.offset}-{self.end - 1}"
        elif self.offset or self.ask_range:
            headers["Range"] = f"bytes={self.offset}-"
        path = f"/v2/{self.repository}/blobs/{self.desc.digest}"
        response = self.client.send("GET", path, scopes=(pull_scope(self.repository),),
                                    headers=headers, stream=True)
        status = response.status_code
        if status == 404:
            read_prefix(response)
            raise NotFound(f"{self.client.host}/{self.repository}: blob {self.desc.digest} not found")
        if status == 206 and "Range" in headers:
            start = _content_range_start(response.headers.get("content-range"))
            if start != self.offset:
                response.close()
                raise RegistryError(
                    f"registry {self.client.host}: range answer starts at {start}, "
                    f"asked {self.offset}", 206)
            self._skip = 0
            self.ranged = True
        elif status == 200:
            self._skip = self.offset  # the server ignored Range: drop what we already have
        else:
            read_prefix(response)
            raise self.client.error(response, f"refused reading {self.repository}")
        self._response = response
        # no chunk size: httpx would hold back up to that many bytes, lost on a drop
        self._chunks = response.iter_raw()
        self._socket = self._socket_left = self._raw = None
        self._pending = b""
        self._h11_first = True
        self._read_off_socket_if_large(response)

    def _read_off_socket_if_large(self, response: httpx.Response) -> None:
        """A large body is read off the socket once h11 has handed over its first chunk (see :meth:`_receive`)."""
        length = header_int(response.headers.get("content-length"))
        stream = response.extensions.get("network_stream")
        # Not under --limit-rate: the socket read would pass the metered body (a pull into a
        # directory ran at full speed); at a capped rate the copies it saves do not matter.
        if (self.end - self.offset >= DIRECT_MIN and length is not None and stream is not None
                and self.client.rate_limit is None
                and response.http_version == "HTTP/1.1"
                and "transfer-encoding" not in response.headers):
            self._socket, self._socket_left = stream, length
            self._raw, self._plain = receivable_socket(stream)

    def keep_whole_answer(self) -> None:
        """(a 200 to a Range, before its first byte is read) Hand over the whole blob that
        answer carries, from byte 0 to the end, instead of skipping to the range and stopping
        at its end; a resume then asks from the byte that is here, as for any whole read."""
        assert not self.ranged and self.offset == self._skip, "a 200's bytes were read already"
        self.offset = self._skip = 0
        self.end = self.desc.size
        if self._response is not None and self._socket is None:
            self._read_off_socket_if_large(self._response)  # (it was decided for the range's size)

    def _resume(self, reason: str) -> None:
        self.close()
        interrupt.check()  # an interrupt cut the connection: stop, do not reconnect
        self.resumes += 1
        if self._stalled >= MAX_STALLED_RESUMES or self.resumes > MAX_TOTAL_RESUMES:
            raise RegistryError(
                f"registry {self.client.host}: download of {self.desc.digest} failed at byte "
                f"{self.offset} of {self.desc.size} after {self.resumes - 1} resumes: {reason}")
        self._stalled += 1
        self.client.stats.add(download_resumes=1)
        if self._stop.wait(random.uniform(0, min(2.0, 0.1 * 2**self._stalled))):
            raise StreamStopped
        self._open()

    def close(self) -> None:
        # forgotten first, so that interrupt() does not reach a connection back in the pool
        response, self._response, self._chunks = self._response, None, None
        self._socket = self._socket_left = self._raw = None
        if response is not None:
            response.close()

    def close_pipe(self) -> None:
        splicer, self._splicer = self._splicer, None
        if splicer is not None:
            splicer.close()

    def interrupt(self) -> None:
        """From another thread: make a blocked socket read return (shut the socket down)."""
        response = self._response
        stream = response.extensions.get("network_stream") if response is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _receive(self, want: int) -> bytes:
        """The next bytes of the response body; StopIteration at its end.

        A large body is read straight off the connection's socket (httpcore's documented
        ``network_stream``), up to ``want`` bytes a read, once h11 has handed over what it
        buffered with the headers (its first chunk): httpx's 64 KiB chunks, each copied twice
        by h11, cost ~0.8 s of CPU per GiB, the socket ~0.25 s. The connection is then closed,
        not reused (h11 did not see the body end)."""
        if self._socket_left is None or self._h11_first:
            data: bytes = next(self._chunks)  # type: ignore[arg-type]  # set on the line above; mypy keeps the Optional
            if self._socket_left is not None:
                self._h11_first = False
                self._socket_left -= len(data)
            return data
        if self._socket_left <= 0:
            raise StopIteration
        try:
            # over TLS a read returns one record (16 KiB) but allocates what was asked first
            cap = want if self._plain or self._raw is None else TLS_READ
            data = self._socket.read(min(want, cap, self._socket_left), self.client.options.read_timeout)
        except (httpcore.NetworkError, httpcore.TimeoutException) as e:
            raise httpx.ReadError(str(e) or type(e).__name__) from e
        if not data:
            raise StopIteration  # the peer closed early: resumed like any short body
        self._socket_left -= len(data)
        return data

    def _next_chunk(self, want: int = PIECE) -> bytes:
        """The next bytes of the blob, up to ``want`` read from the socket (``b""`` only once
        the expected size is reached)."""
        got = [b""]

        def receive() -> int:
            got[0] = self._receive(want)
            return len(got[0])

        def drop_front(cut: int, n: int) -> None:
            got[0] = got[0][cut:n]

        n = self._advance(receive, drop_front)
        return got[0][:n]  # the object itself when nothing is cut

    def _advance(self, receive: Callable[[], int], drop_front: Callable[[int, int], None]) -> int:
        """What :meth:`_next_chunk` and :meth:`next_into` share: one ``receive`` (how many
        bytes came), resumed with Range after drops and short bodies; the ``cut`` first bytes
        of ``n`` dropped (``drop_front``) while a server that ignored Range repeats what is
        here; clipped at a part's end; counted. The bytes kept, 0 only at the expected end."""
        while True:
            if self.offset >= self.end and self._chunks is None:
                return 0
            if self._stop.is_set():
                raise StreamStopped
            interrupt.check()
            try:
                n = receive()
            except StopIteration:
                if self.offset >= self.end:
                    self.close()
                    return 0
                self._resume(f"body ended early at byte {self.offset}")
                continue
            except (httpx.TransportError, httpx.StreamError) as e:
                self._resume(str(e) or type(e).__name__)
                continue
            except TransportFailure as e:
                self._resume(str(e))
                continue
            if self._skip:
                cut = min(self._skip, n)
                self._skip -= cut
                if cut:
                    drop_front(cut, n)
                    n -= cut
                if not n:
                    continue
            if self.end < self.desc.size and self.offset + n > self.end:
                # a part whose server ignored the Range's end: the rest is another part's
                n = self.end - self.offset
                self.close()
            self.offset += n
            self._stalled = 0
            self.client.stats.add(bytes_downloaded=n)
            if self._on_bytes:
                self._on_bytes(self.desc, n)
            return n

    def next_piece(self) -> bytes:
        """The next ``PIECE`` bytes (fewer only at the end; ``b""`` after it): whole pieces
        let a reader asking for ``PIECE`` bytes take them without another copy, and a socket
        read that fills a piece at once is handed over as it is."""
        piece = self.piece
        parts, have = ([self._carry], len(self._carry)) if self._carry else ([], 0)
        self._carry = b""
        while have < piece:
            data = self._next_chunk(piece - have)
            if not data:
                break
            parts.append(data)
            have += len(data)
        if have > piece:  # split the last network chunk (≤ 64 KiB), not the whole piece
            last = parts[-1]
            keep = len(last) - (have - piece)
            parts[-1], self._carry = last[:keep], last[keep:]
        return b"".join(parts)


    def _receive_into(self, view: memoryview) -> int:
        """Like :meth:`_receive`, into ``view``: the body goes from the socket (plain, or TLS
        straight to the server: :func:`receivable_socket`) into the caller's buffer with no bytes
        object in between (recv_into; measured on loopback, 1 GiB of plain HTTP: 1.0 s of
        system time against 1.7-3.1 s through bytes pieces)."""
        if self._pending:
            data = self._pending
        elif self._raw is None or self._h11_first or self._socket_left is None:
            data = self._receive(len(view))
        else:
            if self._socket_left <= 0:
                raise StopIteration
            try:
                timeout = self.client.options.read_timeout
                if self._raw.gettimeout() != timeout:  # (each settimeout is a system call: once a body)
                    self._raw.settimeout(timeout)
                n = self._raw.recv_into(view[: min(len(view), self._socket_left)])
            except OSError as e:
                raise httpx.ReadError(str(e) or type(e).__name__) from e
            if not n:
                raise StopIteration  # the peer closed early: resumed like any short body
            self._socket_left -= n
            return n
        n = min(len(data), len(view))
        view[:n] = data[:n]
        self._pending = data[n:]
        return n

    def next_into(self, view: memoryview) -> int:
        """Like :meth:`_next_chunk`, into ``view``: how many bytes (0 only once the expected
        size is reached)."""

        def drop_front(cut: int, n: int) -> None:
            view[: n - cut] = view[cut:n]

        return self._advance(lambda: self._receive_into(view), drop_front)

    def spliceable(self) -> bool:
        """Whether :meth:`land_into` moves bytes inside the kernel on this connection: a
        plain-HTTP body read off its socket, on Linux, into a file system that takes them."""
        return (SPLICE_AVAILABLE and self._raw is not None and self._plain
                and (self._splicer is None or not self._splicer.refused))

    def land_into(self, fd: int, offset: int, count: int) -> int:
        """Up to ``count`` next bytes of the blob written into ``fd`` at ``offset``: spliced
        from the socket where the connection allows it (:mod:`.splicing`), else received and
        written (what h11 buffered with the headers, a server that ignored Range and repeats
        what is here, a connection resumed without a socket to read). The bytes written, 0
        only once the expected size is reached."""
        got = [b""]
        spliced = [False]

        def receive() -> int:
            if (not self._skip and not self._pending and not self._h11_first
                    and self._socket_left is not None and self.spliceable()):
                spliced[0] = True
                return self._splice(fd, offset, count)
            spliced[0] = False
            data = self._pending or self._receive(count)
            got[0], self._pending = data[:count], data[count:]
            return len(got[0])

        def drop_front(cut: int, n: int) -> None:
            got[0] = got[0][cut:n]

        n = self._advance(receive, drop_front)
        if n and not spliced[0]:
            pwrite_all(fd, got[0][:n], offset)
        return n

    def _splice(self, fd: int, offset: int, count: int) -> int:
        assert self._raw is not None and self._socket_left is not None  # spliceable() said so
        if self._socket_left <= 0:
            raise StopIteration
        if self._splicer is None:
            self._splicer = Splicer()
        try:
            n = self._splicer.move(self._raw, fd, offset, min(count, self._socket_left, self.end - self.offset),
                                   self.client.options.read_timeout)
        except ReceiveFailed as e:
            raise httpx.ReadError(str(e)) from e
        except BaseException:
            self.close_pipe()  # bytes may be left in it: a new pipe for the next move
            raise
        if not n:
            raise StopIteration  # the peer closed early: resumed like any short body
        self._socket_left -= n
        return n


def receivable_socket(stream: Any) -> tuple[socket.socket | None, bool]:
    """The socket under httpcore's network stream that the body can be received from straight
    into the caller's buffer (``recv_into``), and whether it is plain (its bytes are the body's:
    they may be spliced). Over TLS straight to the server, the ``ssl.SSLSocket`` decrypts into
    the buffer: received as bytes instead, each read of one 16 KiB record allocates what was
    asked first (a bare TLS socket reading 1 GiB into a 512 KiB buffer on loopback: 2.4-2.6 s
    of CPU as bytes, 0.8-0.9 s with recv_into; a whole 1 GiB pull over TLS: 2.76 s of CPU
    against 2.67 s, four alternating runs at load 7-9). TLS through a TLS proxy (an
    ``ssl.SSLObject`` over the proxy's socket) is read through the stream."""
    sock = stream.get_extra_info("socket")
    ssl_object = stream.get_extra_info("ssl_object")
    if ssl_object is None:
        return (sock, True) if type(sock) is socket.socket else (None, False)
    if isinstance(sock, ssl.SSLSocket) and not isinstance(ssl_object, ssl.SSLObject):
        return sock, False
    return None, False


class StreamStopped(Exception):
    """The reader was closed: the prefetch thread stops quietly."""


def _content_range_start(value: str | None) -> int | None:
    m = re.match(r"^\s*bytes\s+([0-9]{1,19})-", value or "")
    return int(m.group(1)) if m else None
