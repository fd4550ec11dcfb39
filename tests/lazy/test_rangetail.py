"""A range received a unit at a time gives up the unstarted half of its rest, whole units, and
never a unit its reader has started."""

from __future__ import annotations

from ocibridge.lazyread.rangetail import SplitRange

UNIT = 10


def test_the_reader_keeps_half_of_what_it_has_not_started_and_the_rest_is_given_up():
    reading = SplitRange(0, 200, UNIT)
    assert reading.next_stop(0) == 10  # the first unit, started
    assert reading.split(keep=20) == (110, 200)  # 190 unstarted: 95 kept past 10, to a whole unit
    assert reading.end == 110 and reading.rest == 100
    assert reading.split(keep=20) == (60, 110)  # 100: 50 kept
    assert reading.split(keep=20) == (40, 60)  # 50: 25 kept, rounded up to whole units
    assert reading.split(keep=20) == (30, 40)  # 30: keep (20) at least
    assert reading.split(keep=20) is None  # 20 left: all of it kept
    assert [reading.next_stop(at) for at in (10, 20, 30)] == [20, 30, 30]  # it stops at the cut


def test_a_unit_being_received_is_never_given_up_and_a_done_range_gives_nothing():
    reading = SplitRange(0, 45, UNIT)  # (a file's last unit may be short)
    assert reading.next_stop(30) == 40
    assert reading.split(keep=1) is None  # 5 unstarted: one unit at least is kept, and it is the last
    assert reading.next_stop(40) == 45
    assert reading.next_stop(45) == 45 and reading.rest == 0
    assert reading.split(keep=0) is None
