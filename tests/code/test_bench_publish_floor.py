"""bench.publish: the Xet floors divide the CPU seconds by the cores its processes may run on (taskset,
a cgroup's quota), not by the machine's: pinned to 2 of 16 cores, a floor over 16 said 0.13× push."""

from __future__ import annotations

import pytest

from bench import publish
from ocibridge.core.capacity import Capacity


def runs(wall: float, client: float, serve: float = 0.0, registry: float = 0.0) -> publish.Runs:
    return publish.Runs(wall=[wall], client=[client], serve=[serve] if serve else [],
                        registry=[registry] if registry else [], rss=[10.0])


def test_the_xet_floors_use_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publish, "capacity", lambda: Capacity(cpus=2, memory=None))
    rows = {"push": runs(5.0, 2.0, registry=4.0), "curl": runs(4.8, 0.4, registry=4.0),
            "prelude": runs(1.3, 1.3), "first-xorb": runs(0.9, 0.0),
            "xet": runs(7.8, 4.0, serve=3.0, registry=4.0), "least-xet": runs(2.0, 2.0)}
    lines = publish.table(1024, rows, ["xet"], "0.1", "0.2")
    assert "(2 this process may use)" in lines[0]
    # (4.0 client + 4.0 registry + 2.0 least + 2 × 0.4) / 2 = 5.40 s; (4 + 3 + 4) / 2 = 5.50 s
    assert any(line.startswith("| floor of Xet") and "| 5.40 s |" in line and "/ 2 cores" in line for line in lines)
    assert any("at serve's measured CPU | 5.50 s" in line for line in lines)


def test_the_measured_xet_floor_is_the_first_xorb_and_the_work_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.floor_at_once.xet in each round: hf_xet's first xorb at serve + the three at once from a
    sink's first xorb; the row is divided by it, and bench.fresh_vm reads that ratio."""
    from bench.fresh_vm import parse_publish

    monkeypatch.setattr(publish, "capacity", lambda: Capacity(cpus=2, memory=None))
    rows = {"push": runs(5.0, 2.0, registry=4.0), "curl": runs(4.8, 0.4, registry=4.0),
            "prelude": runs(1.3, 1.3), "first-xorb": runs(0.9, 0.0), "at-once": runs(5.0, 0.0),
            "xet": runs(7.8, 4.0, serve=3.0, registry=4.0), "least-xet": runs(2.0, 2.0)}
    lines = publish.table(1024, rows, ["xet"], "0.1", "0.2")
    measured = [line for line in lines if "measured: the work at once" in line]
    assert len(measured) == 1 and "| 5.90 s | **1.18×** |" in measured[0]  # 0.9 + 5.0; ÷ push 5.0
    assert measured[0].endswith("the row ÷ it: **1.32×** |")  # 7.8 / 5.9
    assert parse_publish("\n".join(lines)) == {"publish xet": 1.56, "publish xet floor": 1.32}
    rows.pop("at-once")
    assert not [line for line in publish.table(1024, rows, ["xet"], "0.1", "0.2") if "measured:" in line]


def test_the_measured_lfs_floor_is_the_clients_hashing_and_the_work_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.fresh_vm import parse_publish

    monkeypatch.setattr(publish, "capacity", lambda: Capacity(cpus=2, memory=None))
    rows = {"push": runs(5.0, 2.0, registry=4.0), "curl": runs(4.8, 0.4, registry=4.0),
            "prelude": runs(1.0, 1.0), "first-xorb": runs(0.0, 0.0), "lfs-at-once": runs(5.0, 0.0),
            "lfs": runs(6.6, 1.3, serve=2.0, registry=4.0), "least-lfs": runs(0.9, 0.9)}
    rows["first-xorb"].wall.clear()  # no Xet round
    lines = publish.table(1024, rows, ["lfs"], "0.1", "0.2")
    measured = [line for line in lines if "measured: the work at once" in line]
    assert len(measured) == 1 and measured[0].startswith("| floor of LFS") and "| 6.00 s | **1.20×** |" in measured[0]
    assert parse_publish("\n".join(lines)) == {"publish lfs": 1.32, "publish lfs floor": 1.1}
