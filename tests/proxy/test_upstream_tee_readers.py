"""A reader of a file in flight counts as done once it took the file's last bytes: Starlette stops
asking a streamed body for more once its client left, so the end of the iterator may never come,
and the commit's push (which waits for its readers to go quiet) must not wait on it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ocibridge.core.streams import CHUNK
from ocibridge.hubserver.upstream.tee import FileFlight

BODY = b"row,n\n" * (CHUNK // 2)  # three chunks


def test_a_reader_that_took_the_last_bytes_is_done_without_asking_for_the_end(tmp_path: Path):
    final = tmp_path / "snapshot" / "data.csv"
    final.parent.mkdir()
    final.write_bytes(BODY)
    flight = FileFlight("data.csv", len(BODY), "sha256", hashlib.sha256(BODY).hexdigest(),
                        tmp_path / "partial" / "data.csv", final)
    assert flight.adopt()
    for start, end in ((0, None), (10, 20), (len(BODY) - 3, None)):
        chunks = flight.read(start, end)
        got = b""
        while len(got) < (len(BODY) if end is None else end) - start:  # never asked past the last byte
            got += next(chunks)
        assert got == BODY[start:end]
        assert flight.unread_since() is not None, "a reader done with its bytes still counted"
        chunks.close()
        assert flight.readers == 0  # counted once
    reading = flight.read()
    next(reading)  # under way: still counted
    assert flight.unread_since() is None
    reading.close()  # a client that left early: done
    assert flight.unread_since() is not None and flight.readers == 0
