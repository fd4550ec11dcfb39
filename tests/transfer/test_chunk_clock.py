"""Chunk sizes chosen by time (chunkclock.py), on a clock the test sets: the first chunk before
any rate is known, the next ones about CHUNK_SECONDS long at the measured rate, growth bounded,
a long wait per chunk making chunks longer, fixed sizes kept, and the estimates an interrupt
uses to let a chunk end (a streamed one early, a fixed one at its declared end)."""

from __future__ import annotations

import pytest

from ocibridge.stores.registry import chunkclock
from ocibridge.stores.registry.chunkclock import (
    CHUNK_SECONDS,
    FIRST_CHUNK,
    GROWTH,
    MAX_CHUNK,
    MIN_CHUNK,
    WAIT_SHARE,
    ChunkClock,
)

MiB = 1024 * 1024


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(chunkclock.time, "monotonic", fake)
    return fake


def _chunk(clock: ChunkClock, t: FakeTime, size: int, body: float, wait: float) -> None:
    """One chunk: its bytes handed over in ``body`` seconds, answered ``wait`` later."""
    clock.started(size)
    t.now += body
    clock.sent(size)
    t.now += wait
    clock.answered()


def test_chunks_take_about_chunk_seconds_at_the_measured_rate(clock_time: FakeTime) -> None:
    clock = ChunkClock()
    assert clock.next_size(10**12) == FIRST_CHUNK
    assert clock.next_size(1000) == 1000  # never past the end
    assert clock.seconds_to_finish() is None  # nothing in flight, no rate yet
    rate = 100 * MiB  # bytes per second, the wait included
    _chunk(clock, clock_time, FIRST_CHUNK, FIRST_CHUNK / rate - 0.01, 0.01)
    assert clock.next_size(10**12) == GROWTH * FIRST_CHUNK  # 50 MiB wanted, growth bounds it
    for size in (GROWTH * FIRST_CHUNK, GROWTH**2 * FIRST_CHUNK):
        assert clock.next_size(10**12) == size
        _chunk(clock, clock_time, size, size / rate - 0.01, 0.01)
    assert rate * CHUNK_SECONDS < GROWTH**3 * FIRST_CHUNK
    assert clock.next_size(10**12) == pytest.approx(rate * CHUNK_SECONDS, abs=1)


def test_a_long_wait_per_chunk_makes_chunks_longer(clock_time: FakeTime) -> None:
    clock = ChunkClock(fixed=None)
    size = 128 * MiB
    _chunk(clock, clock_time, size, 0.85, 0.15)  # 128 MiB/s, 0.15 s waiting for each answer
    assert WAIT_SHARE * 0.15 > CHUNK_SECONDS
    assert clock.next_size(10**12) == pytest.approx(size * WAIT_SHARE * 0.15, abs=1)


def test_sizes_stay_within_bounds(clock_time: FakeTime) -> None:
    slow, fast = ChunkClock(), ChunkClock()
    _chunk(slow, clock_time, FIRST_CHUNK, 10.0, 0.001)  # under 1 MiB/s
    assert slow.next_size(10**12) == MIN_CHUNK
    _chunk(fast, clock_time, MAX_CHUNK, 0.1, 0.001)  # 10 GiB/s
    assert fast.next_size(10**12) == MAX_CHUNK


def test_fixed_sizes_and_the_registrys_minimum(clock_time: FakeTime) -> None:
    clock = ChunkClock(fixed=3 * MiB)
    _chunk(clock, clock_time, 3 * MiB, 0.001, 0.001)
    assert clock.next_size(10**12) == 3 * MiB  # --chunk-size is kept whatever the rate
    clock.require(5 * MiB)  # OCI-Chunk-Min-Length
    assert clock.next_size(10**12) == 5 * MiB
    assert not clock.streamed
    adaptive = ChunkClock()
    assert adaptive.streamed
    adaptive.require(64 * MiB)  # then every chunk that size, with Content-Range
    assert adaptive.next_size(10**12) == 64 * MiB and not adaptive.streamed


def test_a_streamed_chunk_can_end_at_once(clock_time: FakeTime) -> None:
    clock = ChunkClock()
    clock.started(FIRST_CHUNK)
    assert clock.seconds_to_finish() == 0.0  # no answer yet: the interrupt's limit bounds it
    clock.sent(MiB)
    clock_time.now += 0.08
    assert clock.answered() == MiB  # ended early: the bytes sent, not the planned size
    clock.started(40 * MiB)
    assert clock.seconds_to_finish() == pytest.approx(0.08)  # the last answer's wait


def test_seconds_to_finish_counts_the_bytes_left_and_the_wait(clock_time: FakeTime) -> None:
    clock = ChunkClock(fixed=40 * MiB, min_chunk=40 * MiB)  # a Content-Range chunk (the registry's minimum)
    _chunk(clock, clock_time, 40 * MiB, 0.35, 0.05)  # 100 MiB/s, the wait included
    clock.started(40 * MiB)
    assert clock.seconds_to_finish() == pytest.approx(0.4 + 0.05)
    clock_time.now += 0.1
    clock.sent(30 * MiB)
    assert clock.seconds_to_finish() == pytest.approx(0.1 + 0.05)
    clock_time.now += 0.2
    clock.answered()
    assert clock.seconds_to_finish() is None  # nothing in flight
