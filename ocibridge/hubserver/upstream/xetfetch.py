"""A file of an upstream commit fetched over Xet, where the upstream offers it (its tree lists the
file's ``xetHash``: the Hub, another ``ocibridge serve``): a :class:`.fileget.FileGet`.

Why: the Hub keeps its files in Xet (its ``resolve`` of one is a bridge that rebuilds it); fetched
as hf_xet fetches it, a file comes as the store keeps it, and a cut resumes at the chunk it broke in.

1. the commit's read grant and the file's reconstruction (:mod:`.xetcas`);
2. each term's bytes (``GET`` its URL, the byte range the reconstruction names; no token: the URL
   is signed), its chunks read and decompressed as serve reads a xorb (:func:`.xet.shards.chunks`),
   written in order to the file's tee: its readers read them as they land;
3. the file checked: its Xet hash, the Merkle tree of its chunks (:mod:`.xet.merkle`), here, then
   the sha256 (or git blob id) the listing states, by the tee, before it may land. ``ocibridge
   serve`` names a file by its sha256 and size, not by its chunks (xet/xorbs.py): that name holds
   when it is the name of the sha256 the listing states, which the tee checks.

Resumed after a cut: each chunk written is logged beside the partial file (its hash and length:
``<partial>.xet``, :class:`ChunkLog`); the next fetch keeps the chunks the log names and the partial
file holds as named, and asks the reconstruction from the first chunk it lacks (a ``Range``): the
term that broke is fetched again from that chunk on, the terms before it not at all. Within one fetch
a cut or a 5xx is asked again :data:`TRIES` times, from where it stopped."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.fileget import XetUnavailable
from ocibridge.hubserver.upstream.session import later
from ocibridge.hubserver.upstream.tee import FileCut
from ocibridge.hubserver.upstream.xetcas import Grants, Reconstruction, Term, Transient, reconstruction
from ocibridge.hubserver.xet import merkle, shards, xorbs
from ocibridge.stores.registry.bodies import decoded_chunks

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.session import UpstreamSession
    from ocibridge.hubserver.upstream.tee import FileFlight, TeeFile
    from ocibridge.kinds.hf.commitdownload import HubSource

log = logging.getLogger("ocibridge.hubserver")
#: tries of one fetch (the first, then after a cut or a 5xx, each from where it stopped)
TRIES = 3
#: seconds before the first try again (doubled after each)
PAUSE = 0.5
#: bytes of a response read at once
PIECE = 256 << 10
_RECORD = struct.Struct("<32sI")  # a logged chunk: its hash, its length


class XetGet:
    """The files of one commit over Xet: ``names`` (path -> Xet hash, as the listing names them)
    are those the upstream offers there."""

    def __init__(self, src: HubSource, commit: str, names: dict[str, str], session: UpstreamSession):
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        self.src, self.commit, self.names = src, commit, names
        # the session follows no redirect: a grant, a reconstruction and a signed URL each answer where they are
        self._http = session.http
        route = session.api(src.typed_id, "xet-read-token", commit)
        headers = {**build_hf_headers(token=False, library_name="ocibridge"), **session.auth_for(route)}
        self.grants = Grants(self._http, route, headers)

    def close(self) -> None:
        """Nothing to close: the connections are the proxy's session's."""

    def offers(self, path: str) -> bool:
        return path in self.names

    def get(self, flight: FileFlight, tee: TeeFile) -> int:
        name = self.names.get(flight.path)
        if name is None:
            raise XetUnavailable(f"{flight.path}: not offered over Xet")
        chunks = ChunkLog(flight.partial.with_name(flight.partial.name + ".xet"))
        received = 0
        try:
            chunks.resume(flight, tee)
            for attempt in range(TRIES):
                try:
                    received += self._rest(name, flight, tee, chunks)
                    break
                except Transient as e:
                    if attempt == TRIES - 1:
                        raise OcibridgeError(f"{flight.path}: over Xet: {e}") from None
                    log.info("upstream: %s over Xet: %s; asked again from byte %d", flight.path, e, tee.tell())
                    time.sleep(PAUSE * 2 ** attempt)
            found = chunks.tree.file_hash()
        finally:
            chunks.close()
        if not name_holds(name, found, flight):
            tee.truncate(0)  # fetched whole next time
            chunks.remove()
            why = (f"{flight.path}: the upstream names it Xet hash {name}, its chunks hash to "
                   f"{merkle.hex_of(found)}: refused")
            flight.fail(why)
            raise FileCut(why)
        chunks.remove()  # the file is whole: the tee's check decides the rest
        return received

    def _rest(self, name: str, flight: FileFlight, tee: TeeFile, chunks: ChunkLog) -> int:
        """The chunks after those the partial file holds; the bytes received."""
        held = tee.tell()
        if held >= flight.size:
            return 0
        grant = self.grants.current()
        try:
            plan = reconstruction(self._http, grant, name, held, flight.size)
        except Transient:
            self.grants.current(renew=True)  # a 401 is an expired grant; a new one costs one request
            raise
        if plan.skip:  # its chunks end elsewhere than those logged: the file is fetched whole
            if not held:
                raise OcibridgeError(f"{flight.path}: the upstream's reconstruction starts {plan.skip} bytes "
                                     "into its first chunk")
            tee.truncate(0)
            chunks.restart()
            return self._rest(name, flight, tee, chunks)
        received = 0
        for term in plan.terms:
            received += self._term(plan, term, flight, tee, chunks)
        return received

    def _term(self, plan: Reconstruction, term: Term, flight: FileFlight, tee: TeeFile, chunks: ChunkLog) -> int:
        """One term's chunks written to the tee and logged; the bytes received."""
        import httpx

        span = plan.span_of(term)
        length = span.last - span.start + 1
        wrote = 0
        try:
            with self._http.stream("GET", span.url, headers={"Range": f"bytes={span.start}-{span.last}"}) as answer:
                if later(answer.status_code) or answer.status_code == 403:  # 403: a URL that expired
                    raise Transient(f"a xorb's URL answered {answer.status_code}")
                if answer.status_code not in (200, 206):
                    raise OcibridgeError(f"a xorb's URL answered {answer.status_code}")
                # decoded a piece at a time: httpx decodes a whole network read at once (a gzip of zeros: 1000x)
                body = Body(decoded_chunks(answer), span.start if answer.status_code == 200 else 0)
                for data in shards.chunks(body, length, term.first - span.first, term.end - span.first):
                    if tee.tell() + len(data) > flight.size:  # a store that sends more: not this file
                        raise OcibridgeError(f"{flight.path}: the upstream's xorbs hold more than its "
                                             f"{flight.size} bytes")
                    tee.write(data)
                    chunks.add(merkle.chunk_hash(data), len(data))
                    wrote += len(data)
                received = body.received
        except httpx.HTTPError as e:
            raise Transient(f"a xorb's bytes: {e}") from None
        except shards.BadUpload as e:
            raise OcibridgeError(f"xorb {term.xorb} of the upstream: {e}") from None
        if wrote != term.length:
            raise OcibridgeError(f"xorb {term.xorb}'s chunks {term.first}-{term.end} are {wrote} bytes, "
                                 f"the upstream's reconstruction says {term.length}")
        return received


def is_xet_hash(text: str) -> bool:
    """Whether ``text`` is a Xet hash as the listing writes one (64 hex digits)."""
    return merkle.from_hex(text) is not None


def name_holds(name: str, found: bytes, flight: FileFlight) -> bool:
    """Whether the Xet hash the upstream names the file by is the one its chunks ``found``: the
    Merkle hash of its chunks, or (an ``ocibridge serve`` upstream) the name of the sha256 the
    listing states, which the tee checks the bytes against."""
    name = name.lower()
    return merkle.hex_of(found) == name or (flight.kind == "sha256"
                                            and name == xorbs.file_id(flight.expected, flight.size))


class Body:
    """A response body read as :func:`.xet.shards.chunks` reads a xorb file, forward only (a
    ``seek`` skips ahead); ``skip`` bytes (a range the server ignored) are passed over first."""

    def __init__(self, pieces: Iterator[bytes], skip: int = 0):
        self._pieces = pieces
        self._buf = b""
        self._pos = 0  # in ``_buf``
        self._at = 0  # of the body, after ``skip``
        self._skip = skip
        self.received = 0

    def read(self, n: int) -> bytes:
        while self._skip > 0:
            dropped = len(self._pull(min(self._skip, PIECE)))
            self._skip = self._skip - dropped if dropped else 0
        out = self._pull(n)
        self._at += len(out)
        return out

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._at + offset
        if target < self._at:
            raise OcibridgeError("a xorb's body is read forward only")
        while self._at < target and self.read(min(PIECE, target - self._at)):
            pass
        return self._at

    def _pull(self, n: int) -> bytes:
        """The next ``n`` bytes (fewer only where the body ends)."""
        if len(self._buf) - self._pos < n:
            parts = [self._buf[self._pos:]]
            have = len(parts[0])
            while have < n and (piece := next(self._pieces, None)) is not None:
                parts.append(piece)
                have += len(piece)
                self.received += len(piece)
            self._buf, self._pos = b"".join(parts), 0
        out = self._buf[self._pos:self._pos + n]
        self._pos += len(out)
        return out


class ChunkLog:
    """The chunks written to a partial file, logged beside it (hash and length), and the file's
    Xet hash as far as they go (:attr:`tree`)."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = merkle.Tree()
        self._log: BinaryIO | None = None

    def resume(self, flight: FileFlight, tee: TeeFile) -> None:
        """The chunks logged that the partial file holds as logged, kept (the file cut back to
        their end, the log to them); the rest is fetched."""
        try:
            logged = self.path.read_bytes()
        except FileNotFoundError:
            logged = b""
        kept = end = 0
        with open(flight.partial, "rb") as held:
            for at in range(0, len(logged) - _RECORD.size + 1, _RECORD.size):
                digest, size = _RECORD.unpack_from(logged, at)
                if merkle.chunk_hash(held.read(size)) != digest:
                    break
                self.tree.add(digest, size)
                kept, end = at + _RECORD.size, end + size
        if end != tee.tell():
            tee.truncate(end)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.path, "r+b" if self.path.exists() else "wb")  # noqa: SIM115 - close() closes it
        self._log.truncate(kept)
        self._log.seek(kept)

    def add(self, digest: bytes, size: int) -> None:
        assert self._log is not None
        self._log.write(_RECORD.pack(digest, size))
        self._log.flush()
        self.tree.add(digest, size)

    def restart(self) -> None:
        """No chunk kept: the file is fetched from its start."""
        assert self._log is not None
        self._log.truncate(0)
        self._log.seek(0)
        self.tree = merkle.Tree()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
