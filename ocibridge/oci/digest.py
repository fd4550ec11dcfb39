"""Digests: validation, hashing while streaming, and readers that refuse bad content.

Only sha256 is written; sha512 is accepted where content arrives with it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.streams import CHUNK as CHUNK  # re-exported: where the OCI code has always found it
from ocibridge.core.streams import Reader, close_reader
from ocibridge.errors import DigestMismatch, OcibridgeError, passes

_ALGORITHMS = {"sha256": 64, "sha512": 128}
_DIGEST_RE = re.compile(r"^(sha256|sha512):([a-f0-9]+)\Z")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class Hasher(Protocol):
    """What hashlib's objects offer (hashlib names no public type for them)."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


def check_digest(digest: str) -> str:
    """Return ``digest`` if well formed (``sha256:<64 hex>``), else raise."""
    m = _DIGEST_RE.match(digest)
    if not m or len(m.group(2)) != _ALGORITHMS[m.group(1)]:
        raise OcibridgeError(f"invalid digest {digest!r}")
    return digest


def is_digest(value: str) -> bool:
    return passes(check_digest, value)


def is_sha256_hex(text: str) -> bool:
    """Whether ``text`` is exactly 64 lowercase hex digits: a SHA-256 that names a file (a
    blob, a chunk, a table entry), so nothing else (a trailing newline, ``..``) becomes a path."""
    return _SHA256_HEX.fullmatch(text) is not None


def split_digest(digest: str) -> tuple[str, str]:
    algorithm, _, hexpart = check_digest(digest).partition(":")
    return algorithm, hexpart


def new_hasher(digest: str = "sha256:") -> hashlib._Hash:
    return hashlib.new(digest.partition(":")[0] or "sha256")


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> tuple[str, int]:
    """Digest and size of a file, reading it once in constant memory."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def sha256_chunks(chunks: Iterable[bytes]) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    for chunk in chunks:
        h.update(chunk)
        size += len(chunk)
    return "sha256:" + h.hexdigest(), size


class HashingReader(ClosesOnExit):
    """Wraps a readable stream and hashes what passes through; counts bytes.

    With ``hasher``, ``raw`` is a source that has updated that hasher with every byte by the
    time it hands the byte out (a registry download hashes on a thread of its own, overlapping
    the caller's writing); this reader then only counts."""

    def __init__(self, raw: Reader, algorithm: str = "sha256", hasher: Hasher | None = None):
        self._raw = raw
        self._hashes = hasher is None
        self._hasher = hashlib.new(algorithm) if hasher is None else hasher
        self._algorithm = algorithm
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            if self._hashes:
                self._hasher.update(data)
            self.size += len(data)
        return data

    @property
    def digest(self) -> str:
        return f"{self._algorithm}:{self._hasher.hexdigest()}"

    def close(self) -> None:
        close_reader(self._raw)


class VerifyingReader(HashingReader):
    """A reader that raises :class:`DigestMismatch` at EOF (or on overflow) unless the content
    matches the expected digest and size. Consumers that write to a temporary name and rename
    only after reading to EOF therefore never publish unverified bytes."""

    def __init__(self, raw: Reader, digest: str, size: int | None, what: str = "blob",
                 hasher: Hasher | None = None):
        algorithm, _ = split_digest(digest)
        super().__init__(raw, algorithm, hasher)
        self.expected_digest = digest
        self.expected_size = size
        self.what = what
        self.verified = False

    def read(self, n: int = -1) -> bytes:
        data = super().read(n)
        if self.expected_size is not None and self.size > self.expected_size:
            raise DigestMismatch(
                f"{self.what} {self.expected_digest}: more than the expected {self.expected_size} bytes"
            )
        if not data and (n != 0):
            self.verify()
        return data

    def verify(self) -> None:
        if self.verified:
            return
        if self.expected_size is not None and self.size != self.expected_size:
            raise DigestMismatch(
                f"{self.what} {self.expected_digest}: got {self.size} bytes, expected {self.expected_size}"
            )
        if self.digest != self.expected_digest:
            raise DigestMismatch(
                f"{self.what} {self.expected_digest}: content has digest {self.digest}"
            )
        self.verified = True


def verified(reader: Reader, digest: str, size: int | None, what: str = "blob") -> VerifyingReader:
    """``reader`` itself when it already verifies this digest and size (a source that checks
    its own content, such as a carton entry against MANIFEST), else a verifying wrapper — so a
    byte is hashed once per copy, not once per layer of the stack."""
    if (
        isinstance(reader, VerifyingReader)
        and reader.expected_digest == digest
        and reader.expected_size in (None, size)
        and reader.size == 0
    ):
        return reader
    return VerifyingReader(reader, digest, size, what)


def verify_bytes(data: bytes, digest: str, size: int | None = None, what: str = "content") -> bytes:
    """Check small content (manifests, configs) against its descriptor; return it."""
    if size is not None and len(data) != size:
        raise DigestMismatch(f"{what} {digest}: got {len(data)} bytes, expected {size}")
    algorithm, hexpart = split_digest(digest)
    if hashlib.new(algorithm, data).hexdigest() != hexpart:
        raise DigestMismatch(f"{what} {digest}: content does not match its digest")
    return data
