"""The CPUs and memory this process may use, not the machine's: pools and buffers are sized from them.

``os.cpu_count()`` names every CPU of the machine; a process pinned to two of them (``taskset``,
a container's cpuset) or given two CPUs' worth of time (a cgroup's ``cpu.max``, v1's CFS quota)
that starts a pool per CPU of a 16-core host runs eight threads per core: CPU-bound work (hashing,
checking chunks) then only waits for itself, and the threads receiving from the network wait
behind it. Memory likewise: what a container may still take is its cgroup's limit less its use,
not the host's ``MemAvailable``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: the cgroup v2 file system, and v1's controllers (``/proc/self/cgroup`` names the process's group)
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Capacity:
    """``cpus``: CPUs this process may keep busy at once (at least 1); ``memory``: bytes it may
    still take (None: not known)."""

    cpus: int
    memory: int | None


@dataclass(frozen=True)
class Sources:
    """Where the figures are read (other paths in tests)."""

    cgroup_root: Path = CGROUP_ROOT
    proc_cgroup: Path = PROC_CGROUP
    meminfo: Path = MEMINFO


def capacity(sources: Sources = Sources(), affinity: set[int] | None = None) -> Capacity:
    """The CPUs and memory this process may use now (read afresh: a few small files)."""
    return Capacity(usable_cpus(sources, affinity), available_memory(sources))


def cpu_workers(most: int, sources: Sources = Sources()) -> int:
    """Threads for CPU-bound work: ``most``, but no more than the CPUs this process may use."""
    return max(1, min(most, usable_cpus(sources)))


def usable_cpus(sources: Sources = Sources(), affinity: set[int] | None = None) -> int:
    """The CPUs this process may run on (its affinity), fewer where a cgroup's CPU quota allows
    less time than that (whole CPUs, rounded down, at least 1)."""
    if affinity is None:
        affinity = _affinity()
    cpus = max(1, len(affinity))
    quota = _cpu_quota(sources)
    if quota is not None:
        cpus = min(cpus, max(1, int(quota)))
    return cpus


def available_memory(sources: Sources = Sources()) -> int | None:
    """Bytes this process may still take: the kernel's ``MemAvailable``, less where a cgroup's
    memory limit leaves less (its limit less its use, reclaimable page cache counted as free)."""
    known = [m for m in (_meminfo_available(sources.meminfo), _cgroup_headroom(sources)) if m is not None]
    return min(known) if known else None


def _affinity() -> set[int]:
    if sys.platform.startswith("linux"):  # the affinity call exists on Linux alone
        try:
            return set(os.sched_getaffinity(0))
        except OSError:
            pass
    return set(range(os.cpu_count() or 1))


# -- cgroups ----------------------------------------------------------------------------------
def _groups(sources: Sources) -> dict[str, str]:
    """Controller -> the process's group path, from ``/proc/self/cgroup`` (v2: the key ``""``)."""
    try:
        text = sources.proc_cgroup.read_text()
    except OSError:
        return {}
    groups: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            groups[controller] = parts[2]
    return groups


def _group_dirs(base: Path, group: str) -> list[Path]:
    """The process's group and every group above it, innermost first, that exist under ``base``
    (a limit anywhere above applies too). In a container whose cgroup namespace hides the path,
    the path does not exist under the mount: the mount's root is the group."""
    dirs = []
    path = base / group.strip("/") if group.strip("/") else base
    while True:
        if path.is_dir():
            dirs.append(path)
        if path == base or base not in path.parents:
            break
        path = path.parent
    return dirs or ([base] if base.is_dir() else [])


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None


def _cpu_quota(sources: Sources) -> float | None:
    """The tightest CPU quota in CPUs (v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``), None: none."""
    groups = _groups(sources)
    quotas: list[float] = []
    if "" in groups:
        for d in _group_dirs(sources.cgroup_root, groups[""]):
            fields = (_read(d / "cpu.max") or "").split()
            if len(fields) == 2 and fields[0] != "max" and _positive(fields[0]) and _positive(fields[1]):
                quotas.append(int(fields[0]) / int(fields[1]))
    for controller in ("cpu", "cpuacct"):
        if controller not in groups:
            continue
        base = next((b for b in (sources.cgroup_root / "cpu,cpuacct", sources.cgroup_root / "cpu") if b.is_dir()), None)
        if base is None:
            break
        for d in _group_dirs(base, groups[controller]):
            quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
            if quota and period and _positive(quota) and _positive(period):
                quotas.append(int(quota) / int(period))
        break
    return min(quotas) if quotas else None


def _cgroup_headroom(sources: Sources) -> int | None:
    """The tightest of (limit - use + inactive page cache) over the process's memory groups."""
    groups = _groups(sources)
    rooms: list[int] = []
    if "" in groups:
        for d in _group_dirs(sources.cgroup_root, groups[""]):
            room = _room(d, "memory.max", "memory.current", "inactive_file")
            if room is not None:
                rooms.append(room)
    if "memory" in groups and (sources.cgroup_root / "memory").is_dir():
        for d in _group_dirs(sources.cgroup_root / "memory", groups["memory"]):
            room = _room(d, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
            if room is not None:
                rooms.append(room)
    return min(rooms) if rooms else None


#: v1 writes "no limit" as the largest page-aligned 64-bit number
_NO_LIMIT_V1 = 1 << 60


def _room(d: Path, limit_file: str, usage_file: str, reclaimable: str) -> int | None:
    limit, usage = _read(d / limit_file), _read(d / usage_file)
    if not limit or not limit.isdigit() or int(limit) >= _NO_LIMIT_V1:
        return None
    used = int(usage) if usage and usage.isdigit() else 0
    free_cache = 0
    for line in (_read(d / "memory.stat") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == reclaimable and value.strip().isdigit():
            free_cache = int(value)
    return max(0, int(limit) - used + min(free_cache, used))


def _meminfo_available(path: Path) -> int | None:
    for line in (_read(path) or "").splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def _positive(text: str) -> bool:
    return text.isdigit() and int(text) > 0
