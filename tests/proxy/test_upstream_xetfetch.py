"""The proxy's Xet fetch (hubserver/upstream/xetfetch.py) against a Hub-like Xet store over real
HTTP: files named by the Merkle hash of their chunks (not ``ocibridge serve``'s sha256 names),
chunks of many sizes stored LZ4-compressed (schemes 1 and 2), a reconstruction whose place for a
xorb starts before the term's first chunk. The store is a loopback server of this test, speaking
the CAS API as the Hub does (the grant, ``v1/reconstructions`` with a ``Range``, xorb ranges)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import lz4.frame
import pytest

from ocibridge.core.addressrule import AddressRefused
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream import xetfetch
from ocibridge.hubserver.upstream.fileget import XetUnavailable
from ocibridge.hubserver.upstream.session import UpstreamSession
from ocibridge.hubserver.upstream.tee import FileCut, FileFlight
from ocibridge.hubserver.upstream.xetfetch import XetGet
from ocibridge.hubserver.xet import merkle
from ocibridge.kinds.hf.commitdownload import HubSource

COMMIT = "c" * 40


def grouped(data: bytes) -> bytes:
    """Scheme 2's byte grouping: the bytes at ``g`` modulo 4 together, group by group."""
    return b"".join(data[g::4] for g in range(4))


def stored(data: bytes, scheme: int) -> bytes:
    body = data if scheme == 0 else lz4.frame.compress(grouped(data) if scheme == 2 else data)
    return bytes([0]) + len(body).to_bytes(3, "little") + bytes([scheme]) + len(data).to_bytes(3, "little") + body


@dataclass
class Store:
    """A file in two xorbs: A holds another file's chunk, then the file's chunks 0-2; B, chunks 3-4."""

    chunks: list[bytes]
    xorbs: dict[str, list[bytes]] = field(default_factory=dict)  # name -> its chunks as stored
    grant: bool = True
    cut_b: int | None = None  # bytes of xorb B sent before the connection is cut
    gzip_b: bytes | None = None  # xorb B's answer sent as this gzip (its bytes, then what follows them)
    asked: list[tuple[str, str]] = field(default_factory=list)  # (path, its Range)
    elsewhere: dict[str, str] = field(default_factory=dict)  # "cas", "xorbs": the base its grant names instead

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def name(self) -> str:
        return merkle.hex_of(merkle.file_hash((merkle.chunk_hash(c), len(c)) for c in self.chunks))

    def terms(self, start: int) -> dict[str, Any]:
        """The reconstruction of bytes ``start``..: its terms from the chunk ``start`` is in."""
        bounds, at = [], 0
        for c in self.chunks:
            bounds.append(at)
            at += len(c)
        first = max(k for k, b in enumerate(bounds) if b <= start)
        places = [("A", 1 + k) if k < 3 else ("B", k - 3) for k in range(len(self.chunks))]
        terms, info = [], {}
        for xorb in ("A", "B"):
            mine = [(k, i) for k, (x, i) in enumerate(places) if x == xorb and k >= first]
            if not mine:
                continue
            lo, hi = mine[0][1], mine[-1][1] + 1
            terms.append({"hash": xorb, "unpacked_length": sum(len(self.chunks[k]) for k, _ in mine),
                          "range": {"start": lo, "end": hi}})
            place = 0 if xorb == "A" else lo  # A's place starts at its first chunk, not the term's
            begin = sum(len(s) for s in self.xorbs[xorb][:place])
            end = sum(len(s) for s in self.xorbs[xorb][:hi])
            info[xorb] = [{"range": {"start": place, "end": hi}, "url": f"/xorbs/{xorb}",
                           "url_range": {"start": begin, "end": end - 1}}]
        return {"offset_into_first_range": start - bounds[first], "terms": terms, "fetch_info": info}


@pytest.fixture
def store() -> Iterator[tuple[Store, str]]:
    chunks = [os.urandom(9000), b"compressible " * 3000, os.urandom(65536), bytes(range(256)) * 100,
              os.urandom(1234)]
    s = Store(chunks)
    s.xorbs = {"A": [stored(os.urandom(5000), 1)] + [stored(c, k % 3) for k, c in enumerate(chunks[:3])],
               "B": [stored(chunks[3], 2), stored(chunks[4], 1)]}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            wanted = self.headers.get("Range", "")
            s.asked.append((self.path, wanted))
            base = f"http://127.0.0.1:{server.server_address[1]}"
            if self.path == f"/api/models/acme/m/xet-read-token/{COMMIT}" and s.grant:
                cas = s.elsewhere.get("cas", base)
                self.answer(200, b"{}", {"X-Xet-Cas-Url": f"{cas}/cas", "X-Xet-Access-Token": "t",
                                         "X-Xet-Token-Expiration": "4102444800"})
            elif self.path.startswith("/cas/v1/reconstructions/") and self.headers.get("Authorization") == "Bearer t":
                start = int(re.fullmatch(r"bytes=([0-9]+)-[0-9]+", wanted)[1]) if wanted else 0  # type: ignore[index]
                said = s.terms(start)
                for places in said["fetch_info"].values():
                    for place in places:
                        place["url"] = s.elsewhere.get("xorbs", base) + place["url"]
                self.answer(200, json.dumps(said).encode(), {"Content-Type": "application/json"})
            elif self.path.startswith("/xorbs/"):
                xorb = self.path.rsplit("/", 1)[1]
                lo, hi = map(int, re.fullmatch(r"bytes=([0-9]+)-([0-9]+)", wanted).groups())  # type: ignore[union-attr]
                body = b"".join(s.xorbs[xorb])[lo:hi + 1]
                if xorb == "B" and s.gzip_b is not None:
                    return self.answer(206, s.gzip_b, {"Content-Encoding": "gzip"})
                if xorb == "B" and s.cut_b is not None:
                    self.send_response(206)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[:s.cut_b])
                    self.close_connection = True
                    return
                self.answer(206, body, {})
            else:
                self.answer(404, b"", {})

        def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield s, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fetch(s: Store, url: str, tmp: Path, name: str | None = None, size: int | None = None) -> FileFlight:
    """The file fetched over Xet into a flight's partial file, then checked as the proxy checks it
    (``size``: what the listing says, when not the store's)."""
    data = s.data
    flight = FileFlight("w.bin", len(data) if size is None else size, "sha256", hashlib.sha256(data).hexdigest(),
                        tmp / "partial" / "w", tmp / "snapshot" / "w.bin")
    session = UpstreamSession(url, "up-token")
    xet = XetGet(HubSource("acme/m", url, "up-token", None), COMMIT, {"w.bin": name or s.name}, session)
    try:
        with flight.opened() as tee:
            xet.get(flight, tee)
            flight.finish(tee.hexdigest())
    finally:
        session.close()
    return flight


def test_a_file_of_compressed_chunks_is_rebuilt_and_checked_against_its_merkle_name(store, tmp_path):
    s, url = store
    flight = fetch(s, url, tmp_path)
    assert flight.checked and flight.final.read_bytes() == s.data
    assert not (tmp_path / "partial" / "w.xet").exists()  # the chunk log goes once the file is whole
    xorbs = [(p, r) for p, r in s.asked if p.startswith("/xorbs/")]
    assert [p for p, _ in xorbs] == ["/xorbs/A", "/xorbs/B"]  # each term's range once


def test_a_file_whose_chunks_are_not_its_xet_name_is_refused_and_kept_nowhere(store, tmp_path):
    s, url = store
    other = merkle.hex_of(merkle.file_hash([(merkle.chunk_hash(b"other"), 5)]))
    with pytest.raises(FileCut, match="Xet hash"):
        fetch(s, url, tmp_path, other)
    partial = tmp_path / "partial" / "w"
    assert not partial.exists() or partial.stat().st_size == 0  # fetched whole next time
    assert not (tmp_path / "snapshot" / "w.bin").exists()


def test_a_store_that_sends_more_than_the_listed_size_is_stopped_there(store, tmp_path):
    s, url = store
    with pytest.raises(OcibridgeError, match="hold more than"):
        fetch(s, url, tmp_path, size=len(s.data) - 1)
    assert (tmp_path / "partial" / "w").stat().st_size <= len(s.data) - 1


def test_a_xorb_answer_that_inflates_is_decoded_a_piece_at_a_time(store, tmp_path):
    """A xorb's bytes sent gzipped with 64 MiB of zeros after them (64 KiB on the wire): what the
    fetch holds at once stays near a piece, not the 64 MiB one network read inflates to."""
    import gzip
    import tracemalloc

    s, url = store
    s.gzip_b = gzip.compress(b"".join(s.xorbs["B"]) + bytes(64 << 20), compresslevel=9)
    tracemalloc.start()
    try:
        flight = fetch(s, url, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert flight.checked and flight.final.read_bytes() == s.data
    assert peak < 16 << 20, peak


def test_a_cut_in_the_second_term_resumes_there_with_the_first_terms_chunks_kept(store, tmp_path, monkeypatch):
    monkeypatch.setattr(xetfetch, "PAUSE", 0)
    s, url = store
    s.cut_b = 100  # inside B's first chunk: none of B lands
    with pytest.raises(OcibridgeError, match="over Xet"):
        fetch(s, url, tmp_path)
    assert len([p for p, _ in s.asked if p == "/xorbs/B"]) == xetfetch.TRIES
    s.cut_b, s.asked = None, []
    flight = fetch(s, url, tmp_path)  # a new fetch: what the partial file and its chunk log hold
    assert flight.final.read_bytes() == s.data
    held = sum(len(c) for c in s.chunks[:3])
    assert [r for p, r in s.asked if "/reconstructions/" in p] == [f"bytes={held}-{len(s.data) - 1}"]
    assert [p for p, _ in s.asked if p.startswith("/xorbs/")] == ["/xorbs/B"]  # A not again


def test_an_upstream_that_grants_no_xet_read_leaves_the_file_to_resolve(store, tmp_path):
    s, url = store
    s.grant = False
    with pytest.raises(XetUnavailable):
        fetch(s, url, tmp_path)
    assert [p for p, _ in s.asked] == [f"/api/models/acme/m/xet-read-token/{COMMIT}"]


@pytest.mark.parametrize("where", ["cas", "xorbs"])
def test_a_grant_or_reconstruction_naming_the_metadata_address_is_never_connected(store, tmp_path, where):
    """The grant's casUrl, or the reconstruction's fetch URLs, at the cloud's metadata address: a
    loopback upstream's session connects to loopback and public addresses only, refused at once."""
    s, url = store
    s.elsewhere[where] = "http://169.254.169.254"
    with pytest.raises(AddressRefused, match="169.254.169.254, a link-local address: not connected"):
        fetch(s, url, tmp_path)
    assert not (tmp_path / "snapshot" / "w.bin").exists()

