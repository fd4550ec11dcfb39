"""A model built from files whose content is already vouched for: each one's SHA-256, size and
chunk table known, its bytes somewhere they can be opened (a verified upload, a registry blob).

serve's commit has proved every file it names (staging hashed each upload as it arrived, a
branch's file is a blob of its manifest): re-reading gigabytes to learn those digests again
would be waste, and a directory of links plus a digest cache to smuggle them into ``push`` is a
side channel. :func:`plan_known` makes the same :class:`PlannedArtifact` push makes of a
directory holding those files (same layers, config and manifest, byte for byte), reading only
the small files the ModelPack config is taken from (config.json, the safetensors and GGUF
headers) and the large ones whose chunk table nobody has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ocibridge.chunks import hashes
from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, LayerChunks
from ocibridge.errors import SourceError
from ocibridge.model import metadata
from ocibridge.model.builder import BuildOptions, PlannedArtifact
from ocibridge.model.classify import DEFAULT_EXCLUDES, classify, excluded
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.digest import check_digest
from ocibridge.oci.mediatypes import Kind
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore


@dataclass(frozen=True)
class KnownFile:
    """One file of the model: its content's digest (``sha256:HEX``) and size, vouched for by
    whoever gives it; ``opener``: its bytes from the start (a verified upload, a blob); ``chunks``:
    its chunk table entry in ``chunk_size`` pieces, when made as its bytes were verified;
    ``mode``: 0o755 for an executable, as a directory's file keeps it."""

    digest: str
    size: int
    opener: Callable[[], BinaryIO]
    chunks: LayerChunks | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    mode: int = 0o644

    def __post_init__(self) -> None:
        check_digest(self.digest)
        if self.chunks is not None and (self.chunks.digest, self.chunks.size) != (self.digest, self.size):
            raise SourceError(f"a chunk table of {self.chunks.digest} given for {self.digest}")

    @classmethod
    def of_file(cls, path: Path, digest: str, size: int, chunks: LayerChunks | None = None,
                chunk_size: int = DEFAULT_CHUNK_SIZE) -> KnownFile:
        """A local file holding the content (its mode as the file system says)."""
        return cls(digest, size, lambda: open(path, "rb"), chunks, chunk_size, path.stat().st_mode)

    @classmethod
    def of_blob(cls, store: ReadableStore, desc: Descriptor, chunks: LayerChunks | None = None,
                chunk_size: int = DEFAULT_CHUNK_SIZE, mode: int = 0o644) -> KnownFile:
        """A blob of ``store`` (a raw layer: the file's bytes), read only if it must be."""
        return cls(desc.digest, desc.size, lambda: store.open_blob(desc), chunks, chunk_size, mode)


#: a file's layer kind from its path and size (push's :func:`.classify.classify`, unless told another)
KindOf = Callable[[str, int], Kind]


def known_package(files: Mapping[str, KnownFile], name: str,
                  excludes: tuple[str, ...] = DEFAULT_EXCLUDES, *, allow_empty: bool = False,
                  kind_of: KindOf = classify) -> ModelPackage:
    """The package push reads from a directory ``name`` holding ``files`` (path -> file): the
    same files left out (``excludes``: push's, ``.gitattributes``, ...), kinds, order, name and
    metadata. serve keeps every file a commit names (``excludes=()``): on the Hub,
    ``.gitattributes`` is a file of the repository like any other. No file at all is refused
    unless ``allow_empty`` (a Hub repository whose last file was deleted). ``kind_of``: each
    file's kind (a dataset's files are data: ocibridge.kinds.hf.repotype)."""
    chosen = [ModelFile(path, kind_of(path, known.size), known.size, known.opener, mode=known.mode,
                        digest=known.digest)
              for path, known in files.items() if not excluded(path, excludes)]
    if not chosen and not allow_empty:
        raise SourceError(f"{name}: no files to package")
    chosen.sort(key=lambda f: f.path.encode())
    package = ModelPackage(files=chosen, descriptor={"name": name}, source_format="directory")
    metadata.fill(package)  # reads config.json and the weights' headers, as a directory push does
    return package


def plan_known(files: Mapping[str, KnownFile], name: str, options: BuildOptions | None = None,
               chunks: ChunkPolicy | None = None, excludes: tuple[str, ...] = DEFAULT_EXCLUDES,
               kind_of: KindOf = classify) -> PlannedArtifact:
    """The artifact ``push`` builds of a directory ``name`` of ``files`` with ``options`` and
    chunk ``chunks`` (push's default: ``ChunkPolicy()``), no file hashed again: a table given
    in another chunk size or hash than the policy's is made again by reading its file
    (``kind_of``: :func:`known_package`'s)."""
    tables = {known.digest: known.chunks for known in files.values()
              if known.chunks is not None and chunks is not None and known.chunk_size == chunks.chunk_size
              and known.chunks.algorithm == chunks.algorithm}
    options = options or BuildOptions()
    package = known_package(files, name, excludes, allow_empty=options.allow_empty, kind_of=kind_of)
    return PlannedArtifact(package, options, chunks, tables)


def cheapest_hash(files: Mapping[str, KnownFile], chunk_size: int = DEFAULT_CHUNK_SIZE) -> str:
    """The chunk-table hash whose tables ``files`` already hold for the most bytes (ties, and none:
    the default), so a commit re-reads the fewest files: one to a repository whose head has a
    SHA-256 table (written before BLAKE3) would otherwise read every unchanged large file back
    from the registry to hash it anew. A commit that rewrites most bytes moves it to BLAKE3."""
    covered = dict.fromkeys(hashes.KNOWN, 0)
    for known in files.values():
        if known.chunks is not None and known.chunk_size == chunk_size:
            covered[known.chunks.algorithm] += known.size
    best = max(covered.values())
    return hashes.DEFAULT if covered[hashes.DEFAULT] == best else max(covered, key=lambda name: covered[name])

