"""core/freshcache.py: a value is kept while fresh, made again once stale or forgotten, and the
cache never grows past its bound."""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.core.freshcache import FreshCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def counting(values: list[int]) -> Callable[[], int]:
    def make() -> int:
        values.append(len(values))
        return values[-1]
    return make


def test_a_fresh_value_is_not_made_again() -> None:
    clock, made = Clock(), list[int]()
    cache: FreshCache[str, int] = FreshCache(5.0, 10, clock)
    assert cache.get("a", counting(made)) == 0
    clock.now += 4.9
    assert cache.get("a", counting(made)) == 0
    assert made == [0]


def test_a_stale_value_is_made_again_and_stamped_when_asked() -> None:
    clock, made = Clock(), list[int]()
    cache: FreshCache[str, int] = FreshCache(5.0, 10, clock)
    cache.get("a", counting(made))
    clock.now += 5.0
    assert cache.get("a", counting(made)) == 1
    clock.now += 4.9
    assert cache.get("a", counting(made)) == 1


def test_forget_makes_the_next_get_make_it_again() -> None:
    clock, made = Clock(), list[int]()
    cache: FreshCache[str, int] = FreshCache(60.0, 10, clock)
    cache.get("a", counting(made))
    cache.get("b", counting(made))
    cache.forget("a")
    cache.forget("never-kept")
    assert cache.get("a", counting(made)) == 2
    assert cache.get("b", counting(made)) == 1


def test_the_bound_drops_everything_before_keeping_more() -> None:
    clock, made = Clock(), list[int]()
    cache: FreshCache[int, int] = FreshCache(60.0, 3, clock)
    for key in range(3):
        cache.get(key, counting(made))
    assert cache.get(0, counting(made)) == 0
    cache.get(3, counting(made))
    assert len(cache._known) == 1
    assert cache.get(0, counting(made)) == 4


def test_zero_freshness_keeps_nothing() -> None:
    clock, made = Clock(), list[int]()
    cache: FreshCache[str, int] = FreshCache(0.0, 10, clock)
    cache.get("a", counting(made))
    assert cache.get("a", counting(made)) == 1
