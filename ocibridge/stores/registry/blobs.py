"""Blob transfers: a download reader that resumes with Range, and resumable uploads.

Downloads stream; when the connection drops or the body ends short, the reader asks again
from the byte it has (``Range: bytes=N-``). Uploads stream the source as one PUT by default,
or as PATCH chunks; when interrupted they ask the registry how far it got (GET on the upload
URL) and continue from there, or restart cleanly when the registry lost the session.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

import httpx

from ...errors import DigestMismatch, NotFound, OcibridgeError, RegistryError
from ...oci.digest import CHUNK
from ...oci.models import Descriptor
from .client import RETRY_STATUSES, RegistryClient, TransportFailure

#: A download gives up after this many attempts in a row that bring no new bytes.
MAX_STALLED_RESUMES = 5
#: and after this many resumes in total, progress or not.
MAX_TOTAL_RESUMES = 50

#: PATCH size used when a registry refuses a monolithic PUT as too large (413).
FALLBACK_CHUNK_SIZE = 8 * 1024 * 1024

#: Bodies up to this size are sent in one piece rather than streamed.
SMALL_BODY = 256 * 1024

Reopen = Callable[[], BinaryIO]
BytesHook = Callable[[Descriptor, int], None]


def pull_scope(repository: str) -> str:
    return f"repository:{repository}:pull"


def push_scopes(repository: str) -> tuple[str, ...]:
    return (f"repository:{repository}:pull,push",)


class BlobDownload:
    """A raw reader over a registry blob that resumes after drops; wrap it to verify."""

    def __init__(self, client: RegistryClient, repository: str, desc: Descriptor,
                 on_bytes: BytesHook | None = None):
        self.client = client
        self.repository = repository
        self.desc = desc
        self.offset = 0
        self.resumes = 0
        self._stalled = 0
        self._on_bytes = on_bytes
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._skip = 0
        self._buf = b""
        self._eof = False
        self._open()

    # -- connection ----------------------------------------------------------------------------
    def _open(self) -> None:
        # identity: the digest is over the stored bytes, never a transfer-compressed form
        headers = {"Accept-Encoding": "identity"}
        if self.offset:
            headers["Range"] = f"bytes={self.offset}-"
        path = f"/v2/{self.repository}/blobs/{self.desc.digest}"
        response = self.client.send("GET", path, scopes=(pull_scope(self.repository),),
                                    headers=headers, stream=True)
        status = response.status_code
        if status == 404:
            response.read()
            response.close()
            raise NotFound(f"{self.client.host}/{self.repository}: blob {self.desc.digest} not found")
        if status == 206 and self.offset:
            start = _content_range_start(response.headers.get("content-range"))
            if start != self.offset:
                response.close()
                raise RegistryError(
                    f"registry {self.client.host}: range answer starts at {start}, "
                    f"asked {self.offset}", 206)
            self._skip = 0
        elif status == 200:
            self._skip = self.offset  # the server ignored Range: drop what we already have
        else:
            response.read()
            response.close()
            raise self.client.error(response, f"refused pull of {self.repository}")
        self._response = response
        # no chunk size: httpx would hold back up to that many bytes, lost on a drop
        self._chunks = response.iter_raw()

    def _resume(self, reason: str) -> None:
        self._close_response()
        self.resumes += 1
        if self._stalled >= MAX_STALLED_RESUMES or self.resumes > MAX_TOTAL_RESUMES:
            raise RegistryError(
                f"registry {self.client.host}: download of {self.desc.digest} failed at byte "
                f"{self.offset} of {self.desc.size} after {self.resumes - 1} resumes: {reason}")
        self._stalled += 1
        self.client.stats.add(download_resumes=1)
        time.sleep(random.uniform(0, min(2.0, 0.1 * 2**self._stalled)))
        self._open()

    def _close_response(self) -> None:
        if self._response is not None:
            self._response.close()
        self._response = None
        self._chunks = None

    def _next_chunk(self) -> bytes:
        """The next bytes of the blob (never ``b""`` before the expected size is reached)."""
        while True:
            if self.offset >= self.desc.size and self._chunks is None:
                return b""
            try:
                assert self._chunks is not None
                data = next(self._chunks)
            except StopIteration:
                if self.offset >= self.desc.size:
                    self._close_response()
                    return b""
                self._resume(f"body ended early at byte {self.offset}")
                continue
            except (httpx.TransportError, httpx.StreamError) as e:
                self._resume(str(e) or type(e).__name__)
                continue
            except TransportFailure as e:
                self._resume(str(e))
                continue
            if self._skip:
                cut = min(self._skip, len(data))
                self._skip -= cut
                data = data[cut:]
                if not data:
                    continue
            self.offset += len(data)
            self._stalled = 0
            self.client.stats.add(bytes_downloaded=len(data))
            if self._on_bytes:
                self._on_bytes(self.desc, len(data))
            return data

    # -- file API -------------------------------------------------------------------------
    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = [self._buf]
            while chunk := self._next_chunk():
                parts.append(chunk)
            self._buf = b""
            return b"".join(parts)
        parts, have = [self._buf], len(self._buf)  # one join per read, not a growing +=
        while have < n and not self._eof:
            chunk = self._next_chunk()
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self._buf = data[n:] if len(data) > n else b""
        return data[:n] if len(data) > n else data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._close_response()

    def __enter__(self) -> BlobDownload:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _content_range_start(value: str | None) -> int | None:
    m = re.match(r"^\s*bytes\s+(\d+)-", value or "")
    return int(m.group(1)) if m else None


# -- upload -------------------------------------------------------------------------------------
class _Source:
    """The blob's bytes to send, able to go back to an offset by seek() or by reopening."""

    def __init__(self, reader: BinaryIO, reopen: Reopen | None):
        self.reader = reader
        self.reopen = reopen
        self.pos = 0
        self._reopened = False

    def seekable(self) -> bool:
        seekable = getattr(self.reader, "seekable", None)
        try:
            return bool(seekable and seekable() and hasattr(self.reader, "seek"))
        except (OSError, ValueError):
            return False

    def can_rewind(self) -> bool:
        return self.seekable() or self.reopen is not None

    def go_to(self, offset: int) -> None:
        if offset == self.pos:
            return
        if self.seekable():
            self.reader.seek(offset)
            self.pos = offset
            return
        if self.reopen is None:
            raise OcibridgeError("the upload source cannot be read again")
        if self._reopened:
            self.reader.close()
        self.reader = self.reopen()
        self._reopened = True
        self.pos = 0
        while self.pos < offset:
            data = self.reader.read(min(CHUNK, offset - self.pos))
            if not data:
                raise OcibridgeError("the upload source ended before the resume offset")
            self.pos += len(data)

    def chunks(self, limit: int, on_chunk: Callable[[int], None],
               last: bool = False) -> Iterator[bytes]:
        """Up to ``limit`` bytes from the current position, streamed. With ``last``, the
        source is read to EOF before the final piece goes out, so a verifying source raises
        DigestMismatch while the request is still open and the registry commits nothing."""
        left = limit
        while left > 0:
            data = self.reader.read(min(CHUNK, left))
            if not data:
                return
            self.pos += len(data)
            left -= len(data)
            if left == 0 and last and self.reader.read(1):
                raise DigestMismatch("the upload source holds more bytes than its descriptor says")
            on_chunk(len(data))
            yield data
        if limit == 0 and last and self.reader.read(1):
            raise DigestMismatch("the upload source holds more bytes than its descriptor says")

    def close(self) -> None:
        if self._reopened:
            self.reader.close()


class _Interrupted(Exception):
    """An upload request that failed in a way worth resuming or restarting."""


class BlobUpload:
    """One blob's upload session: start, send (monolithic or chunked), commit, recover."""

    def __init__(self, client: RegistryClient, repository: str, desc: Descriptor,
                 reader: BinaryIO, *, chunk_size: int | None = None, reopen: Reopen | None = None,
                 on_bytes: BytesHook | None = None):
        self.client = client
        self.repository = repository
        self.desc = desc
        self.source = _Source(reader, reopen)
        self.chunk_size = chunk_size
        self.on_bytes = on_bytes
        self.scopes = push_scopes(repository)
        self.location: str | None = None
        self.offset = 0
        self.min_chunk = 0

    def run(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    if self.location is None:
                        self._start()
                    self._send_rest()
                    return
                except _Interrupted as e:
                    failures += 1
                    if failures > self.client.options.max_retries:
                        raise RegistryError(
                            f"registry {self.client.host}: upload of {self.desc.digest} to "
                            f"{self.repository} failed {failures} times: {e}") from None
                    self.client._sleep(failures - 1, None)
                    self._recover(str(e))
        except BaseException:
            self._cancel()
            raise
        finally:
            self.source.close()

    def _action(self) -> str:
        return f"refused push to {self.repository}"

    def _start(self) -> None:
        path = f"/v2/{self.repository}/blobs/uploads/"
        response = self._request("POST", path, content=b"", replay=True)
        if response.status_code != 202:
            raise self.client.error(response, self._action())
        self._take_location(response)
        self.offset = 0
        self.source.go_to(0)
        minimum = response.headers.get("oci-chunk-min-length")
        if minimum and minimum.isdigit():
            self.min_chunk = int(minimum)
            if self.chunk_size:
                self.chunk_size = max(self.chunk_size, self.min_chunk)

    def _take_location(self, response: httpx.Response) -> None:
        location = response.headers.get("location")
        if not location:
            raise RegistryError(f"registry {self.client.host}: upload answer has no Location",
                                response.status_code)
        self.location = str(response.url.join(location))

    def _request(self, method: str, url: str, *, content, headers=None, params=None,
                 replay: bool = False) -> httpx.Response:
        try:
            response = self.client.send(method, url, scopes=self.scopes, headers=headers,
                                        params=params, content=content, retry=replay)
        except TransportFailure as e:
            raise _Interrupted(str(e)) from e
        except (httpx.TransportError, httpx.StreamError) as e:
            raise _Interrupted(str(e) or type(e).__name__) from e
        if response.status_code in RETRY_STATUSES:
            raise _Interrupted(f"HTTP {response.status_code}")
        return response

    def _count(self, n: int) -> None:
        self.client.stats.add(bytes_uploaded=n)
        if self.on_bytes:
            self.on_bytes(self.desc, n)

    def _send_rest(self) -> None:
        """Send everything from ``self.offset`` and commit."""
        assert self.location is not None
        size = self.desc.size
        if self.chunk_size:
            while self.offset < size:
                n = min(self.chunk_size, size - self.offset)
                end = self.offset + n - 1
                response = self._request(
                    "PATCH", self.location,
                    content=self.source.chunks(n, self._count, last=end + 1 == size),
                    headers={"Content-Type": "application/octet-stream",
                             "Content-Range": f"{self.offset}-{end}",
                             "Content-Length": str(n)})
                if response.status_code != 202:
                    raise self.client.error(response, self._action())
                self._take_location(response)
                self.offset = end + 1
            body, length = b"", 0
        else:
            length = size - self.offset
            body = self.source.chunks(length, self._count, last=True)
            if length <= SMALL_BODY:
                # Headers and a small body in one write: a streamed body goes out in a second
                # segment that Nagle + delayed ACK hold back ~40 ms per blob.
                body = b"".join(body)
        url = str(httpx.URL(self.location).copy_merge_params({"digest": self.desc.digest}))
        response = self._request("PUT", url, content=body,
                                 headers={"Content-Type": "application/octet-stream",
                                          "Content-Length": str(length)})
        if response.status_code == 413 and not self.chunk_size:
            # The registry (or a proxy before it) caps request bodies: go chunked.
            self.chunk_size = max(self.min_chunk, FALLBACK_CHUNK_SIZE)
            raise _Interrupted("HTTP 413: request body too large, switching to chunked upload")
        if response.status_code != 201:
            raise self.client.error(response, self._action())
        got = response.headers.get("docker-content-digest")
        if got and got != self.desc.digest:
            raise RegistryError(f"registry {self.client.host} stored {got} for {self.desc.digest}",
                                201, "DIGEST_INVALID")
        self.location = None
        self.client.stats.add(blobs_uploaded=1)

    def _recover(self, reason: str) -> None:
        """After an interruption: continue from the registry's offset, else restart."""
        offset = self._registry_offset()
        if offset is not None and offset <= self.desc.size:
            try:
                self.source.go_to(offset)
            except OcibridgeError:
                offset = None
            else:
                self.offset = offset
                self.client.stats.add(upload_resumes=1)
                return
        if not self.source.can_rewind() and self.source.pos > 0:
            raise RegistryError(
                f"registry {self.client.host}: upload of {self.desc.digest} to {self.repository} "
                f"was interrupted ({reason}) and its source cannot be read again")
        self._cancel()
        self.client.stats.add(upload_restarts=1)
        self.location = None  # _start() opens a new session and rewinds the source

    def _registry_offset(self) -> int | None:
        """How many bytes the registry holds for this session (GET on the upload URL)."""
        if self.location is None:
            return None
        try:
            response = self.client.send("GET", self.location, scopes=self.scopes)
        except RegistryError:
            return None
        if response.status_code != 204:
            return None
        m = re.match(r"^(?:bytes=)?0-(\d+)$", response.headers.get("range", "").strip())
        if not m:
            return None
        end = int(m.group(1))
        self._take_location(response)
        # Distribution answers "0-0" for both 0 and 1 bytes; 0 is the safe reading.
        return 0 if end == 0 else end + 1

    def _cancel(self) -> None:
        """Best effort: tell the registry to drop an unfinished session."""
        if self.location is None:
            return
        with contextlib.suppress(RegistryError, httpx.HTTPError):
            self.client.send("DELETE", self.location, scopes=self.scopes, retry=False)
        self.location = None


class StreamingIngest(BlobUpload):
    """An upload whose digest is learnt while sending: POST, one streaming PATCH that hashes
    every byte on its way out, then PUT ``?digest=`` with what was computed. A new file is
    thus read once for both its digest and its upload. When interrupted it starts over from
    ``reopen()`` (a streamed PATCH cut mid-body invalidates the session in distribution 2.8)."""

    def __init__(self, client: RegistryClient, repository: str, reader: BinaryIO, *,
                 reopen: Reopen | None = None, on_bytes: BytesHook | None = None):
        placeholder = Descriptor(mediaType="application/octet-stream", digest="sha256:" + "0" * 64, size=0)
        super().__init__(client, repository, placeholder, reader, reopen=reopen, on_bytes=on_bytes)
        self.result: tuple[str, int] | None = None

    def _stream(self, hasher, counter: list[int]) -> Iterator[bytes]:
        while data := self.source.reader.read(CHUNK):
            hasher.update(data)
            counter[0] += len(data)
            self.source.pos += len(data)
            self._count(len(data))
            yield data

    def _send_rest(self) -> None:
        import hashlib

        assert self.location is not None
        hasher = hashlib.sha256()
        counter = [0]
        response = self._request("PATCH", self.location, content=self._stream(hasher, counter),
                                 headers={"Content-Type": "application/octet-stream"})
        if response.status_code != 202:
            raise self.client.error(response, self._action())
        self._take_location(response)
        digest = "sha256:" + hasher.hexdigest()
        url = str(httpx.URL(self.location).copy_merge_params({"digest": digest}))
        response = self._request("PUT", url, content=b"", headers={"Content-Length": "0"})
        if response.status_code != 201:
            raise self.client.error(response, self._action())
        got = response.headers.get("docker-content-digest")
        if got and got != digest:
            raise RegistryError(f"registry {self.client.host} stored {got} for {digest}", 201, "DIGEST_INVALID")
        self.location = None
        self.client.stats.add(blobs_uploaded=1)
        self.result = (digest, counter[0])

    def _recover(self, reason: str) -> None:
        if self.source.reopen is None and self.source.pos > 0:
            raise RegistryError(
                f"registry {self.client.host}: streaming upload to {self.repository} was interrupted "
                f"({reason}) and its source cannot be read again")
        self._cancel()
        self.client.stats.add(upload_restarts=1)
        self.location = None
        if self.source.pos > 0:
            self.source.go_to(0)

    def ingest(self) -> tuple[str, int]:
        self.run()
        assert self.result is not None
        return self.result
