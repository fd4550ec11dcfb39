"""serve's memory during a Xet upload does not grow with the file (issue 64): the chunks of a
xorb are kept packed (:class:`ChunkList`), a file's Xet hash is made a xorb at a time
(:class:`merkle.Tree`), and dedupe records a shard a xorb at a time; with the same hashes and
the same files on disk as before, byte for byte."""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import threading
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import blake3
import pytest

from ocibridge.hubserver.xet import dedupe, merkle
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import FileEntry, Segment

MIB = 1024 * 1024


def level_by_level(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    """The xorb hash as the specification builds it: a whole level, then the next."""
    if not chunks:
        return merkle.EMPTY
    level = list(chunks)
    while len(level) > 1:
        nxt, at = [], 0
        while at < len(level):
            left = len(level) - at
            cut = len(level)
            if left > 2:
                cut = at + min(9, left)
                for i in range(at + 2, cut):
                    if int.from_bytes(level[i][0][24:32], "little") % 4 == 0:
                        cut = i + 1
                        break
            group = level[at:cut]
            text = "".join(f"{merkle.hex_of(h)} : {n}\n" for h, n in group)
            nxt.append((blake3.blake3(text.encode(), key=merkle.NODE_KEY).digest(), sum(n for _, n in group)))
            at = cut
        level = nxt
    return level[0][0]


def pairs(rnd: random.Random, n: int) -> list[tuple[bytes, int]]:
    return [(rnd.randbytes(32), rnd.randint(1, 128 * 1024)) for _ in range(n)]


def test_a_xorb_at_a_time_hashes_as_the_whole_level_by_level():
    rnd = random.Random(64)
    for n in [*range(30), 64, 300, 2000]:
        chunks = pairs(rnd, n)
        packed = ChunkList.of(chunks)
        assert merkle.xorb_hash(packed) == merkle.xorb_hash(chunks) == level_by_level(chunks), n
        whole = level_by_level(chunks)
        assert merkle.file_hash(packed) == (blake3.blake3(whole, key=merkle.ZERO_KEY).digest() if n else merkle.EMPTY)
    # a file of several xorbs, the last one taken in part, fed a xorb at a time
    xorbs = [ChunkList.of(pairs(rnd, n)) for n in (1024, 7, 1, 513, 40)]
    tree = merkle.Tree()
    for xorb in xorbs[:-1]:
        tree.extend(xorb)
    tree.extend(xorbs[-1][0:29])
    every = [c for xorb in xorbs[:-1] for c in xorb] + list(xorbs[-1])[:29]
    assert tree.file_hash() == blake3.blake3(level_by_level(every), key=merkle.ZERO_KEY).digest()


def test_a_chunk_list_is_the_list_it_packs():
    rnd = random.Random(7)
    chunks = pairs(rnd, 50)
    packed = ChunkList.of(chunks)
    assert list(packed) == chunks and len(packed) == 50
    assert packed[0] == chunks[0] and packed[-1] == chunks[-1] and packed[17] == chunks[17]
    assert list(packed[10:20]) == chunks[10:20] and list(packed[45:90]) == chunks[45:]
    assert packed.total(3, 9) == sum(n for _, n in chunks[3:9]) and packed.size(4) == chunks[4][1]
    assert packed[10:20] == ChunkList.of(chunks[10:20]) and packed != ChunkList.of(chunks[:49])
    with pytest.raises(IndexError):
        packed[50]
    with pytest.raises(ValueError, match="a chunk hash of 31 bytes"):
        ChunkList.of([(bytes(31), 1)])


def _record_inputs() -> tuple[list[list[tuple[bytes, int]]], list[bytes], list[FileEntry]]:
    rnd = random.Random(64)
    lists = [pairs(rnd, n) for n in (40, 1, 17, 9)]
    names = [merkle.xorb_hash(c) for c in lists]

    def seg(x: int, first: int, end: int) -> Segment:
        return Segment(names[x], sum(n for _, n in lists[x][first:end]), first, end)

    entries = [FileEntry(rnd.randbytes(32), (seg(0, 0, 40), seg(1, 0, 1), seg(2, 0, 5)), rnd.randbytes(32)),
               FileEntry(rnd.randbytes(32), (seg(2, 5, 17),), rnd.randbytes(32)),
               FileEntry(rnd.randbytes(32), (seg(2, 0, 5), seg(3, 2, 9)), rnd.randbytes(32)),
               FileEntry(rnd.randbytes(32), (seg(2, 5, 17),), rnd.randbytes(32))]
    return lists, names, entries


def test_dedupe_writes_the_same_files_byte_for_byte(tmp_path: Path, monkeypatch):
    """Answer shards (read by hf_xet), places and the rest, as the code before issue 64 wrote
    them for the same shards (its digest pinned): files that name each other's xorbs, parts of
    xorbs, a second shard over places already known, a xorb kept and others not."""
    lists, names, entries = _record_inputs()
    keys = iter(random.Random(1).randbytes(32) for _ in range(10))
    monkeypatch.setattr(secrets, "token_bytes", lambda n: next(keys))
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.5)
    found = dedupe.Dedupe(tmp_path / "xorbs", tmp_path / "dd")
    for name, chunks in zip(names, lists, strict=True):
        found.remember_xorb(name, chunks)
    (tmp_path / "xorbs").mkdir()
    (tmp_path / "xorbs" / merkle.hex_of(names[0])).write_bytes(b"x" * 1234)
    found.record("Acme/X", entries[:1])
    found.record("acme/x", entries[1:])
    digest = hashlib.sha256()
    for path in sorted((tmp_path / "dd").rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(tmp_path)).encode() + b"\0" + path.read_bytes())
    assert digest.hexdigest() == "7f7e72f35d2e357cf6742567174b8b7454cbb53cac558d74e0df1d21920e7328"
    assert found.chunks_of(names[2]) == ChunkList.of(lists[2])


def _record_peak(tmp_path: Path, chunks: int) -> int:
    """Bytes Python allocates at most while dedupe records one file of ``chunks`` chunks (in
    xorbs of 1024 chunks, as hf_xet makes them of 64 MiB)."""
    rnd = random.Random(chunks)
    found = dedupe.Dedupe(tmp_path / "xorbs", tmp_path / f"dd{chunks}")
    segments = []
    for _ in range(chunks // 1024):
        xorb = pairs(rnd, 1024)
        name = merkle.xorb_hash(xorb)
        found.remember_xorb(name, xorb)
        segments.append(Segment(name, sum(n for _, n in xorb), 0, 1024))
    entry = FileEntry(os.urandom(32), tuple(segments), os.urandom(32))
    tracemalloc.start()
    try:
        found.record("acme/x", [entry])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_recording_a_4_gib_file_takes_what_a_1_gib_one_does(tmp_path: Path):
    """Before issue 64 the record of a 4 GiB file (65 536 chunks) held ~39 MiB at its peak, 4
    times what 1 GiB did: every chunk of the file as tuples, their places, the answer at once."""
    small, large = _record_peak(tmp_path, 16 * 1024), _record_peak(tmp_path, 64 * 1024)
    assert large < 4 * MIB and large < small + 2 * MIB, (small, large)


def _kept(tmp_path: Path) -> tuple[dedupe.Dedupe, list, list, list]:
    """A dedupe over :func:`_record_inputs`' xorbs, each kept (remembered and on disk)."""
    lists, names, entries = _record_inputs()
    found = dedupe.Dedupe(tmp_path / "xorbs", tmp_path / "dd")
    (tmp_path / "xorbs").mkdir()
    for name, chunks in zip(names, lists, strict=True):
        found.remember_xorb(name, chunks)
        (tmp_path / "xorbs" / merkle.hex_of(name)).write_bytes(b"kept")
    return found, lists, names, entries


def test_an_answer_waits_for_the_records_written_after_their_shards(tmp_path: Path, monkeypatch):
    """A shard is answered before its files are recorded for dedupe (a thread writes the record:
    0.1 s a GiB the client no longer waits for); a dedupe question of that repository asked
    meanwhile waits for the record, so it is answered as if recorded at once. A record that
    fails leaves no question waiting."""
    found, lists, names, entries = _kept(tmp_path)
    write = found.record

    def slow_record(repo_id, shard_entries):
        time.sleep(0.5)
        if repo_id == "acme/broken":
            raise OSError("disk gone")
        write(repo_id, shard_entries)

    monkeypatch.setattr(found, "record", slow_record)
    found.record_later("acme/x", entries)
    first = lists[0][0][0]
    assert found.answer("acme/x", first, lambda sha, size: True) is not None
    assert found.places("acme/x", names[2]) is not None
    monkeypatch.setattr(dedupe, "SETTLE", 600.0)  # a question left waiting would wait past the test
    found.record_later("acme/broken", entries)
    answered: list[object] = []
    asking = threading.Thread(
        target=lambda: answered.append(found.answer("acme/broken", first, lambda sha, size: True)))
    asking.start()
    asking.join(120)
    assert answered == [None], "the question still waits for the record that failed"


def test_an_answer_waits_only_for_the_records_queued_before_it(tmp_path: Path, monkeypatch):
    """An answer waits for the records of its repository queued before it was asked, not for
    every one queued while it waits: shards of one repository kept coming (several uploads at
    once) and a dedupe question waited until none was queued, up to :data:`dedupe.SETTLE`."""
    import threading

    found, lists, names, entries = _kept(tmp_path)
    monkeypatch.setattr(dedupe, "SETTLE", 20.0)
    write, before, after = found.record, threading.Event(), threading.Event()
    gates = iter([before, after])

    def gated_record(repo_id, shard_entries):
        next(gates).wait(30)
        write(repo_id, shard_entries)

    monkeypatch.setattr(found, "record", gated_record)
    found.record_later("acme/x", entries)  # the record the answer needs
    first = lists[0][0][0]
    answers: list[bytes | None] = []
    asking = threading.Thread(target=lambda: answers.append(found.answer("acme/x", first, lambda sha, size: True)))
    asking.start()
    time.sleep(0.5)  # the answer waits now
    found.record_later("acme/x", entries[1:])  # a later shard's record, held until the end
    before.set()
    asking.join(5)
    try:
        assert not asking.is_alive(), "the answer waited for a record queued after it"
        assert answers and answers[0] is not None
    finally:
        after.set()
        asking.join()


def test_the_records_queued_when_serve_stops_are_written_before_it_exits(tmp_path: Path):
    """A shard answered just before serve stopped had its record still queued: the thread that
    writes them is a daemon, which the process's exit ended mid-record, so a later upload of the
    same files was deduped against nothing. Closing serve (SIGTERM or Ctrl-C, once the requests
    in flight are done) now waits for the records queued."""
    import subprocess
    import sys

    lists, names, entries = _record_inputs()
    (tmp_path / "xorbs").mkdir()
    for name in names:
        (tmp_path / "xorbs" / merkle.hex_of(name)).write_bytes(b"kept")
    tests = Path(__file__).parents[1]
    script = f"""
import sys, time
sys.path[:0] = [{str(tests.parent)!r}, {str(tests)!r}, {str(Path(__file__).parent)!r}]
from pathlib import Path
from test_serve_xet_memory import _record_inputs
from ocibridge.api.serve import create_app
from ocibridge.hubserver.xet import dedupe

lists, names, entries = _record_inputs()
serve = create_app("local").state.serve
found = serve.xet_upload.dedupe = dedupe.Dedupe(Path({str(tmp_path / "xorbs")!r}), Path({str(tmp_path / "dd")!r}))
for name, chunks in zip(names, lists):
    found.remember_xorb(name, chunks)
write = found.record
def slow_record(repo_id, shard_entries):
    time.sleep(1)
    write(repo_id, shard_entries)
found.record = slow_record
found.record_later("acme/x", entries)  # a shard answered
serve.close()  # serve stopped: then the process ends
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "OCIBRIDGE_CACHE": str(tmp_path / "cache"),
                               "OCIBRIDGE_STORE": str(tmp_path / "store")})
    assert done.returncode == 0, done.stderr
    found = dedupe.Dedupe(tmp_path / "xorbs", tmp_path / "dd")
    assert found.answer("acme/x", lists[0][0][0], lambda sha, size: True) is not None
    assert found.places("acme/x", names[2]) is not None
