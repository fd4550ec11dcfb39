"""Xet's global dedupe answered from what a repository already holds ("only changed
chunks travel up").

hf_xet asks ``GET {cas}/v1/chunks/default-merkledb/{chunk hash}`` for the first chunk of every
file it uploads and for each chunk whose hash is 0 modulo 1024 (xet-core's
``hash_is_global_dedup_eligible``; at most one query per 4 MB). A shard in the answer lists xorbs
(their hash and, per chunk, its hash and length); hf_xet then names those xorbs' chunks in the
files of the shard it uploads instead of uploading them again, and serve rebuilds such a file
from the xorbs it kept (:mod:`.upload`), checking every chunk, the file's Xet hash and its
SHA-256 as for any upload: an answer only saves bytes, it is never trusted in return.

What is kept, in serve's cache (not the staging area, which commits empty):

    $OCIBRIDGE_CACHE/serve/xetdedupe/xorbs/<xorb>              its chunks: (hash, length) each
    $OCIBRIDGE_CACHE/serve/xetdedupe/repos/<key>/files/<file>.xorbs  the xorbs a file names
    $OCIBRIDGE_CACHE/serve/xetdedupe/repos/<key>/answers/<sha256 of those>  the answer shard
                                                    naming them (one for every file they hold)
    $OCIBRIDGE_CACHE/serve/xetdedupe/repos/<key>/chunks/<chunk>  which file's answer holds it
    $OCIBRIDGE_CACHE/serve/xetdedupe/repos/<key>/places/<xorb>   where each of its chunks lies in
                                                    a file of the repository (SHA-256, offset)

``<key>`` is the SHA-256 of the repository's id: an answer only ever names content a shard of the
same repository sent (the asking grant is that repository's write grant). The xorbs themselves
stay where :mod:`.upload` keeps them, under its budget, for as long as it keeps them; a
xorb dropped since is rebuilt from its places: the chunks are read from the file that held
them (staged, else the repository's registry blob), each re-hashed against the chunk hash
checked when the xorb came. An answer is given only when every xorb it names is kept or can be
so rebuilt (else 404, "none": the client sends the chunks again).

The chunk hashes in an answer are keyed (Xet's HMAC: BLAKE3 keyed with a random key written in
the shard's footer), as the Hub answers: the client matches its own chunks against them and
learns no hash of a chunk it does not hold.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import itertools
import logging
import os
import queue
import secrets
import struct
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import blake3

from ocibridge.core.environment import cache_root
from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import FileEntry, Segment

log = logging.getLogger("ocibridge.hubserver")

#: xet-core's MDB_SHARD_GLOBAL_DEDUP_CHUNK_MODULUS
DEDUPE_MODULUS = 1024
#: xet-core's shard header and footer versions, and the footer's size
HEADER_VERSION = 2
FOOTER_VERSION = 1
FOOTER_SIZE = 200
_CHUNK = struct.Struct("<32sI")
#: where a chunk lies: the file's SHA-256, the chunk's offset and length, the file's size
_PLACE = struct.Struct("<32sQIQ")
#: a row of an answer's chunk lookup: the keyed hash's first word, its xorb's entry, the chunk
_LOOKUP = struct.Struct("<QII")
#: chunk lookup rows written at a time
LOOKUP_BATCH = 4096
#: the chunk lists a record holds at once (the last read): a file's xorbs come one after another,
#: and a shard of small files names one xorb many times over
RECENT = 4
#: seconds an answer waits for the records of its repository still being written
SETTLE = 60.0
Chunks = Sequence[tuple[bytes, int]]
#: (file SHA-256 hex, offset, length, file size)
Place = tuple[str, int, int, int]


def eligible(chunk: bytes) -> bool:
    """Whether hf_xet may ask about ``chunk`` past a file's first (its last 64-bit word, 0 mod 1024)."""
    return int.from_bytes(chunk[24:32], "little") % DEDUPE_MODULUS == 0


def _hmac(chunk: bytes, key: bytes) -> bytes:
    return blake3.blake3(chunk, key=key).digest()


def _first_word(h: bytes) -> int:
    return int.from_bytes(h[:8], "little")


def _order(h: bytes) -> tuple[int, ...]:
    """A hash's order in xet-core (its four 64-bit words)."""
    return struct.unpack("<4Q", h)


def write_answer_shard(out: BinaryIO, xorbs: Iterable[bytes], load: Callable[[bytes], tuple[Chunks, int]],
                       key: bytes, now: int | None = None) -> None:
    """A shard (format of xet-core's ``MDBShardInfo::serialize_from``) with no file and the
    xorbs named, each as ``load`` gives it (its chunks, its size stored), chunk hashes keyed by
    ``key``, written into ``out`` a xorb at a time: of a file's chunks (65 536 in 4 GiB) only the
    chunk lookup's keys are held, 12 bytes a chunk, each xorb's sorted, then merged."""
    head = shards.SHARD_TAG + struct.pack("<QQ", HEADER_VERSION, FOOTER_SIZE)
    out.write(head + shards.BOOKEND + bytes(16))  # no file info
    at = xorb_offset = len(head) + len(shards.BOOKEND) + 16
    rows: list[tuple[bytes, int]] = []  # (xorb hash, index of its header entry)
    runs: list[tuple[int, array[int], array[int]]] = []  # a xorb's entry, its keyed words and chunks in order
    index = materialized = on_disk = 0
    for xorb in sorted(xorbs, key=_order):
        chunks, stored = load(xorb)
        total = sum(size for _, size in chunks)
        materialized += total
        on_disk += stored
        rows.append((xorb, index))
        section = bytearray(xorb + struct.pack("<IIII", 0, len(chunks), total, stored))
        words = array("Q")
        offset = 0
        for chunk, size in chunks:
            keyed = _hmac(chunk, key)
            section += keyed + struct.pack("<IIII", offset, size, 0, 0)
            words.append(_first_word(keyed))
            offset += size
        order = sorted(range(len(words)), key=words.__getitem__)  # stable: equal words by chunk
        runs.append((index, array("Q", (words[k] for k in order)), array("I", order)))
        out.write(section)
        at += len(section)
        index += 1 + len(chunks)
    out.write(shards.BOOKEND + bytes(16))
    at += len(shards.BOOKEND) + 16
    file_lookup = xorb_lookup = at
    out.write(b"".join(struct.pack("<QI", _first_word(xorb), i) for xorb, i in rows))
    chunk_lookup = at = at + 12 * len(rows)
    merged = heapq.merge(*(zip(words, itertools.repeat(i), order) for i, words, order in runs))
    count = 0
    for batch in iter(lambda: list(itertools.islice(merged, LOOKUP_BATCH)), []):
        out.write(b"".join(_LOOKUP.pack(*row) for row in batch))
        count += len(batch)
    footer_offset = at + _LOOKUP.size * count
    stamp = int(time.time()) if now is None else now
    footer = struct.pack("<9Q", FOOTER_VERSION, len(head), xorb_offset, file_lookup, 0, xorb_lookup, len(rows),
                         chunk_lookup, count)
    footer += key + struct.pack("<2Q", stamp, 2 ** 64 - 1) + bytes(48)
    footer += struct.pack("<4Q", on_disk, materialized, materialized, footer_offset)
    assert len(footer) == FOOTER_SIZE
    out.write(footer)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[BinaryIO]:
    """A file to write that becomes ``path`` whole once written, or not at all (a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".new-")
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all."""
    with _replacing(path) as out:
        out.write(data)


class Dedupe:
    """What a later upload of a repository may name instead of sending (the module's docstring)."""

    def __init__(self, xorbs: Path, root: Path | None = None):
        self.xorbs = xorbs  # where upload.py keeps the verified xorbs
        self.root = root if root is not None else cache_root() / "serve" / "xetdedupe"
        self._queue: queue.SimpleQueue[tuple[str, Sequence[FileEntry]]] = queue.SimpleQueue()
        # records are numbered as queued and written in that order: an answer waits for the
        # number of its repository's last one then, not for every one queued while it waits
        self._queued = self._written = 0
        self._last: dict[str, int] = {}  # the number of each repository's last record not written
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None

    def _repo(self, repo_id: str) -> Path:
        return self.root / "repos" / hashlib.sha256(repo_id.lower().encode()).hexdigest()

    # -- what a xorb holds ----------------------------------------------------------------------
    def remember_xorb(self, xorb: bytes, chunks: Chunks) -> None:
        """The chunks of a verified xorb, so no answer has to read it again."""
        _write(self.root / "xorbs" / merkle.hex_of(xorb), b"".join(_CHUNK.pack(h, n) for h, n in chunks))

    def chunks_of(self, xorb: bytes) -> ChunkList:
        """The chunks of a kept xorb: remembered, else read (and checked) from the xorb."""
        known = self.root / "xorbs" / merkle.hex_of(xorb)
        with contextlib.suppress(FileNotFoundError):
            return ChunkList.of(_CHUNK.iter_unpack(known.read_bytes()))
        path = self.xorbs / merkle.hex_of(xorb)
        with open(path, "rb") as f:
            chunks = shards.chunk_list(f, os.fstat(f.fileno()).st_size)
        if merkle.xorb_hash(chunks) != xorb:
            raise shards.BadUpload(f"kept xorb {merkle.hex_of(xorb)} no longer hashes to its name")
        self.remember_xorb(xorb, chunks)
        return chunks

    # -- recording and answering ----------------------------------------------------------------
    def record_later(self, repo_id: str, entries: Sequence[FileEntry]) -> None:
        """:meth:`record` on one thread of its own, after the shard is answered: the record is
        only for later uploads (0.1 s a GiB of a file, which the client waited for), and every
        answer of ``repo_id`` waits for it (:meth:`_settled`). One thread: records of one
        repository read and rewrite the same files, in order."""
        with self._cond:
            self._queued += 1
            self._last[repo_id] = self._queued
            self._queue.put((repo_id, entries))  # in the order numbered
            if self._worker is None:
                self._worker = threading.Thread(target=self._write_records, name="xet-dedupe", daemon=True)
                self._worker.start()

    def _write_records(self) -> None:
        while True:
            repo_id, entries = self._queue.get()
            try:
                self.record(repo_id, entries)
            except Exception as e:  # noqa: BLE001 - the upload stands (only a later one saves less), the thread goes on
                log.warning("%s: a shard's files not kept for dedupe: %s", repo_id, e or type(e).__name__)
            finally:
                with self._cond:
                    self._written += 1
                    if self._last.get(repo_id) == self._written:
                        del self._last[repo_id]
                    self._cond.notify_all()

    def _settled(self, repo_id: str) -> None:
        """Wait (up to :data:`SETTLE`) for the records of ``repo_id`` queued before this."""
        with self._cond:
            last = self._last.get(repo_id, 0)
            self._cond.wait_for(lambda: self._written >= last, SETTLE)

    def close(self) -> None:
        """Wait (up to :data:`SETTLE`) for every record queued: serve is stopping, and its thread
        (a daemon) ends with the process, the files of the shards answered last not recorded."""
        with self._cond:
            last = self._queued
            self._cond.wait_for(lambda: self._written >= last, SETTLE)

    def record(self, repo_id: str, entries: Sequence[FileEntry]) -> None:
        """Remember ``entries`` (the files a shard of ``repo_id`` sent, verified and staged): the
        answer naming each one's xorbs, under its first chunk and every eligible chunk of it, and
        where each chunk of those xorbs lies in it. The work is per xorb, not per file times
        xorb: a shard of thousands of small files packed in one xorb makes one answer of it; and
        a xorb at a time: the chunk lists of the last few xorbs read are held, not of all of a
        file's (serve's memory stays flat with the file's size)."""
        lists = functools.lru_cache(maxsize=RECENT)(self.chunks_of)
        answers: set[bytes] = set()
        repo = self._repo(repo_id)
        for entry in entries:
            names = list(dict.fromkeys(seg.xorb for seg in entry.segments))
            joined = b"".join(names)
            if joined not in answers:
                answers.add(joined)
                with _replacing(repo / "answers" / hashlib.sha256(joined).hexdigest()) as out:
                    write_answer_shard(out, names, lambda x: (lists(x), self._stored_size(x, lists(x))),
                                       secrets.token_bytes(32))
            self._asked(repo, entry, lists, joined)
        self._write_places(repo, entries, lists)

    def _asked(self, repo: Path, entry: FileEntry, lists: Callable[[bytes], ChunkList], joined: bytes) -> None:
        """The file's xorbs, and the chunks hf_xet asks about that lead to it."""
        name = merkle.hex_of(entry.xet_hash)
        _write(repo / "files" / f"{name}.xorbs", joined)
        asked: list[bytes] = []
        for seg in entry.segments:
            used = lists(seg.xorb)[seg.first:seg.end]
            asked += [h for i, (h, _) in enumerate(used) if (not asked and i == 0) or eligible(h)]
        for chunk in dict.fromkeys(asked):
            _write(repo / "chunks" / merkle.hex_of(chunk), name.encode())

    def _stored_size(self, xorb: bytes, chunks: Chunks) -> int:
        """The xorb's size as kept (what an answer says it is on disk: only counted)."""
        try:
            return (self.xorbs / merkle.hex_of(xorb)).stat().st_size
        except FileNotFoundError:
            return sum(size for _, size in chunks) + shards.HEADER * len(chunks)

    @staticmethod
    def _write_places(repo: Path, entries: Sequence[FileEntry], lists: Callable[[bytes], ChunkList]) -> None:
        """Where each chunk the ``entries`` name lies in them (the last file naming it wins),
        over what was known of each xorb: a xorb's file at a time."""
        naming: dict[bytes, list[tuple[Segment, bytes, int, int]]] = {}  # xorb -> (segment, file, offset, size)
        for entry in entries:
            assert entry.sha256 is not None  # a staged file's
            sha = bytes.fromhex(merkle.hex_of(entry.sha256))
            total = sum(seg.size for seg in entry.segments)  # each checked to be its chunks' bytes
            at = 0
            for seg in entry.segments:
                naming.setdefault(seg.xorb, []).append((seg, sha, at, total))
                at += seg.size
        for xorb, segments in naming.items():
            chunks = lists(xorb)
            path = repo / "places" / merkle.hex_of(xorb)
            rows = bytearray(_PLACE.size * len(chunks))
            with contextlib.suppress(FileNotFoundError):
                old = path.read_bytes()
                if len(old) == len(rows):
                    rows[:] = old
            for seg, sha, at, total in segments:
                for k in range(seg.first, seg.end):
                    _PLACE.pack_into(rows, _PLACE.size * k, sha, at, chunks.size(k), total)
                    at += chunks.size(k)
            _write(path, bytes(rows))

    def places(self, repo_id: str, xorb: bytes) -> list[Place | None] | None:
        """Where each chunk of ``xorb`` lies in a file of ``repo_id`` (None: not known)."""
        self._settled(repo_id)
        try:
            raw = (self._repo(repo_id) / "places" / merkle.hex_of(xorb)).read_bytes()
        except FileNotFoundError:
            return None
        out: list[Place | None] = []
        for i in range(0, len(raw) - _PLACE.size + 1, _PLACE.size):
            sha, offset, size, total = _PLACE.unpack_from(raw, i)
            out.append((sha.hex(), offset, size, total) if sha != bytes(32) else None)
        return out

    def answer(self, repo_id: str, chunk: bytes, held: Callable[[str, int], bool]) -> bytes | None:
        """The shard for ``chunk`` in ``repo_id``, when every xorb it names is still kept or can
        be rebuilt from files ``held(sha256, size)`` says serve can read."""
        self._settled(repo_id)
        repo = self._repo(repo_id)
        try:
            name = (repo / "chunks" / merkle.hex_of(chunk)).read_text()
            if merkle.from_hex(name) is None:
                return None
            xorbs = (repo / "files" / f"{name}.xorbs").read_bytes()
            shard = (repo / "answers" / hashlib.sha256(xorbs).hexdigest()).read_bytes()
        except FileNotFoundError:
            return None
        for at in range(0, len(xorbs), 32):
            xorb = xorbs[at:at + 32]
            try:
                os.utime(self.xorbs / merkle.hex_of(xorb))  # recently used: the budget drops it last
                continue
            except FileNotFoundError:
                pass
            places = self.places(repo_id, xorb)
            if not places or None in places:
                return None
            files = {(p[0], p[3]) for p in places if p is not None}
            if not all(held(sha, size) for sha, size in files):
                return None
        return shard
