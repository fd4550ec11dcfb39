"""The proxy's memo of the upstream's answers (upstream/memo.py) and its reading of a 429's
Retry-After (upstream/ratewindow.py), on their own: one ask for any number of concurrent askers, an
answer kept for the window and no longer, a failure never kept."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ocibridge.hubserver.upstream.errors import UpstreamBusy
from ocibridge.hubserver.upstream.memo import AnswerMemo
from ocibridge.hubserver.upstream.ratewindow import WAIT_MOST, WAIT_UNSAID, RateWindow, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_concurrent_asks_for_one_revision_make_one_ask_and_a_later_one_reads_the_kept_answer():
    clock, started, release = Clock(), threading.Event(), threading.Event()
    memo: AnswerMemo[str] = AnswerMemo(10, clock)
    asked = []

    def ask() -> str:
        asked.append(1)
        started.set()
        release.wait(10)
        return "c" * 40

    with ThreadPoolExecutor(16) as pool:
        first = pool.submit(memo.get, ("acme/x", "main"), ask, lambda v: ("acme/x", v))
        assert started.wait(10)
        rest = [pool.submit(memo.get, ("acme/x", "main"), ask, lambda v: ("acme/x", v)) for _ in range(15)]
        release.set()
        answers = [first.result(), *(f.result() for f in rest)]
    assert answers == ["c" * 40] * 16 and len(asked) == 1
    assert memo.get(("acme/x", "c" * 40), ask, lambda v: None) == "c" * 40 and len(asked) == 1  # kept by commit too
    clock.now += 10.5  # past the window: asked again
    memo.get(("acme/x", "main"), ask, lambda v: None)
    assert len(asked) == 2
    memo.get(("acme/x", "main"), ask, lambda v: None, again=True)  # a re-check asks, whatever is kept
    assert len(asked) == 3


def test_a_failed_ask_is_shared_by_its_waiters_only_and_never_kept():
    memo: AnswerMemo[str] = AnswerMemo(300, Clock())
    calls = []

    def missing() -> str:
        calls.append(1)
        raise LookupError("not there")

    for _ in range(2):
        with pytest.raises(LookupError):
            memo.get(("acme/y", "main"), missing, lambda v: None)
    assert len(calls) == 2  # made upstream a moment later: seen at once
    assert memo.get(("acme/y", "main"), lambda: "ok", lambda v: None) == "ok"


@pytest.mark.parametrize(("said", "seconds"), [
    ({"retry-after": "7"}, 7.0), ({"retry-after": "0.5"}, 0.5), ({}, WAIT_UNSAID),
    ({"retry-after": "soon"}, WAIT_UNSAID),
    ({"retry-after": "-3"}, 0.0), ({"retry-after": "1e12"}, WAIT_MOST), ({"retry-after": "nan"}, WAIT_UNSAID),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
])
def test_a_retry_after_is_read_as_seconds_or_a_date_within_bounds(said: dict[str, str], seconds: float):
    now = 1445412480.0  # 07:28:00 that day
    assert retry_after(said, now=lambda: now) == pytest.approx(seconds)


def test_a_window_refuses_with_what_is_left_of_it_and_closes():
    clock = Clock()
    window = RateWindow(clock)
    window.check("x", "http://up")  # closed: nothing raised
    window.open_for(3)
    window.open_for(1)  # a shorter 429 meanwhile never shortens it
    clock.now += 0.5
    with pytest.raises(UpstreamBusy) as refused:
        window.check("acme/x@main", "http://up")
    assert refused.value.retry_after == 3 and window.opened == 1
    clock.now += 2.6
    window.check("x", "http://up")


def test_an_answer_its_caller_will_not_have_kept_is_asked_each_time():
    """A repository private or gated upstream (client.py's ``keep``): asked as often as a missing
    one, so the time of its answer tells no reader it exists."""
    memo: AnswerMemo[str] = AnswerMemo(300, Clock())
    asked = []

    def ask() -> str:
        asked.append(1)
        return "private"

    for _ in range(3):
        assert memo.get(("acme/p", "main"), ask, lambda v: None, keep=lambda v: v != "private") == "private"
    assert len(asked) == 3
