"""The hand-over between serve's build ahead and its registry relay (hubserver/uploads/handoff.py):
every byte handed is read once, in order, from buffers the writer reuses; a failure on either
side reaches the other instead of leaving it waiting."""

from __future__ import annotations

import io
import os
import threading

import pytest

from ocibridge.hubserver.uploads.handoff import Handoff


def test_what_is_handed_from_two_buffers_in_turn_is_read_whole_and_in_order():
    data = os.urandom(3 * 1024 * 1024 + 17)
    feed = Handoff()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(io.BufferedReader(feed, 100_000).read()))
    reader.start()
    buffers = (bytearray(256 * 1024), bytearray(256 * 1024))
    for turn, at in enumerate(range(0, len(data), 256 * 1024)):
        buf = buffers[turn % 2]
        piece = data[at:at + len(buf)]
        buf[:len(piece)] = piece  # written over: the batch two puts ago must have been read
        view = memoryview(buf)[:len(piece)]
        feed.put([view[:1000], view[1000:]])
    feed.ends()
    reader.join(10)
    assert got == [data]


def test_a_failure_reaches_the_reader_and_a_gone_reader_the_writer():
    feed = Handoff()
    feed.put([memoryview(b"abc")])
    feed.fail("not the shard's file")
    with pytest.raises(OSError, match="not the shard's file"):
        feed.readinto(memoryview(bytearray(10)))
    gone = Handoff()
    gone.close()
    with pytest.raises(OSError, match="gone"):
        gone.put([memoryview(b"abc")])
