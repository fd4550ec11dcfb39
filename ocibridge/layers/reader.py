"""The one layer reader: a layer's content as a verified, bounded, decompressed stream.

Pull into a directory, the carton and mlarchive exports, validation, diffIds and the
Kubernetes image tools all read layers through here, so the bomb limit and the verification
at EOF are written once. Also what a layer says of itself: the model path it carries and its
file mode.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import sys
import tarfile
import zlib
from collections.abc import Iterator

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.environment import MAX_EXPANSION_RATIO as ENV_EXPANSION_RATIO
from ocibridge.core.limits import env_limit
from ocibridge.core.streams import ClosableReader, Reader, close_reader, gunzip, unzstd
from ocibridge.errors import OcibridgeError, SourceError, TooLarge
from ocibridge.layers.tarwalk import MAX_TAR_ENTRIES as MAX_TAR_ENTRIES
from ocibridge.oci.digest import CHUNK, verified
from ocibridge.oci.layerinfo import layer_mode, layer_path
from ocibridge.oci.mediatypes import Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore, VerifiedFile

#: A compressed layer may not put out more than this many times the compressed bytes it has
#: consumed so far, plus EXPANSION_FLOOR: measured as the decoder runs, the size a descriptor
#: declares is never trusted. The cap on a tar layer's entries is tarwalk's
#: (re-exported here).
MAX_EXPANSION_RATIO = 1000
EXPANSION_FLOOR = 64 << 20

__all__ = [
    "EXPANSION_FLOOR", "MAX_EXPANSION_RATIO", "MAX_TAR_ENTRIES", "Bounded", "CountingReader", "LayerReader",
    "compression_of", "decompressed",
    "UnreadableLayer", "layer_mode", "layer_path", "layer_stream", "open_layer", "readable_layer",
    "uncompressed_digest",
]

_BY_VARIANT = {Variant.TAR_GZIP: "gzip", Variant.TAR_ZSTD: "zstd"}


def compression_of(media_type: str) -> str | None:
    """``gzip``, ``zstd`` or None, for a model layer (by its variant) or an image layer
    (``…tar+gzip``, Docker's ``…tar.gzip``)."""
    kind = parse_layer_media_type(media_type)
    if kind is not None:
        return _BY_VARIANT.get(kind.variant)
    base = media_type.split(";", 1)[0].strip()
    for name in ("gzip", "zstd"):
        if base.endswith((f"+{name}", f".{name}")):
            return name
    return None


class CountingReader:
    """Counts the bytes a decoder actually takes from ``raw``."""

    def __init__(self, raw: Reader):
        self._raw, self.count = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        return data


def expansion_ratio() -> int:
    """The bomb ratio, raised with ``$OCIBRIDGE_MAX_EXPANSION_RATIO`` for genuinely sparse layers."""
    return env_limit(ENV_EXPANSION_RATIO, MAX_EXPANSION_RATIO)


class Bounded:
    """Stops a decompression bomb as it goes off: once the decoded bytes exceed ``ratio`` times
    the compressed bytes ``consumed`` has counted, plus ``floor``. A read asks the decoder for at
    most CHUNK bytes at a time, so the check runs at least every CHUNK bytes of output."""

    def __init__(self, raw: Reader, consumed: CountingReader, ratio: int | None = None,
                 floor: int = EXPANSION_FLOOR):
        self._raw, self._consumed, self.count = raw, consumed, 0
        self._ratio = expansion_ratio() if ratio is None else ratio
        self._floor = floor

    def limit(self) -> int:
        """What may have come out, given what went in so far."""
        return self._consumed.count * self._ratio + self._floor

    def read(self, n: int = -1) -> bytes:
        if 0 <= n <= CHUNK:
            return self._step(n)
        parts: list[bytes] = []
        want = n
        while want != 0 and (data := self._step(CHUNK if want < 0 else min(want, CHUNK))):
            parts.append(data)
            want = want - len(data) if want > 0 else want
        return b"".join(parts)

    def _step(self, n: int) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        if self.count > self.limit():
            raise TooLarge(
                f"layer expands to more than {self._ratio} times its {self._consumed.count} compressed bytes "
                f"read so far: refusing (bomb limit; raise ${ENV_EXPANSION_RATIO} if it is genuine)")
        return data


def decompressed(reader: Reader, compression: str | None) -> Reader:
    """``reader`` decoded (gzip, zstd) within the bomb limit, which counts the compressed bytes
    really read from ``reader`` (not what any descriptor says of them)."""
    if compression is None:
        return reader
    counted = CountingReader(reader)
    stream = gunzip(counted) if compression == "gzip" else unzstd(counted)
    return Bounded(stream, counted)


class LayerReader(ClosesOnExit):
    """A layer's decoded bytes. At their end the blob itself is read to its end, where its
    verifying reader checks the digest: a layer read to EOF has been verified."""

    def __init__(self, blob: ClosableReader, compression: str | None):
        self.blob = blob
        self._stream = decompressed(blob, compression)

    def read(self, n: int = -1) -> bytes:
        data = self._stream.read(n)
        if not data and n != 0:
            while self.blob.read(CHUNK):  # trailing padding, the gzip trailer...: to EOF
                pass
        return data

    def close(self) -> None:
        close_reader(self.blob)


#: ``compression=`` of :func:`open_layer`: as the layer's media type says (:func:`compression_of`).
BY_MEDIA_TYPE = "by media type"


def layer_stream(blob: ClosableReader, desc: Descriptor, compression: str | None = BY_MEDIA_TYPE) -> LayerReader:
    """The decoded content of the layer ``desc`` from its opened ``blob`` (verified at EOF
    when ``blob`` is not already a verifying reader of this digest)."""
    if not isinstance(blob, VerifiedFile):
        blob = verified(blob, desc.digest, desc.size, what="layer")
    if compression == BY_MEDIA_TYPE:
        compression = compression_of(desc.mediaType)
    return LayerReader(blob, compression)


def open_layer(store: ReadableStore, desc: Descriptor, compression: str | None = BY_MEDIA_TYPE) -> LayerReader:
    """The layer ``desc`` of ``store``: decoded, bounded against bombs, verified at EOF.
    ``compression`` (``gzip``, ``zstd``, None) overrides what the media type says, for a
    reader that decodes as some runtime does (by its own table of types)."""
    return layer_stream(store.open_blob(desc), desc, compression)


def uncompressed_digest(store: ReadableStore, desc: Descriptor) -> str:
    """sha256 of the layer's decoded bytes (its diffId), reading the blob once, to its end."""
    h = hashlib.sha256()
    with open_layer(store, desc) as stream:
        while chunk := stream.read(CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


@contextlib.contextmanager
def readable_layer(desc: Descriptor, what: str = "layer",
                   error: type[OcibridgeError] | None = None) -> Iterator[None]:
    """A layer that does not decode (gzip, zstd) or is not a tar becomes one ``error`` naming
    it, not an error of the tar, zlib or zstd module (which the CLI could only report as
    unexpected)."""
    try:
        yield
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _unreadable(desc, what, error, e) from None
    except Exception as e:
        zstandard = sys.modules.get("zstandard")  # loaded only once a zstd layer was opened
        if zstandard is None or not isinstance(e, zstandard.ZstdError):
            raise
        raise _unreadable(desc, what, error, e) from None


class UnreadableLayer(SourceError):
    """A layer that does not decode or is not a tar; ``cause`` is what the decoder said, for
    callers (k8s check) that name the layer their own way."""

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


def _unreadable(desc: Descriptor, what: str, error: type[OcibridgeError] | None, e: Exception) -> OcibridgeError:
    message = f"{what} {desc.digest} is not a readable tar ({e})"
    return UnreadableLayer(message, str(e)) if error is None else error(message)
