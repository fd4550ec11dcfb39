"""The chunk table: the digest of each fixed-size chunk of a raw layer, with the hash the table
names (BLAKE3 for new tables, SHA-256 for those written before: ``chunks.hashes``), as one
canonical JSON blob.

A byte range of a layer is checked by the digests of the chunks that cover it, so a lazy read
needs only those chunks; the table itself is one blob whose digest the model manifest names
(``ANNOTATION_DIGEST``), so the manifest digest binds every chunk digest. Format: docs/lazy.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

from ocibridge.chunks import hashes
from ocibridge.chunks.hashes import ChunkHasher
from ocibridge.core import boundedjson
from ocibridge.errors import ChunkTableError, OcibridgeError
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

__all__ = ["ChunkTable", "ChunkTableError", "LayerChunks", "binding_annotations", "build_table", "chunk_count",
           "chunk_stream", "parse_table"]


@dataclass(frozen=True)
class LayerChunks:
    """The chunk digests (hex, of the hash ``algorithm`` names) of one layer, named by the
    layer's digest and size. The hash travels with the digests: a digest means nothing without it."""

    digest: str
    size: int
    chunks: tuple[str, ...]
    algorithm: str

    def new_hasher(self) -> ChunkHasher:
        """A fresh hasher of this entry's hash, to check one chunk fed in pieces."""
        return hashes.factory(self.algorithm)()

    def hasher_factory(self) -> Callable[[], ChunkHasher]:
        return hashes.factory(self.algorithm)

    def matches(self, index: int, data: bytes | bytearray | memoryview) -> bool:
        """Whether ``data`` is chunk ``index``, by this entry's hash."""
        return index < len(self.chunks) and hashes.hexdigest(self.algorithm, data) == self.chunks[index]

    def chunk_id(self, index: int) -> str:
        """Chunk ``index`` named with its hash (``blake3:<hex>``), as the chunk stores key it."""
        return f"{self.algorithm}:{self.chunks[index]}"

    def as_dict(self) -> dict[str, object]:
        return {"digest": self.digest, "size": self.size, "chunks": list(self.chunks)}

    def content_key(self, chunk_size: int) -> str:
        """Hex SHA-256 naming the bytes these chunks make up: of ``"<chunkSize>\\n"`` and then
        each chunk digest and ``"\\n"``. Not the layer digest: nobody hashed the whole blob, and a
        key taken from an untrusted table must never name bytes some other reader trusts by
        layer digest (a pull's cache does). A table of another hash than SHA-256 puts its name
        first (``"blake3\n"``), so its layer files never share a name with a SHA-256 table's;
        SHA-256 tables keep the keys they had, and the layer files kept under them."""
        prefix = "" if self.algorithm == hashes.SHA256 else f"{self.algorithm}\n"
        h = hashlib.sha256(f"{prefix}{chunk_size}\n".encode())
        for chunk in self.chunks:
            h.update(chunk.encode() + b"\n")
        return h.hexdigest()


@dataclass(frozen=True)
class ChunkTable:
    chunk_size: int
    layers: dict[str, LayerChunks]
    algorithm: str

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, layers sorted by digest): the same input
        gives the same bytes, hence the same digest, on every machine."""
        doc = {
            "schemaVersion": 1,
            "mediaType": TABLE_MEDIA_TYPE,
            "algorithm": self.algorithm,
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


def chunk_stream(reader: BinaryIO, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 algorithm: str = hashes.DEFAULT) -> LayerChunks:
    """One pass over a blob: its own digest and size, and its chunk digests by ``algorithm``."""
    whole = hashlib.sha256()
    new = hashes.factory(algorithm)
    chunks: list[str] = []
    size = 0
    while True:
        piece = _read_full(reader, chunk_size)
        if not piece:
            break
        whole.update(piece)
        chunk = new()
        chunk.update(piece)
        chunks.append(chunk.hexdigest())
        size += len(piece)
    return LayerChunks("sha256:" + whole.hexdigest(), size, tuple(chunks), algorithm)


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


def build_table(entries: Iterable[LayerChunks], chunk_size: int = DEFAULT_CHUNK_SIZE,
                algorithm: str | None = None) -> ChunkTable:
    """A table of ``entries``, whose hash is theirs (one table names one hash), else
    ``algorithm``, else the default."""
    layers = {e.digest: e for e in entries}
    named = {e.algorithm for e in layers.values()} | ({algorithm} if algorithm else set())
    if len(named) > 1:
        raise ValueError(f"one chunk table, several hashes: {sorted(named)}")
    return ChunkTable(chunk_size, layers, hashes.check_name(named.pop()) if named else hashes.DEFAULT)


def parse_table(data: bytes) -> ChunkTable:
    """Read a table, refusing anything malformed: a wrong chunk count, a digest that is not
    64 hex digits or a hash this ocibridge does not know is an error, never a partly trusted table."""
    try:
        doc = boundedjson.loads(data)
        if not isinstance(doc, dict) or doc.get("mediaType") != TABLE_MEDIA_TYPE:
            raise ValueError(f"not a {TABLE_MEDIA_TYPE}")
        if doc.get("schemaVersion") != 1:
            raise ValueError(f"unknown schemaVersion {doc.get('schemaVersion')!r}")
        algorithm = hashes.check_name(doc.get("algorithm"))
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
            if not all(map(hashes.is_chunk_digest, chunks)):
                raise ValueError(f"layer {digest}: a chunk digest is not 64 hex digits")
            layers[digest] = LayerChunks(digest, size, tuple(chunks), algorithm)
    except (ValueError, KeyError, TypeError, OcibridgeError) as e:
        raise ChunkTableError(f"chunk table refused: {e}") from None
    return ChunkTable(chunk_size, layers, algorithm)
