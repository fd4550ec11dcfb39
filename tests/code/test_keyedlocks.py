"""core/keyedlocks.py: one holder per key at a time, other keys not held up, and nothing kept once
no one holds or waits (the map does not grow with every key seen)."""

from __future__ import annotations

import threading
import time

from ocibridge.core.keyedlocks import KeyedLocks


def test_one_holder_per_key_and_other_keys_go_on() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    inside, most = [0], [0]
    guard = threading.Lock()

    def work(key: str) -> None:
        with locks.hold(key):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with guard:
                inside[0] -= 1

    threads = [threading.Thread(target=work, args=("same",)) for _ in range(5)]
    for t in threads:
        t.start()
    with locks.hold("other"):  # not held up by "same"
        pass
    for t in threads:
        t.join()
    assert most == [1]
    assert len(locks) == 0


def test_a_failure_inside_releases_the_key() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    try:
        with locks.hold("k"):
            raise ValueError("boom")
    except ValueError:
        pass
    assert len(locks) == 0
    acquired = threading.Event()
    t = threading.Thread(target=lambda: (locks.hold("k").__enter__(), acquired.set()))
    t.start()
    t.join(2)
    assert acquired.is_set()
