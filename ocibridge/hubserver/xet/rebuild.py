"""A shard's files rebuilt from the xorbs serve kept (or the files their chunks were placed in:
:mod:`.dedupe`), each checked against the Xet hash and the SHA-256 the shard names, as they are
written. No HTTP here: :mod:`.upload` answers the shard's POST and stages what this builds."""

from __future__ import annotations

import contextlib
import hashlib
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.chunks.chunking import ChunkHasher
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD
from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import BadUpload, FileEntry, Segment

if TYPE_CHECKING:
    from ocibridge.hubserver.uploads.mounts import Mounts
    from ocibridge.hubserver.uploads.relay import Following, Relay, RelayFor
    from ocibridge.hubserver.uploads.staging import Staging
    from ocibridge.hubserver.xet.dedupe import Dedupe
    from ocibridge.hubserver.xet.owners import XorbOwners

#: bytes of a rebuilt file written between two calls on its relay to read on (a segment is up
#: to a xorb's 64 MiB: told once a segment, the relay idled, then had a segment to send at the end)
RELAY_STEP = 4 * 1024 * 1024


@dataclass
class Rebuilder:
    """Where a shard's segments are read from: the kept xorbs (``xorbs``, each a writer's of one
    repository: ``owners``), the files ``dedupe`` placed chunks in (``blobs``: a repository's files,
    else ``staging``'s), and where a large file goes on to as it is built (``relay``)."""

    staging: Staging
    xorbs: Path
    owners: XorbOwners
    dedupe: Dedupe
    blobs: Mounts | None
    relay: RelayFor | None

    def segment(self, seg: Segment, repo_id: str, files: contextlib.ExitStack,
                 offsets: dict[bytes, array[int]]) -> Iterator[bytes]:
        """The chunks ``seg`` names: from its kept xorb when a writer of ``repo_id`` sent it
        (:mod:`.owners`), else from where :mod:`.dedupe` placed them in a file of ``repo_id``
        (each checked against the chunk hash its xorb had)."""
        try:
            if not self.owners.owns(seg.xorb, repo_id):
                raise FileNotFoundError(seg.xorb)  # another repository's: as if never sent
            f = files.enter_context(open(self.xorbs / merkle.hex_of(seg.xorb), "rb"))  # noqa: SIM115 - the stack closes it
        except FileNotFoundError:
            yield from self.placed(seg, repo_id, files)
            return
        size = os.fstat(f.fileno()).st_size
        if seg.xorb not in offsets:
            offsets[seg.xorb] = shards.chunk_offsets(f, size)
        yield from shards.chunks(f, size, seg.first, seg.end, offsets[seg.xorb])

    def placed(self, seg: Segment, repo_id: str, files: contextlib.ExitStack) -> Iterator[bytes]:
        name = merkle.hex_of(seg.xorb)
        places = self.dedupe.places(repo_id, seg.xorb)
        try:
            known = self.dedupe.chunks_of(seg.xorb) if places else ChunkList()
        except (OSError, BadUpload):
            known = ChunkList()
        wanted = places[seg.first:seg.end] if places and seg.end <= min(len(places), len(known)) else []
        if not wanted or None in wanted:
            raise BadUpload(f"xorb {name} was never uploaded")
        opened: dict[str, BinaryIO] = {}
        for k, place in enumerate(wanted, seg.first):
            assert place is not None
            sha, offset, size, total = place
            f = opened.get(sha)
            if f is None:
                path = self.blobs.local(repo_id, sha, total, self.staging) if self.blobs else self.staging.path_for(sha)
                if path is None:
                    raise BadUpload(f"xorb {name} is no longer kept, nor the file sha256:{sha} that held it")
                f = opened[sha] = files.enter_context(open(path, "rb"))  # noqa: SIM115 - the stack closes it
            f.seek(offset)
            data = f.read(size)
            if (merkle.chunk_hash(data), len(data)) != known[k]:
                raise BadUpload(f"chunk {k} of xorb {name}, read from sha256:{sha}, is not the chunk it held")
            yield data

    def rebuild(self, entry: FileEntry, fd: int, path: Path, repo_id: str,
                 offsets: dict[bytes, array[int]] | None = None) -> tuple[str, tuple[str, ...] | None]:
        """Write the file ``entry`` names into ``fd`` (at ``path``) from kept xorbs (or the files
        their chunks were placed in), checking its Xet hash and the SHA-256 the shard names; that
        SHA-256 (hex) and, for a large file, the chunk table push binds, made of the bytes as they
        pass (kept with the staged file). A large file also goes
        on to the registry (:mod:`.uploads.relay`, under the SHA-256 named: the registry keeps no blob of
        other bytes), as an LFS upload does, so the commit's push neither reads nor sends it again.
        ``offsets``: where each chunk of a xorb starts, read once for a whole shard."""
        if entry.sha256 is None:
            raise BadUpload("the shard names no SHA-256 for it (no metadata extension)")
        named = merkle.hex_of(entry.sha256)  # stored as a Xet hash is: 64-bit words, little-endian
        size = sum(seg.size for seg in entry.segments)
        relay = self.relay(repo_id, named, size, path) if self.relay is not None else None
        try:
            written = self._write(entry, fd, named, size, relay, repo_id, {} if offsets is None else offsets)
        except BaseException:
            if relay is not None:
                relay.follow.fail("the file did not rebuild")
            raise
        finally:
            if relay is not None:
                relay.wait()
        return written

    def _write(self, entry: FileEntry, fd: int, named: str, size: int, relay: Relay[Following] | None, repo_id: str,
               offsets: dict[bytes, array[int]]) -> tuple[str, tuple[str, ...] | None]:
        digest = hashlib.sha256()
        chunks = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False) if size >= PUSH_THRESHOLD else None
        tree = merkle.Tree()  # the file's Xet hash, a chunk at a time: no list of its chunks
        done = told = 0
        with os.fdopen(os.dup(fd), "wb") as out, contextlib.ExitStack() as files:
            for seg in entry.segments:
                written = 0
                for data in self.segment(seg, repo_id, files, offsets):
                    tree.add(merkle.chunk_hash(data), len(data))
                    digest.update(data)
                    if chunks is not None:
                        chunks.update(data)
                    out.write(data)
                    written += len(data)
                    if relay is not None and done + written - told >= RELAY_STEP:  # not a segment at once
                        out.flush()
                        told = min(done + written, size)
                        relay.follow.grew(told)
                if written != seg.size:  # what it is, not said: a refusal echoes nothing held
                    raise BadUpload(f"a segment of xorb {merkle.hex_of(seg.xorb)} is not the {seg.size} "
                                    "bytes the shard says")
                done += written
                if relay is not None:
                    out.flush()
                    relay.follow.grew(min(done, size))
        if tree.file_hash() != entry.xet_hash:
            raise BadUpload("its chunks do not hash to the Xet hash the shard names")
        if digest.hexdigest() != named:
            raise BadUpload(f"its bytes do not hash to the sha256:{named} the shard names")
        return named, chunks.finish() if chunks is not None else None  # the bytes are named: so is their table
