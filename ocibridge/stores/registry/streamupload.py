"""An upload whose digest is learnt while sending (:class:`StreamingIngest`): a new file read
once for both its digest and its upload, on the resumable machinery of :mod:`.upload`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import httpx

from ocibridge.core import interrupt
from ocibridge.core.streams import Batched
from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import errcodes
from ocibridge.stores.registry.blobstream import BytesHook
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.sendviews import chunked_body
from ocibridge.stores.registry.upload import BlobUpload
from ocibridge.stores.registry.uploadsource import Reopen
from ocibridge.stores.registry.uploadstate import UploadState


class StreamingIngest(BlobUpload):
    """An upload whose digest is learnt while sending: POST, PATCH that hashes every byte on
    its way out, then PUT ``?digest=`` with what was computed. A new file is thus read once for
    both its digest and its upload. Of a source of unknown or small ``size`` one streaming
    PATCH; interrupted, it starts over from ``reopen()`` (a PATCH cut mid-body invalidates the
    session in distribution 2.8); a :class:`.streams.Batched` source's batches are hashed in
    place and go out as they are (:mod:`.sendviews`). Of a large one PATCH chunks, so that a
    session the registry kept continues: the hash is rebuilt by reading the source's prefix
    again (a local read, cheap next to sending), and the registry checks the final digest
    against what it holds."""

    def __init__(self, client: RegistryClient, repository: str, reader: BinaryIO, *,
                 reopen: Reopen | None = None, on_bytes: BytesHook | None = None,
                 size: int | None = None, chunk_size: int | None = None,
                 state: UploadState | None = None, name: str | None = None):
        """``name``: what a notice calls the upload (the file it reads), its digest unknown."""
        self._label = name or "an upload"  # before the base class, which may name it already
        placeholder = Descriptor(mediaType="application/octet-stream", digest="sha256:" + "0" * 64,
                                 size=size or 0)
        super().__init__(client, repository, placeholder, reader, reopen=reopen, on_bytes=on_bytes,
                         chunk_size=chunk_size if size else None, chunked=bool(size), state=state)
        self.size = size
        self.result: tuple[str, int] | None = None
        self._hasher = hashlib.sha256()

    def _name(self) -> str:
        return self._label  # its digest is not known yet

    def _known_digest(self) -> str | None:
        return None  # learnt while sending: a restart sends it again

    def _resume_at(self, offset: int) -> bool:
        """Continue at ``offset``: the source from byte 0 again, its first ``offset`` bytes
        hashed (not sent)."""
        if offset and self.clock is None:
            return False  # one streamed PATCH: a part of it is no resumable state
        try:
            self.source.go_to(0)
        except OcibridgeError:
            return False
        hasher = hashlib.sha256()
        left = offset
        while left:
            interrupt.check()
            data = self.source.reader.read(min(CHUNK, left))
            if not data:
                return False  # the source is shorter now: start over
            hasher.update(data)
            self.source.pos += len(data)
            left -= len(data)
        self._hasher = hasher
        self.offset = offset
        return True

    def _stream(self, counter: list[int]) -> Iterator[bytes]:
        reader = self.source.reader
        if isinstance(reader, Batched):  # its own buffers, hashed in place and sent as they are
            yield from chunked_body(self._hashed(reader.batches(), counter), self.client.rate_limit,
                                    straight=not self.client.options.layers)
            return
        while data := self.source.reader.read(CHUNK):
            interrupt.check()
            self._hasher.update(data)
            counter[0] += len(data)
            self.source.pos += len(data)
            self._count(len(data))
            yield data

    def _hashed(self, batches: Iterator[Sequence[memoryview]], counter: list[int]) -> Iterator[Sequence[memoryview]]:
        for batch in batches:
            interrupt.check()
            size = 0
            for view in batch:
                self._hasher.update(view)
                size += len(view)
            counter[0] += size
            self.source.pos += size
            self._count(size)
            yield batch

    def _hashing(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for data in chunks:
            self._hasher.update(data)
            yield data

    def _one_pass_allowed(self) -> bool:
        """Whether the digest can be learnt while sending: the registry takes PATCH, and a
        body of unknown size (one streamed PATCH) is not held to a cap."""
        policy = self.policy
        return policy.chunked_allowed and (policy.max_body is None or (self.clock is not None and bool(self.size)))

    def _hash_first(self) -> None:
        """Read the source once for its digest, ask whether the registry holds it, then upload
        it as a blob of known digest, in the form the registry takes (one PUT where it refuses
        PATCH)."""
        if not self.source.can_rewind():
            raise RegistryError(f"registry {self.client.host} takes no streamed (PATCH) upload "
                                f"of unknown digest, and this source cannot be read twice")
        self.source.go_to(0)
        hasher, total = hashlib.sha256(), 0
        while data := self.source.reader.read(CHUNK):
            interrupt.check()
            hasher.update(data)
            total += len(data)
        self.source.pos = total
        self.source.go_to(0)
        self.offset = 0
        digest = "sha256:" + hasher.hexdigest()
        self.desc = Descriptor(mediaType="application/octet-stream", digest=digest, size=total)
        self.size = total
        if self._holds(digest, total):  # the digest is known before any byte goes: ask
            self._cancel()  # the session opened for it is dropped; nothing is sent
            self.result = (digest, total)
            return
        self._fit_policy(total)
        BlobUpload._send_rest(self)
        self.result = (digest, total)

    def _send_rest(self) -> None:
        assert self.location is not None
        if self.result is None and not self._one_pass_allowed():
            self._hash_first()
            return
        if self.clock is not None and self.size:
            self._send_chunks(self.size, self._hashing)
            total = self.size
        else:
            counter = [0]
            response = self._request("PATCH", self.location, content=self._stream(counter),
                                     headers={"Content-Type": "application/octet-stream"})
            if response.status_code != 202:
                self._refused_form(response, counter[0], patch=True)
                raise self.client.error(response, self._action())
            self._take_location(response)
            total = counter[0]
        digest = "sha256:" + self._hasher.hexdigest()
        url = str(httpx.URL(self.location).copy_merge_params({"digest": digest}))
        response = self._request("PUT", url, content=b"", headers={"Content-Length": "0"})
        if response.status_code != 201:
            raise self.client.error(response, self._action())
        got = response.headers.get("docker-content-digest")
        if got and got != digest:
            raise RegistryError(f"registry {self.client.host} stored {got} for {digest}", 201, errcodes.DIGEST_INVALID)
        self._done()
        self.client.stats.add(blobs_uploaded=1)
        self.result = (digest, total)

    def _recover(self, reason: str) -> None:
        if self.clock is not None:
            super()._recover(reason)  # the registry's offset, else a new session
            return
        self._start_over(f"streaming upload to {self.repository}", reason)

    def ingest(self) -> tuple[str, int]:
        self.run()
        assert self.result is not None
        return self.result
