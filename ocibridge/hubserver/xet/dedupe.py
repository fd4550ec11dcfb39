"""Xet's global dedupe answered from what a repository already holds (issue 55: "only changed
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
import hashlib
import os
import secrets
import struct
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import blake3

from ocibridge.core.environment import cache_root
from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.shards import FileEntry

#: xet-core's MDB_SHARD_GLOBAL_DEDUP_CHUNK_MODULUS
DEDUPE_MODULUS = 1024
#: xet-core's shard header and footer versions, and the footer's size
HEADER_VERSION = 2
FOOTER_VERSION = 1
FOOTER_SIZE = 200
_CHUNK = struct.Struct("<32sI")
#: where a chunk lies: the file's SHA-256, the chunk's offset and length, the file's size
_PLACE = struct.Struct("<32sQIQ")
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


def answer_shard(xorbs: Iterable[tuple[bytes, Chunks, int]], key: bytes, now: int | None = None) -> bytes:
    """A shard (format of xet-core's ``MDBShardInfo::serialize_from``) with no file and the xorbs
    given as ``(xorb hash, its chunks, its size stored)``, chunk hashes keyed by ``key``."""
    rows: list[tuple[bytes, int]] = []  # (xorb hash, index of its header entry)
    chunk_rows: list[tuple[int, int, int]] = []
    index = 0
    materialized = on_disk = 0
    head = shards.SHARD_TAG + struct.pack("<QQ", HEADER_VERSION, FOOTER_SIZE)
    file_info = shards.BOOKEND + bytes(16)
    body = bytearray(file_info)
    xorb_offset = len(head) + len(body)
    for xorb, chunks, stored in sorted(xorbs, key=lambda x: _order(x[0])):
        total = sum(size for _, size in chunks)
        materialized += total
        on_disk += stored
        rows.append((xorb, index))
        body += xorb + struct.pack("<IIII", 0, len(chunks), total, stored)
        at = 0
        for i, (chunk, size) in enumerate(chunks):
            keyed = _hmac(chunk, key)
            body += keyed + struct.pack("<IIII", at, size, 0, 0)
            chunk_rows.append((_first_word(keyed), index, i))
            at += size
        index += 1 + len(chunks)
    body += shards.BOOKEND + bytes(16)
    at = len(head) + len(body)
    file_lookup = at
    xorb_lookup = at
    for xorb, i in rows:
        body += struct.pack("<QI", _first_word(xorb), i)
    chunk_lookup = len(head) + len(body)
    for word, i, k in sorted(chunk_rows):
        body += struct.pack("<QII", word, i, k)
    footer_offset = len(head) + len(body)
    stamp = int(time.time()) if now is None else now
    footer = struct.pack("<9Q", FOOTER_VERSION, len(head), xorb_offset, file_lookup, 0, xorb_lookup, len(rows),
                         chunk_lookup, len(chunk_rows))
    footer += key + struct.pack("<2Q", stamp, 2 ** 64 - 1) + bytes(48)
    footer += struct.pack("<4Q", on_disk, materialized, materialized, footer_offset)
    assert len(footer) == FOOTER_SIZE
    return head + bytes(body) + footer


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all (a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".new-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise


class Dedupe:
    """What a later upload of a repository may name instead of sending (the module's docstring)."""

    def __init__(self, xorbs: Path, root: Path | None = None):
        self.xorbs = xorbs  # where upload.py keeps the verified xorbs
        self.root = root if root is not None else cache_root() / "serve" / "xetdedupe"

    def _repo(self, repo_id: str) -> Path:
        return self.root / "repos" / hashlib.sha256(repo_id.lower().encode()).hexdigest()

    # -- what a xorb holds ----------------------------------------------------------------------
    def remember_xorb(self, xorb: bytes, chunks: Chunks) -> None:
        """The chunks of a verified xorb, so no answer has to read it again."""
        _write(self.root / "xorbs" / merkle.hex_of(xorb), b"".join(_CHUNK.pack(h, n) for h, n in chunks))

    def chunks_of(self, xorb: bytes) -> list[tuple[bytes, int]]:
        """The chunks of a kept xorb: remembered, else read (and checked) from the xorb."""
        known = self.root / "xorbs" / merkle.hex_of(xorb)
        with contextlib.suppress(FileNotFoundError):
            raw = known.read_bytes()
            return [_CHUNK.unpack_from(raw, at) for at in range(0, len(raw), _CHUNK.size)]
        path = self.xorbs / merkle.hex_of(xorb)
        with open(path, "rb") as f:
            chunks = shards.chunk_list(f, os.fstat(f.fileno()).st_size)
        if merkle.xorb_hash(chunks) != xorb:
            raise shards.BadUpload(f"kept xorb {merkle.hex_of(xorb)} no longer hashes to its name")
        self.remember_xorb(xorb, chunks)
        return chunks

    # -- recording and answering ----------------------------------------------------------------
    def record(self, repo_id: str, entries: Sequence[FileEntry]) -> None:
        """Remember ``entries`` (the files a shard of ``repo_id`` sent, verified and staged): the
        answer naming each one's xorbs, under its first chunk and every eligible chunk of it, and
        where each chunk of those xorbs lies in it. The work is per xorb, not per file times
        xorb: a shard of thousands of small files packed in one xorb makes one answer of it."""
        lists: dict[bytes, list[tuple[bytes, int]]] = {}
        found: dict[bytes, dict[int, bytes]] = {}
        answers: set[bytes] = set()
        repo = self._repo(repo_id)
        for entry in entries:
            names = list(dict.fromkeys(seg.xorb for seg in entry.segments))
            for xorb in names:
                if xorb not in lists:
                    lists[xorb] = self.chunks_of(xorb)
            self._place(entry, lists, found)
            joined = b"".join(names)
            if joined not in answers:
                answers.add(joined)
                shard = answer_shard(((x, lists[x], self._stored_size(repo_id, x, lists[x])) for x in names),
                                     secrets.token_bytes(32))
                _write(repo / "answers" / hashlib.sha256(joined).hexdigest(), shard)
            self._asked(repo, entry, lists, joined)
        self._write_places(repo_id, lists, found)

    def _asked(self, repo: Path, entry: FileEntry, lists: dict[bytes, list[tuple[bytes, int]]],
               joined: bytes) -> None:
        """The file's xorbs, and the chunks hf_xet asks about that lead to it."""
        name = merkle.hex_of(entry.xet_hash)
        _write(repo / "files" / f"{name}.xorbs", joined)
        asked: list[bytes] = []
        for seg in entry.segments:
            used = lists[seg.xorb][seg.first:seg.end]
            asked += [h for i, (h, _) in enumerate(used) if (not asked and i == 0) or eligible(h)]
        for chunk in dict.fromkeys(asked):
            _write(repo / "chunks" / merkle.hex_of(chunk), name.encode())

    def _stored_size(self, repo_id: str, xorb: bytes, chunks: Chunks) -> int:
        """The xorb's size as kept (what an answer says it is on disk: only counted)."""
        try:
            return (self.xorbs / merkle.hex_of(xorb)).stat().st_size
        except FileNotFoundError:
            return sum(size for _, size in chunks) + shards.HEADER * len(chunks)

    @staticmethod
    def _place(entry: FileEntry, lists: dict[bytes, list[tuple[bytes, int]]],
               found: dict[bytes, dict[int, bytes]]) -> None:
        """Where each chunk ``entry`` names lies in it, into ``found`` (xorb -> chunk -> place)."""
        assert entry.sha256 is not None  # a staged file's
        sha = bytes.fromhex(merkle.hex_of(entry.sha256))
        total = sum(seg.size for seg in entry.segments)
        at = 0
        for seg in entry.segments:
            for k in range(seg.first, seg.end):
                size = lists[seg.xorb][k][1]
                found.setdefault(seg.xorb, {})[k] = _PLACE.pack(sha, at, size, total)
                at += size

    def _write_places(self, repo_id: str, lists: dict[bytes, list[tuple[bytes, int]]],
                      found: dict[bytes, dict[int, bytes]]) -> None:
        for xorb, placed in found.items():
            path = self._repo(repo_id) / "places" / merkle.hex_of(xorb)
            old = [bytes(_PLACE.size)] * len(lists[xorb])
            with contextlib.suppress(FileNotFoundError):
                raw = path.read_bytes()
                old = [raw[i:i + _PLACE.size] for i in range(0, len(raw), _PLACE.size)]
            rows = [placed.get(k) or row for k, row in enumerate(old)]
            _write(path, b"".join(rows))

    def places(self, repo_id: str, xorb: bytes) -> list[Place | None] | None:
        """Where each chunk of ``xorb`` lies in a file of ``repo_id`` (None: not known)."""
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
