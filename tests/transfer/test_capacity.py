"""The CPUs and memory a process may use, read from its affinity, its cgroups and /proc/meminfo
(fake files under tmp_path), and the pools sized from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocibridge.core import capacity as cap
from ocibridge.core.capacity import Sources, available_memory, usable_cpus

GiB = 1 << 30


def machine(tmp: Path, cgroup: str, files: dict[str, str], meminfo_kib: int | None = 8 * 1024 * 1024) -> Sources:
    """A fake /proc/self/cgroup naming ``cgroup``, the cgroup files ``files`` (paths under the
    cgroup mount) and a /proc/meminfo."""
    root = tmp / "sys/fs/cgroup"
    root.mkdir(parents=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp / "cgroup").write_text(cgroup)
    (tmp / "meminfo").write_text("MemTotal: 16000000 kB\n"
                                 + (f"MemAvailable: {meminfo_kib} kB\n" if meminfo_kib is not None else ""))
    return Sources(cgroup_root=root, proc_cgroup=tmp / "cgroup", meminfo=tmp / "meminfo")


def test_affinity_bounds_the_cpus_without_a_quota(tmp_path: Path) -> None:
    sources = machine(tmp_path, "0::/user.slice\n", {"user.slice/cpu.max": "max 100000\n"})
    assert usable_cpus(sources, affinity={0, 1}) == 2
    assert usable_cpus(sources, affinity=set(range(16))) == 16


def test_a_v2_quota_of_two_cpus_on_sixteen(tmp_path: Path) -> None:
    sources = machine(tmp_path, "0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "200000 100000\n"})
    assert usable_cpus(sources, affinity=set(range(16))) == 2
    assert usable_cpus(sources, affinity={3}) == 1  # the affinity is tighter


def test_a_quota_above_the_group_applies_and_fractions_round_down(tmp_path: Path) -> None:
    sources = machine(tmp_path, "0::/kubepods/pod1/c1\n", {
        "kubepods/pod1/c1/cpu.max": "max 100000\n",
        "kubepods/pod1/cpu.max": "150000 100000\n",  # 1.5 CPUs for the pod
    })
    assert usable_cpus(sources, affinity=set(range(8))) == 1
    tiny = machine(tmp_path / "t", "0::/\n", {"cpu.max": "10000 100000\n"})  # a tenth of a CPU
    assert usable_cpus(tiny, affinity=set(range(8))) == 1


def test_a_namespaced_group_reads_the_mount_root(tmp_path: Path) -> None:
    # in a container with its own cgroup namespace, /proc/self/cgroup says "/": the files are at the mount's root
    sources = machine(tmp_path, "0::/\n", {"cpu.max": "300000 100000\n"})
    assert usable_cpus(sources, affinity=set(range(32))) == 3


def test_a_v1_cfs_quota(tmp_path: Path) -> None:
    sources = machine(tmp_path, "4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n", {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "400000\n",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        "memory/docker/abc/memory.limit_in_bytes": f"{2 * GiB}\n",
        "memory/docker/abc/memory.usage_in_bytes": f"{GiB}\n",
        "memory/docker/abc/memory.stat": f"cache 0\ntotal_inactive_file {GiB // 2}\n",
    })
    assert usable_cpus(sources, affinity=set(range(16))) == 4
    assert available_memory(sources) == GiB + GiB // 2
    unlimited = machine(tmp_path / "u", "4:cpu,cpuacct:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                                                              "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    assert usable_cpus(unlimited, affinity=set(range(16))) == 16


def test_memory_is_the_tighter_of_the_group_and_meminfo(tmp_path: Path) -> None:
    sources = machine(tmp_path, "0::/job\n", {
        "job/memory.max": f"{4 * GiB}\n",
        "job/memory.current": f"{3 * GiB}\n",
        "job/memory.stat": f"anon {2 * GiB}\ninactive_file {GiB // 4}\n",
    }, meminfo_kib=8 * 1024 * 1024)
    assert available_memory(sources) == GiB + GiB // 4  # 4 - 3 + 0.25 GiB, under the host's 8
    roomy = machine(tmp_path / "r", "0::/job\n", {"job/memory.max": "max\n"}, meminfo_kib=1024 * 1024)
    assert available_memory(roomy) == GiB


def test_nothing_readable_says_unknown_memory(tmp_path: Path) -> None:
    sources = Sources(cgroup_root=tmp_path / "none", proc_cgroup=tmp_path / "none", meminfo=tmp_path / "none")
    assert available_memory(sources) is None
    assert usable_cpus(sources, affinity={0, 1, 2}) == 3


def test_cpu_workers_never_exceed_the_cpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cap, "_affinity", lambda: {0, 1})
    sources = machine(tmp_path, "0::/\n", {})
    assert cap.cpu_workers(8, sources) == 2
    assert cap.cpu_workers(1, sources) == 1
    monkeypatch.setattr(cap, "_affinity", lambda: set(range(16)))
    assert cap.cpu_workers(8, sources) == 8


def test_this_process_reads_its_own_affinity() -> None:
    import os

    assert usable_cpus() <= len(os.sched_getaffinity(0))
    assert cap.capacity().cpus >= 1


def test_the_signing_hash_pool_runs_no_more_threads_than_the_process_has_cpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from ocibridge.signing import omsdir

    for i in range(12):
        (tmp_path / f"f{i}").write_bytes(bytes([i]) * 4096)
    threads: set[str] = set()
    hash_one = omsdir._hash_one

    def recorded(*args: object) -> dict[str, str]:
        threads.add(threading.current_thread().name)
        time.sleep(0.02)  # each file keeps its thread busy a while: an idle pool would reuse one thread
        return hash_one(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(omsdir, "_hash_one", recorded)
    for cpus in ({0}, {0, 1}):
        threads.clear()
        monkeypatch.setattr(cap, "_affinity", lambda cpus=cpus: cpus)
        digests = omsdir.hash_files(tmp_path, [f"f{i}" for i in range(12)])
        assert len(digests) == 12
        assert 1 <= len(threads) <= len(cpus)
