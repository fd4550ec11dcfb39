"""How many ranged parts are in flight: the rule that picks the count, on a clock the test
moves (the transfers themselves are in test_transfer_ranged.py, against a real registry)."""

from __future__ import annotations

import hashlib
import mmap
import os
import threading

import pytest

from ocibridge.stores.inorder_hash import InOrderHash
from ocibridge.stores.part_governor import (
    FAST_STREAM,
    GAIN,
    SETTLE_SECONDS,
    WINDOW_SECONDS,
    PartGovernor,
    PartsAbandoned,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _window(governor: PartGovernor, clock: Clock, rate: float) -> None:
    """One measuring window in which the parts brought ``rate`` bytes per second (until the
    governor judged it, or for a whole window when it no longer judges)."""
    judged = len(governor.history)
    clock.now += SETTLE_SECONDS
    step = WINDOW_SECONDS / 10
    for _ in range(20):
        clock.now += step
        governor.count(int(rate * step))
        if len(governor.history) > judged:
            return


def test_a_capped_link_steps_the_parts_up_to_the_ceiling():
    clock = Clock()
    governor = PartGovernor(16, clock=clock)
    assert governor.allowed == 1
    for expected in (4, 16):
        _window(governor, clock, 20e6 * governor.allowed)  # each connection adds its cap
        assert governor.allowed == expected
    _window(governor, clock, 20e6 * 16)
    assert governor.allowed == 16


def test_a_link_that_caps_nothing_steps_back_to_one_stream_and_stays():
    clock = Clock()
    governor = PartGovernor(16, clock=clock)
    _window(governor, clock, 100e6)
    assert governor.allowed == 4
    _window(governor, clock, 100e6 * 1.02)  # four streams: no better
    assert governor.allowed == 1
    _window(governor, clock, 10e6)  # settled: a later dip changes nothing
    assert governor.allowed == 1
    assert [allowed for allowed, _ in governor.history] == [1, 4]


def test_one_stream_fast_enough_alone_never_tries_more():
    """Loopback or a LAN: one stream past FAST_STREAM is limited by the CPU, which four
    would share; no window is spent on four."""
    clock = Clock()
    governor = PartGovernor(16, clock=clock)
    _window(governor, clock, FAST_STREAM * 1.01)
    assert governor.allowed == 1 and governor.one_at_a_time
    _window(governor, clock, FAST_STREAM * 0.2)  # settled: a later dip changes nothing
    assert governor.allowed == 1
    assert [allowed for allowed, _ in governor.history] == [1]
    clock = Clock()
    governor = PartGovernor(16, clock=clock)
    _window(governor, clock, FAST_STREAM * 0.99)  # just short of it: four are tried
    assert governor.allowed == 4


def test_a_step_that_stops_paying_goes_back_one_step():
    clock = Clock()
    governor = PartGovernor(64, clock=clock)
    _window(governor, clock, 20e6)
    _window(governor, clock, 80e6)
    assert governor.allowed == 16
    _window(governor, clock, 82e6)  # the link itself is full
    assert governor.allowed == 4


def test_a_step_still_ramping_up_is_measured_again():
    """New connections in slow start: the first window after a step falls short of GAIN but
    is rising; it is measured again, and the step is judged on the rate it reaches."""
    clock = Clock()
    governor = PartGovernor(64, clock=clock)
    _window(governor, clock, 20e6)
    _window(governor, clock, 80e6)
    assert governor.allowed == 16
    _window(governor, clock, 80e6 * (GAIN - 0.2))  # ramping: better, not yet by GAIN
    assert governor.allowed == 16
    _window(governor, clock, 80e6 * 3.5)
    assert governor.allowed == 64
    _window(governor, clock, 80e6 * 3.6)  # rising too little: back to 16
    assert governor.allowed == 16 and len(governor.history) == 5


def test_measuring_again_ends():
    clock = Clock()
    governor = PartGovernor(16, clock=clock)
    _window(governor, clock, 20e6)
    rate = 20e6 * 1.1
    for _ in range(3):  # always rising a little, never by GAIN
        _window(governor, clock, rate)
        assert governor.allowed == 4
        rate *= 1.06
    _window(governor, clock, rate)
    assert governor.allowed == 1


def test_a_fixed_count_is_not_adapted():
    clock = Clock()
    governor = PartGovernor(3, adaptive=False, clock=clock)
    assert governor.allowed == 3
    _window(governor, clock, 1e6)
    assert governor.allowed == 3 and governor.history == []


def test_tickets_come_in_order_as_slots_free_and_stop_releases_the_waiting():
    governor = PartGovernor(2, adaptive=False, tickets=5)
    assert [governor.admit(), governor.admit()] == [0, 1]
    admitted: list[int | None] = []
    abandoned: list[bool] = []

    def wait_for_a_slot() -> None:
        try:
            admitted.append(governor.admit())
        except PartsAbandoned:
            abandoned.append(True)

    waiting = threading.Thread(target=wait_for_a_slot)
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and admitted == []  # both slots taken
    assert governor.carry_on() == 2  # a worker that finished a part goes on in its slot
    governor.leave()  # a worker gives its slot up
    waiting.join(5)
    assert admitted == [3]
    late = threading.Thread(target=wait_for_a_slot)
    late.start()
    late.join(0.2)
    assert late.is_alive()
    governor.stop()
    late.join(5)
    assert abandoned == [True]


def test_a_worker_carries_on_only_while_no_fewer_parts_are_allowed():
    """Stepping back from four parts to one: workers leave as they finish until one is left,
    which carries on; when the tickets run out, the waiting are told (None)."""
    clock = Clock()
    governor = PartGovernor(16, clock=clock, tickets=8)
    assert governor.admit() == 0 and governor.one_at_a_time
    _window(governor, clock, 100e6)
    assert governor.allowed == 4 and not governor.one_at_a_time
    assert [governor.admit() for _ in range(3)] == [1, 2, 3]
    _window(governor, clock, 100e6)  # four were no better: back to one
    assert governor.allowed == 1
    assert [governor.carry_on() for _ in range(3)] == [None, None, None]  # three leave
    assert governor.carry_on() == 4  # the last one goes on
    assert [governor.carry_on() for _ in range(3)] == [5, 6, 7]
    assert governor.carry_on() is None  # no tickets left
    assert governor.admit() is None


class RecordingHasher:
    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.fed: list[tuple[str, int]] = []

    def update(self, data: bytes | bytearray | memoryview) -> None:
        # the file's pages come mapped (or read into bytes where it cannot be mapped)
        from_file = not isinstance(data, memoryview) or isinstance(data.obj, mmap.mmap)
        self.fed.append(("read back" if from_file else "buffer", len(data)))
        self._hash.update(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def test_in_order_hash_takes_frontier_buffers_and_reads_back_the_rest(tmp_path):
    """Parts written out of order still hash to the blob's digest; only bytes written ahead
    of the frontier are read back from the file."""
    size = 10_000
    data = os.urandom(size)
    parts = [(0, 4000), (4000, 8000), (8000, 10_000)]
    path = tmp_path / "blob"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    hasher = RecordingHasher()
    feed = InOrderHash(fd, parts, [a for a, _ in parts], hasher)
    released: list[int] = []

    def write(i: int, start: int, end: int) -> None:
        os.pwrite(fd, data[start:end], start)
        feed.wrote(i, start, memoryview(data[start:end]), lambda: released.append(start))

    write(2, 8000, 10_000)  # the last part first: ahead of the frontier
    write(0, 0, 3000)  # at the frontier: handed over as it is
    write(1, 4000, 6000)
    write(0, 3000, 4000)  # joins part 1's bytes: those are read back
    write(1, 6000, 8000)  # at the frontier again, then part 2 is read back
    feed.run()
    os.close(fd)
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()
    assert sorted(released) == [0, 3000, 4000, 6000, 8000]
    # buffers (memoryview) at the frontier, file reads (bytes) for what was written ahead
    assert hasher.fed == [("buffer", 3000), ("buffer", 1000), ("read back", 2000),
                          ("buffer", 2000), ("read back", 2000)]


def test_a_failed_part_is_raised_by_the_hashing_loop(tmp_path):
    fd = os.open(tmp_path / "blob", os.O_RDWR | os.O_CREAT, 0o644)
    feed = InOrderHash(fd, [(0, 10)], [0], hashlib.sha256())
    feed.fail(OSError("the link dropped"))
    with pytest.raises(OSError, match="the link dropped"):
        feed.run()
    os.close(fd)


def test_landed_bytes_are_hashed_from_the_file_in_joined_ranges(tmp_path):
    """Bytes a part spliced into the file (no buffer of ours) are hashed from the file's pages,
    the small hand-overs queued behind each other joined into one mapped range."""
    size = 3 * 1024 * 1024 + 5
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    hasher = RecordingHasher()
    feed = InOrderHash(fd, [(0, size)], [0], hasher)
    for upto in (*range(65536, size, 65536), size):  # one hand-over per 64 KiB landed
        feed.landed(0, upto)
    feed.run()
    os.close(fd)
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()
    assert hasher.fed == [("read back", size)]  # one range, one mapping
