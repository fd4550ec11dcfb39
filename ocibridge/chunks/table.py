"""The chunk table: SHA-256 of each fixed-size chunk of a raw layer, as one canonical JSON blob.

A byte range of a layer is checked by the digests of the chunks that cover it, so a lazy read
needs only those chunks; the table itself is one blob whose digest the model manifest names
(``ANNOTATION_DIGEST``), so the manifest digest binds every chunk digest. Format: docs/lazy.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import check_digest
from ocibridge.oci.models import Descriptor

#: media type of the table blob
TABLE_MEDIA_TYPE = "application/vnd.ocibridge.chunks.table.v1+json"
#: artifactType of the referrer manifest that holds the table (subject: the model manifest)
ARTIFACT_TYPE = "application/vnd.ocibridge.chunks.v1+json"
#: model-manifest annotations naming the table blob: what makes the manifest digest bind it
ANNOTATION_DIGEST = "io.ocibridge.chunks.digest"
ANNOTATION_SIZE = "io.ocibridge.chunks.size"

#: 1 MiB: reading one small tensor moves at most two chunks (the header's and the tensor's),
#: under 1 % of any layer from 256 MiB up; the table costs 67 bytes per MiB (0.006 %).
DEFAULT_CHUNK_SIZE = 1024 * 1024
#: ``ocibridge chunks REF`` (a table attached after the push, bound to nothing) covers raw layers
#: from 16 MiB, and a lazy read of a layer this large when the model has no table says it reads
#: it whole (a layer a table leaves out: from PUSH_THRESHOLD, below which a push leaves it out). Lower
#: than a push's on purpose: the command is asked for explicitly and changes no manifest digest.
DEFAULT_THRESHOLD = 16 * 1024 * 1024
#: every push binds tables of raw layers from 64 MiB (``push``, ``push --chunks``, the API's
#: ``push``; docs/lazy.md): a tensor read from a smaller file moves at
#: most that file; from 64 MiB a table cuts a small read to ~2 MiB (3 %, under 1 % from 256 MiB).
#: A model with no such file keeps the manifest digest it had before tables were the default.
PUSH_THRESHOLD = 64 * 1024 * 1024
MIN_CHUNK_SIZE = 64 * 1024
MAX_CHUNK_SIZE = 64 * 1024 * 1024
#: a table blob larger than this is refused before it is read (a 1 TiB model: ~70 MiB)
MAX_TABLE_BYTES = 128 * 1024 * 1024


class ChunkTableError(OcibridgeError):
    """A chunk table that is malformed, unbound, or that the bytes served do not match."""


@dataclass(frozen=True)
class LayerChunks:
    """The chunk digests (hex SHA-256) of one layer, named by the layer's digest and size."""

    digest: str
    size: int
    chunks: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"digest": self.digest, "size": self.size, "chunks": list(self.chunks)}

    def content_key(self, chunk_size: int) -> str:
        """Hex SHA-256 naming the bytes these chunks make up: of ``"<chunkSize>\\n"`` and then
        each chunk digest and ``"\\n"``. Not the layer digest: nobody hashed the whole blob, and a
        key taken from an untrusted table must never name bytes some other reader trusts by
        layer digest (a pull's cache does)."""
        h = hashlib.sha256(f"{chunk_size}\n".encode())
        for chunk in self.chunks:
            h.update(chunk.encode() + b"\n")
        return h.hexdigest()


@dataclass(frozen=True)
class ChunkTable:
    chunk_size: int
    layers: dict[str, LayerChunks]

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, layers sorted by digest): the same input
        gives the same bytes, hence the same digest, on every machine."""
        doc = {
            "schemaVersion": 1,
            "mediaType": TABLE_MEDIA_TYPE,
            "algorithm": "sha256",
            "chunkSize": self.chunk_size,
            "layers": [self.layers[d].as_dict() for d in sorted(self.layers)],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def descriptor(self) -> Descriptor:
        return Descriptor.for_bytes(TABLE_MEDIA_TYPE, self.to_bytes())

    def for_layer(self, layer: Descriptor) -> LayerChunks | None:
        """The entry of ``layer``, only when its digest *and* size are the layer's."""
        entry = self.layers.get(layer.digest)
        return entry if entry is not None and entry.size == layer.size else None


def binding_annotations(table: ChunkTable) -> dict[str, str]:
    """The model-manifest annotations that bind ``table`` (its digest and size)."""
    desc = table.descriptor()
    return {ANNOTATION_DIGEST: desc.digest, ANNOTATION_SIZE: str(desc.size)}


def chunk_count(size: int, chunk_size: int) -> int:
    return max(1, -(-size // chunk_size)) if size else 0


def chunk_stream(reader: BinaryIO, chunk_size: int = DEFAULT_CHUNK_SIZE) -> LayerChunks:
    """One pass over a blob: its own digest and size, and its chunk digests."""
    whole = hashlib.sha256()
    chunks: list[str] = []
    size = 0
    while True:
        piece = _read_full(reader, chunk_size)
        if not piece:
            break
        whole.update(piece)
        chunks.append(hashlib.sha256(piece).hexdigest())
        size += len(piece)
    return LayerChunks("sha256:" + whole.hexdigest(), size, tuple(chunks))


def _read_full(reader: BinaryIO, n: int) -> bytes:
    parts: list[bytes] = []
    left = n
    while left:
        piece = reader.read(left)
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def build_table(entries: Iterable[LayerChunks], chunk_size: int = DEFAULT_CHUNK_SIZE) -> ChunkTable:
    return ChunkTable(chunk_size, {e.digest: e for e in entries})


def parse_table(data: bytes) -> ChunkTable:
    """Read a table, refusing anything malformed: a wrong chunk count or a digest that is not
    64 hex digits is an error, never a partly trusted table."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("mediaType") != TABLE_MEDIA_TYPE:
            raise ValueError(f"not a {TABLE_MEDIA_TYPE}")
        if doc.get("schemaVersion") != 1 or doc.get("algorithm") != "sha256":
            raise ValueError("unknown schemaVersion or algorithm")
        chunk_size = doc["chunkSize"]
        if not isinstance(chunk_size, int) or not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunkSize {chunk_size!r} out of range")
        layers: dict[str, LayerChunks] = {}
        for item in doc["layers"]:
            digest, size, chunks = check_digest(item["digest"]), item["size"], item["chunks"]
            if not isinstance(size, int) or size < 0 or not isinstance(chunks, list):
                raise ValueError(f"layer {digest}: bad size or chunks")
            if len(chunks) != chunk_count(size, chunk_size):
                raise ValueError(f"layer {digest}: {len(chunks)} chunks for {size} bytes")
            for c in chunks:
                if not isinstance(c, str) or len(c) != 64 or c.strip("0123456789abcdef"):
                    raise ValueError(f"layer {digest}: a chunk digest is not 64 hex digits")
            layers[digest] = LayerChunks(digest, size, tuple(chunks))
    except (ValueError, KeyError, TypeError, OcibridgeError) as e:
        raise ChunkTableError(f"chunk table refused: {e}") from None
    return ChunkTable(chunk_size, layers)
