"""uploads/relay.py's ``Handed``: an LFS upload's bytes handed from the receiving route to the
relay in memory (issue 64). Its last byte goes only with the route's verdict that the bytes hash
to the oid, so the registry's upload cannot end (and make a blob) before serve checked them; a
verdict against cuts it; the route waits while the relay is behind; a relay that is over drops
what is handed instead of holding the route."""

from __future__ import annotations

import asyncio
import io
import threading
import time

import pytest

from ocibridge.hubserver.uploads import relay
from ocibridge.hubserver.uploads.relay import Handed


def _put(hand: Handed, pieces: list[bytes]) -> None:
    asyncio.run(hand.put(pieces))


def _reader(hand: Handed) -> tuple[threading.Thread, list[bytes], list[BaseException]]:
    got: list[bytes] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            with io.BufferedReader(hand, 1024) as r:
                got.append(r.read())
        except OSError as e:
            failed.append(e)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got, failed


def test_the_last_byte_waits_for_the_verdict_then_the_read_ends():
    hand = Handed(10)
    thread, got, failed = _reader(hand)
    _put(hand, [b"01234", b"56789"])
    time.sleep(0.3)
    assert thread.is_alive() and hand._given == 9  # all but the last byte
    hand.end(None)
    thread.join(5)
    assert got == [b"0123456789"] and not failed


def test_a_verdict_against_the_bytes_cuts_the_read():
    hand = Handed(10)
    thread, got, failed = _reader(hand)
    _put(hand, [b"0123456789"])
    hand.end("upload: the bytes sent hash to sha256:aa, not sha256:bb")
    thread.join(5)
    assert not got and "hash to sha256:aa" in str(failed[0])


def _full_with_a_route_waiting(monkeypatch: pytest.MonkeyPatch) -> tuple[Handed, threading.Thread]:
    """A relay 4 bytes behind (all it lets wait), and a route waiting to hand 4 more."""
    monkeypatch.setattr(relay, "HANDED_MAX", 4)
    hand = Handed(100)
    _put(hand, [b"1234"])
    second = threading.Thread(target=_put, args=(hand, [b"5678"]), daemon=True)
    second.start()
    time.sleep(0.3)
    assert second.is_alive()  # the route waits for room (on its loop, not a thread of the pool)
    return hand, second


def test_the_route_waits_while_the_relay_is_behind_and_a_relay_that_is_over_drops_what_comes(monkeypatch):
    hand, second = _full_with_a_route_waiting(monkeypatch)
    assert hand.readinto(memoryview(bytearray(4))) == 4
    second.join(5)
    assert not second.is_alive() and hand._held == 4
    hand.close()  # the relay is over (it failed, or the registry had the blob)
    _put(hand, [b"x" * 50])  # dropped, and the route is not held
    assert hand._held == 0


def test_bytes_that_stop_coming_fail_the_read_after_the_stall(monkeypatch):
    monkeypatch.setattr(relay, "STALL", 0.2)
    hand = Handed(10)
    _put(hand, [b"012"])
    assert hand.readinto(memoryview(bytearray(8))) == 3
    with pytest.raises(OSError, match="stalled"):
        hand.readinto(memoryview(bytearray(8)))


def test_a_route_waiting_for_room_is_woken_when_the_relay_is_over(monkeypatch):
    hand, second = _full_with_a_route_waiting(monkeypatch)
    hand.close()
    second.join(5)
    assert not second.is_alive()


def test_parts_are_taken_whole_or_in_part_as_the_buffer_allows():
    from collections import deque

    parts = deque(memoryview(p) for p in (b"abc", b"defg", b"h"))
    into = bytearray(5)
    assert relay.take_parts(parts, memoryview(into)) == 5 and bytes(into) == b"abcde"
    assert [bytes(p) for p in parts] == [b"fg", b"h"]
    assert relay.take_parts(parts, memoryview(into)) == 3 and bytes(into[:3]) == b"fgh" and not parts
