"""Blob uploads: one PUT for a small source, PATCH chunks for a large one, resumable.

Each chunk the registry answered is durable there; when interrupted an upload asks the
registry how far it got (GET on the upload URL) and continues from there, or restarts cleanly
when the registry lost the session. With an :class:`UploadState` the session URL and offset
outlive the process, so the same push run again after ``kill -9`` continues too. An upload
whose digest is learnt while sending is ingest.py's; downloads are in download.py.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import BinaryIO

import httpx

from ocibridge.core import interrupt, notices
from ocibridge.core.httpheaders import header_int
from ocibridge.core.streams import can_seek
from ocibridge.core.terminal import human_size
from ocibridge.errors import DigestMismatch, OcibridgeError, RegistryError
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import errcodes, uploadrange
from ocibridge.stores.registry.blobstream import BytesHook
from ocibridge.stores.registry.chunkclock import ChunkClock
from ocibridge.stores.registry.client import RETRY_STATUSES, RegistryClient, TransportFailure, retry_after_seconds
from ocibridge.stores.registry.uploadpolicy import CONTENT_CODES
from ocibridge.stores.registry.uploadsource import Reopen, UploadSource
from ocibridge.stores.registry.uploadstate import UploadState

log = logging.getLogger("ocibridge.http")
#: 401 answers mid-upload taken as an expired token (more: the credentials are refused)
MAX_RENEWALS = 8

#: Bodies up to this size are sent in one piece rather than streamed.
SMALL_BODY = 256 * 1024

#: Blobs of at least this size go up as PATCH chunks sized by time (chunkclock.py; unless a
#: chunk size was set), with the session kept across runs: a killed push loses at most the
#: chunk in flight (when the registry keeps the session; see docs/transfers.md). Smaller
#: blobs keep the fewer requests of one streamed body.
RESUMABLE_MIN = 64 * 1024 * 1024


def resumable(size: int, reader: BinaryIO, reopen: Reopen | None) -> bool:
    """Whether an upload goes as chunks kept for a later run: a large one whose source can be
    read again. One read once (a relay's, as it arrives) goes as one PUT: chunks would buy a
    resume it cannot make, and cost the registry a session reopened per chunk and the sender a
    copy of each piece into the chunked framing. (A registry known to cap bodies gets chunks under
    its cap all the same: :class:`BlobUpload`'s host policy.)"""
    return size >= RESUMABLE_MIN and (reopen is not None or can_seek(reader))


def push_scopes(repository: str) -> tuple[str, ...]:
    return (f"repository:{repository}:pull,push",)


class _EndChunk(Exception):
    """A streamed chunk ends here (an interrupt): what was sent is the whole request."""


class _Interrupted(Exception):
    """An upload request that failed in a way worth resuming or restarting; ``retry_after``
    is the wait the registry asked for (Retry-After), if it named one. ``adapted``: the
    upload changed form after a refusal of that form (not counted as a failure)."""

    def __init__(self, reason: str, retry_after: float | None = None, adapted: bool = False):
        super().__init__(reason)
        self.retry_after = retry_after
        self.adapted = adapted


#: A refusal of the upload's form, not of its content (see uploadpolicy.py): the form changes.
FORM_REFUSALS = frozenset({400, 405, 413, 416, 501})
#: How many form changes one upload may make (halving a chunk from 1 GiB to 256 KiB: 12).
MAX_ADAPTATIONS = 16


class BlobUpload:
    """One blob's upload session: start, send (monolithic or chunked), commit, recover.

    Chunked (``chunked``, or a ``chunk_size``): PATCH chunks of ``chunk_size`` bytes, else of
    the sizes :class:`ChunkClock` picks from the rate; else one streamed PUT."""

    def __init__(self, client: RegistryClient, repository: str, desc: Descriptor,
                 reader: BinaryIO, *, chunk_size: int | None = None, chunked: bool = False,
                 reopen: Reopen | None = None, on_bytes: BytesHook | None = None,
                 state: UploadState | None = None, session: str | None = None):
        self.client = client
        self.repository = repository
        self.desc = desc
        self.source = UploadSource(reader, reopen)
        self.chunk_size = chunk_size
        self.policy = client.uploads
        #: the chunks' sizes and timing; None: one request
        self.clock = ChunkClock(chunk_size) if chunked or chunk_size else None
        self._fit_policy(desc.size)
        self.on_bytes = on_bytes
        self.scopes = push_scopes(repository)
        #: the upload session's URL; ``session``: one already open (a mount's 202 answer)
        self.location: str | None = session
        self.offset = 0
        self.min_chunk = 0
        #: where the session is kept for a later run (None: this run only)
        self.state = state
        self._renewals = 0  # tokens renewed after a 401 mid-upload
        #: the registry holds the blob although no commit was answered (a PUT whose answer was lost)
        self.landed = False

    def _fit_policy(self, size: int | None) -> None:
        """The form the host takes: one PUT where it refuses PATCH, chunks under its cap."""
        policy = self.policy
        if not policy.chunked_allowed:
            if self.clock is not None:
                log.info("%s: one PUT for %s (the registry takes no chunks)", self.client.host, self._name())
            self.clock = None
            if size is not None and not policy.fits_one_request(size):
                raise policy.cannot_fit(size, self._name())
            return
        if policy.max_body is None:
            return
        if self.clock is None and (size is None or not policy.fits_one_request(size)):
            self.clock = ChunkClock(policy.max_body)
        if self.clock is not None:
            self.clock.cap = policy.max_body

    def _refused_form(self, response: httpx.Response, body: int, patch: bool) -> None:
        """A PATCH or a PUT with a body was refused: when for its form (PATCH itself, the
        body's size), change form and ask again (_Interrupted); else return."""
        status = response.status_code
        if status not in FORM_REFUSALS:
            return
        code = self.client.error(response, self._action()).code
        if code in CONTENT_CODES:
            return
        if status == 413 or (not patch and status in (400, 416)):
            if not self.policy.chunked_allowed:
                raise self.policy.cannot_fit(self.desc.size or body, self._name())
            size = self.policy.body_refused(body)
            self.chunk_size = size
            self.clock = ChunkClock(max(self.min_chunk, size), self.min_chunk)
            self.clock.cap = size
            raise _Interrupted(f"HTTP {status}: a body of {body} bytes refused, chunks of {size}", adapted=True)
        if patch and (status in (405, 501) or code == errcodes.UNSUPPORTED):
            self.policy.no_chunks()
            self.clock = None
            raise _Interrupted(f"HTTP {status}: chunked upload refused, one PUT instead", adapted=True)
        if status == 416:
            raise _Interrupted("HTTP 416: the registry holds another offset")

    def run(self) -> None:
        failures = adaptations = 0
        try:
            if self.location is not None:
                self._saved()  # a session given: kept as one this upload opened
            else:
                self._continue_saved()
            while not self.landed:
                try:
                    if self.location is None:
                        self._start()
                    self._send_rest()
                    return
                except _Interrupted as e:
                    if e.adapted and adaptations < MAX_ADAPTATIONS:
                        adaptations += 1
                        self._recover(str(e))
                        continue
                    failures += 1
                    if failures > self.client.options.max_retries:
                        raise RegistryError(
                            f"registry {self.client.host}: upload of {self.desc.digest} to "
                            f"{self.repository} failed {failures} times: {e}") from None
                    self.client._sleep(failures - 1, e.retry_after)
                    self._recover(str(e))
        except KeyboardInterrupt:
            raise  # interrupted: no DELETE (the session stays for the next run, or expires)
        except BaseException:
            self._cancel()
            raise
        finally:
            self.source.close()
            if self.state is not None:
                self.state.close()

    def _continue_saved(self) -> None:
        """Pick up the session an earlier run left (its URL persisted), at the offset the
        registry reports; a session the registry dropped is forgotten (a new one starts)."""
        if self.state is None or self.state.location is None:
            return
        self.location = self.state.location
        offset = self._registry_offset()
        if offset is not None and offset <= self.desc.size and self._resume_at(offset):
            self.client.stats.add(upload_resumes=1, bytes_resumed=offset)
            if offset:
                notices.say(f"resumed {self._name()} at {100 * offset // max(1, self.desc.size)}%"
                            f" ({human_size(offset)} already on {self.client.host})")
            return
        self.location = None
        self.state.forget()

    def _name(self) -> str:
        """What a notice calls this upload: its digest."""
        return self.desc.digest

    def _resume_at(self, offset: int) -> bool:
        """Make the source continue at ``offset``; False when it cannot."""
        try:
            self.source.go_to(offset)
        except OcibridgeError:
            return False
        self.offset = offset
        return True

    def _saved(self) -> None:
        """The registry confirmed ``self.offset`` bytes of the session: keep that for later."""
        if self.state is not None and self.location is not None:
            self.state.save(self.location, self.offset)

    def _done(self) -> None:
        self.location = None
        if self.state is not None:
            self.state.forget()

    def _action(self) -> str:
        return f"refused writing to {self.repository}"

    def _start(self) -> None:
        path = f"/v2/{self.repository}/blobs/uploads/"
        response = self._request("POST", path, content=b"", replay=True)
        if response.status_code != 202:
            raise self.client.error(response, self._action())
        self._take_location(response)
        if not self._resume_at(0):
            raise OcibridgeError("the upload source cannot be read again")
        self._saved()
        minimum = header_int(response.headers.get("oci-chunk-min-length"))
        if minimum:
            self.min_chunk = minimum
            if self.clock is not None:  # a short streamed chunk could be refused: the spec's
                self.clock.require(minimum)

    def _take_location(self, response: httpx.Response) -> None:
        location = response.headers.get("location")
        if not location:
            raise RegistryError(f"registry {self.client.host}: upload answer has no Location",
                                response.status_code)
        self.location = str(response.url.join(location))

    def _request(self, method: str, url: str, *, content: bytes | Iterable[bytes],
                 headers: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None,
                 replay: bool = False) -> httpx.Response:
        try:
            response = self.client.send(method, url, scopes=self.scopes, headers=headers,
                                        params=params, content=content, retry=replay)
        except TransportFailure as e:
            raise _Interrupted(str(e)) from e
        except (httpx.TransportError, httpx.StreamError) as e:
            raise _Interrupted(str(e) or type(e).__name__) from e
        if response.status_code in RETRY_STATUSES:
            raise _Interrupted(f"HTTP {response.status_code}",
                               retry_after_seconds(response.headers.get("retry-after")))
        if response.status_code == 404 and method in ("PATCH", "PUT"):
            # BLOB_UPLOAD_UNKNOWN: the registry dropped the session (expired, or committed by a
            # request of ours whose answer was lost, as late as after our status GET): see
            # whether the blob is there, else start a new session
            raise _Interrupted("HTTP 404: the registry no longer knows the upload session")
        if response.status_code == 401 and not replay and self._renewals < MAX_RENEWALS:
            # A token that expired mid-upload (Docker Hub, GHCR: 5 minutes): the auth layer
            # learnt the challenge; ask again from the registry's offset with a new token.
            self._renewals += 1
            log.info("%s: 401 during the upload of %s: token renewed, going on from the registry's offset",
                     self.client.host, self._name())
            raise _Interrupted("HTTP 401: token expired", adapted=True)
        return response

    def _count(self, n: int) -> None:
        self.client.stats.add(bytes_uploaded=n)
        if self.on_bytes:
            self.on_bytes(self.desc, n)

    def _send_chunks(self, size: int, wrap: Callable[[Iterator[bytes]], Iterator[bytes]] | None = None) -> None:
        """PATCH chunks from ``self.offset`` up to ``size``, each one the registry confirmed
        saved for a later run; an interrupt ends the chunk in flight early or lets it finish
        when it can within the grace (see :meth:`_chunk_body`), then stops here.

        A chunk sized by the clock goes as a streamed body (chunked transfer encoding, no
        Content-Range: what docker push sends), which can end at any byte as a whole request;
        a fixed ``--chunk-size`` (or the registry's minimum) as the spec's Content-Range
        chunk."""
        clock = self.clock
        assert clock is not None and self.location is not None
        while self.offset < size:
            interrupt.check()
            n = clock.next_size(size - self.offset)
            end = self.offset + n - 1
            headers = {"Content-Type": "application/octet-stream"}
            if not clock.streamed:
                headers.update({"Content-Range": f"{self.offset}-{end}", "Content-Length": str(n)})
            with interrupt.finishable(clock) as flight:
                body = self._chunk_body(n, end + 1 == size, clock, flight)
                response = self._request("PATCH", self.location, headers=headers,
                                         content=wrap(body) if wrap else body)
            if response.status_code != 202:
                self._refused_form(response, n, patch=True)
                raise self.client.error(response, self._action())
            sent = clock.answered()
            self.policy.body_passed(sent)
            self._take_location(response)
            held = uploadrange.learn_style(self.policy, uploadrange.held(self.policy, response), self.offset + sent)
            if held is not None and held != self.offset + sent:
                raise _Interrupted(f"the registry holds {held} bytes, {self.offset + sent} were sent")
            self.offset += sent
            self._saved()
            if sent < n:  # ended early: by an interrupt, else the source is short
                interrupt.check()
                raise DigestMismatch(f"the upload source ended at byte {self.offset} of {size}")

    def _chunk_body(self, n: int, last: bool, clock: ChunkClock,
                    flight: interrupt.InFlight) -> Iterator[bytes]:
        """One chunk's bytes, timed: each piece counts as sent once the socket took it.

        After an interrupt that spared it, a streamed chunk ends at the next piece (the
        registry then holds a whole request, and its session stays valid); a Content-Range
        chunk goes on to its declared end; one not spared stops (Interrupted)."""
        clock.started(n)

        def check() -> None:
            if interrupt.CANCELLED.is_set() and flight.spared and clock.streamed:
                raise _EndChunk
            flight.check()

        # The body is first asked for once the request's headers are written: its socket is
        # this thread's last. Taken now, before the first piece is read (reading it, or its
        # rate wait, left a window where an interrupt found no socket to spare and cut the
        # PATCH after its headers: distribution then refuses the session).
        flight.bind()
        try:
            for data in self.source.chunks(n, self._count, last=last, check=check):
                yield data
                clock.sent(len(data))
        except _EndChunk:
            return

    def _send_rest(self) -> None:
        """Send everything from ``self.offset`` and commit."""
        assert self.location is not None
        size = self.desc.size
        if self.clock is not None:
            self._send_chunks(size)
            body: bytes | Iterator[bytes] = b""
            length = 0
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
        if response.status_code != 201 and length:
            self._refused_form(response, length, patch=False)
        if response.status_code != 201:
            raise self.client.error(response, self._action())
        self.policy.body_passed(length)
        got = response.headers.get("docker-content-digest")
        if got and got != self.desc.digest:
            raise RegistryError(f"registry {self.client.host} stored {got} for {self.desc.digest}",
                                201, errcodes.DIGEST_INVALID)
        self._done()
        self.client.stats.add(blobs_uploaded=1)

    def _recover(self, reason: str) -> None:
        """After an interruption: continue from the registry's offset; else, when the session
        is gone and the registry holds the blob (committed by a request whose answer was
        lost), done; else restart."""
        offset = self._registry_offset()
        if offset is not None and offset <= self.desc.size and self._resume_at(offset):
            self.client.stats.add(upload_resumes=1)
            return
        if offset is None and self._committed_meanwhile():
            self._done()
            self.landed = True
            self.client.stats.add(blobs_uploaded=1)
            return
        self._start_over(f"upload of {self.desc.digest} to {self.repository}", reason)

    def _start_over(self, what: str, reason: str) -> None:
        """Drop the session so ``_start()`` opens a new one and rewinds the source; refused
        when bytes already read cannot be read again."""
        if not self.source.can_rewind() and self.source.pos > 0:
            raise RegistryError(
                f"registry {self.client.host}: {what} was interrupted ({reason}) and its source "
                "cannot be read again")
        self._cancel()
        self.client.stats.add(upload_restarts=1)
        self.location = None

    def _committed_meanwhile(self) -> bool:
        """Whether the registry holds this blob now (one HEAD)."""
        digest = self._known_digest()
        return digest is not None and self._holds(digest, self.desc.size)

    def _holds(self, digest: str, size: int) -> bool:
        try:
            response = self.client.send("HEAD", f"/v2/{self.repository}/blobs/{digest}", scopes=self.scopes)
        except RegistryError:
            return False
        return response.status_code == 200 and header_int(response.headers.get("content-length")) in (None, size)

    def _known_digest(self) -> str | None:
        return self.desc.digest

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
        held = uploadrange.held(self.policy, response)
        if held is not None:
            self._take_location(response)
        return held

    def _cancel(self) -> None:
        """Best effort: tell the registry to drop an unfinished session."""
        if self.location is None:
            return
        with contextlib.suppress(RegistryError, httpx.HTTPError):
            self.client.send("DELETE", self.location, scopes=self.scopes, retry=False)
        self._done()

