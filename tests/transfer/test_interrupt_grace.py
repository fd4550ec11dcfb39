"""The first interrupt spares a request registered as finishable when it says it can end within
the grace: its socket stays open and its own check does not raise, while every other socket is
shut down; at the grace's limit it is shut down too. Real sockets (socket pairs), no signal."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from ocibridge.core import interrupt


class Estimate:
    def __init__(self, seconds: float | None):
        self.seconds = seconds

    def seconds_to_finish(self) -> float | None:
        return self.seconds


def _shut(sock: socket.socket) -> bool:
    """Whether ``sock`` was shut down (a read returns end of stream at once)."""
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    interrupt.reset()
    for a, b in made:
        a.close()
        b.close()


def _registered(pairs: list[tuple[socket.socket, socket.socket]], estimate: Estimate | None):
    a, b = socket.socketpair()
    pairs.append((a, b))
    interrupt.track(a)
    if estimate is None:
        return a, None
    interrupt.writing_on(a)
    flight_cm = interrupt.finishable(estimate)
    flight = flight_cm.__enter__()
    flight.bind()
    return a, (flight, flight_cm)


def test_a_request_that_can_finish_keeps_its_socket_until_the_limit(pairs) -> None:
    plain, _ = _registered(pairs, None)
    soon, (flight, cm) = _registered(pairs, Estimate(interrupt.GRACE / 2))
    late, (late_flight, late_cm) = _registered(pairs, Estimate(interrupt.GRACE * 2))
    unknown, (unknown_flight, unknown_cm) = _registered(pairs, Estimate(None))
    interrupt.cancel_all()
    assert _shut(plain) and _shut(late) and _shut(unknown)
    assert not _shut(soon)
    flight.check()  # spared: goes on
    with pytest.raises(interrupt.Interrupted):
        late_flight.check()
    with pytest.raises(interrupt.Interrupted):
        interrupt.check()  # everything else stops
    ended = threading.Event()
    threading.Timer(interrupt.GRACE_LIMIT + 1.0, ended.set).start()
    while not _shut(soon):  # the grace's limit shuts it down
        assert not ended.is_set(), "the spared socket was never shut down"
    with pytest.raises(interrupt.Interrupted):
        flight.check()
    for c in (cm, late_cm, unknown_cm):
        c.__exit__(None, None, None)


def test_a_request_that_ended_is_left_alone(pairs) -> None:
    soon, (flight, cm) = _registered(pairs, Estimate(0.0))
    interrupt.cancel_all()
    cm.__exit__(None, None, None)  # answered within the grace: no longer in flight
    threading.Event().wait(interrupt.GRACE_LIMIT + 0.2)
    assert not _shut(soon)  # (a connection back in the pool is the pool's to close)

