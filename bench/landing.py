"""The machine's landing floors, measured beside a row in the same run (issue 91).

curl to /dev/null touches no memory new to the process; a pull writes every byte into the page
cache and a load into tensors, and both take pages the guest must get first. On the VMs these
benches run on, free blocks of 2 MiB and more go back to the host (the balloon's free page
reporting, ``page_reporting_order`` 9), and the first touch of such a page is a fault the host
serves: 1.3-2.5 s of system time a GiB, against ~0.1 s for blocks freed a few seconds before. A
huge page (numpy's arrays from 4 MiB) always takes such a block; a page-cache page comes first
from the small free blocks a machine busy for hours has, which are never reported, so it likely
pays as well only on a machine just booted, all its free memory in large blocks (docs/benchmarks.md,
issue 91). So beside each row, in every round, this measures what landing the bytes costs the
machine with no project code in it:

- ``curl to /dev/null``: the wire alone;
- ``file write``: ``dd`` of zeros into a new file on the same file system, 64 KiB writes (what
  pull's splices write): the page-cache landing floor;
- ``fresh memory``: ``numpy.empty`` of the size, each page written once, one thread per CPU
  the process may use: the landing floor of a load into memory.

What a sample lands in depends on what the one before it freed, so ``prepare(pages, size)``
runs before each sample and names the state (``--pages``): ``as-is`` (nothing: whatever the
sample before left), ``recycled`` (a process writes 1.5× the size into fresh memory and exits
just before: the sample reuses pages the guest holds, as on a machine busy for a while) or
``aged`` (a wait of ``AGED_WAIT`` s: what the samples before freed has gone back to the host
(here it starts to after ~8 s, all of it by ~30 s), so the sample's large blocks are as new to
the guest as on a machine just booted; the small ones a busy machine has stay the guest's).
``state()`` is the header line naming the machine's memory.

    .venv/bin/python -m bench.landing --repeat 5                   # the floors alone, a fresh registry
    .venv/bin/python -m bench.landing --repeat 3 --pages aged      # each sample into aged pages
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ocibridge.core.capacity import capacity

from .proc import Sample, run_measured

MiB = 1024 * 1024
REPORTING = Path("/sys/module/page_reporting/parameters/page_reporting_order")
HUGEPAGES = Path("/sys/kernel/mm/transparent_hugepage/enabled")
#: the floors' row names, as every bench prints them
CURL_NULL, FILE_WRITE, FRESH_MEMORY = "curl to /dev/null", "file write (dd, 64 KiB)", "fresh memory (first touch)"

#: ``size`` bytes of new anonymous memory, each page written once on ``threads`` threads (numpy's
#: fill lets go of the GIL): prints the seconds from the allocation to the last page
TOUCH = """
import sys, threading, time
import numpy
size, threads = int(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
a = numpy.empty(size, dtype=numpy.uint8)
step = -(-size // threads)
workers = [threading.Thread(target=a[i:i + step].fill, args=(1,)) for i in range(0, size, step)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(time.perf_counter() - t)
"""


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "absent"


def free_blocks() -> tuple[float, float]:
    """GiB of free memory in blocks of order 9 and more (2 MiB: what page reporting gives back to
    the host, and what a huge page takes) and in smaller ones (``/proc/buddyinfo``, all zones).

    A machine just booted has nearly all its free memory in large blocks; one busy for hours has
    much of it in small ones that are never reported, which 4 KiB page-cache pages come from at no
    host fault, while a transparent huge page (numpy's arrays from 4 MiB) always takes a large block.
    """
    large = small = 0
    for line in _read(Path("/proc/buddyinfo")).splitlines():
        counts = [int(c) for c in line.split()[4:] if c.isdigit()]
        for order, count in enumerate(counts):
            if order >= 9:
                large += count << order
            else:
                small += count << order
    page = os.sysconf("SC_PAGE_SIZE")
    return large * page / 2**30, small * page / 2**30


def state() -> str:
    """One line: uptime, free memory and its blocks, the balloon's page reporting, transparent huge pages."""
    meminfo = {line.split(":")[0]: int(line.split()[1]) for line in _read(Path("/proc/meminfo")).splitlines()
               if line.count(" ") and line.split()[1].isdigit()}
    uptime = float(_read(Path("/proc/uptime")).split()[0]) if Path("/proc/uptime").exists() else 0.0
    gib = 1024 * 1024
    order = _read(REPORTING)
    reporting = "absent: freed pages stay the guest's" if order == "absent" else \
        f"{order} (freed pages go back to the host: a page new to the guest is a host fault)"
    large, small = free_blocks()
    return (f"uptime {uptime / 3600:.2f} h; MemFree {meminfo.get('MemFree', 0) / gib:.1f} GiB of "
            f"{meminfo.get('MemTotal', 0) / gib:.1f} (in blocks of 2 MiB and more {large:.1f} GiB, "
            f"smaller {small:.1f} GiB); page_reporting_order {reporting}; "
            f"transparent_hugepage {_read(HUGEPAGES)}; load {os.getloadavg()[0]:.1f}")


#: the states a sample can be made to land in (``prepare``)
PAGES = ("as-is", "recycled", "aged")
#: seconds after which the pages a sample freed have gone back to the host here (measured: a GiB
#: touched 0.1 s after a free of 1.5 GiB took 0.10 s, 8 s after 0.94 s, 30 s after 2.46 s)
AGED_WAIT = 30.0
RECYCLE = "import sys, numpy; numpy.empty(int(sys.argv[1]), dtype=numpy.uint8).fill(1)"


def prepare(pages: str, size: int) -> None:
    """Put the machine's free memory in the state ``pages`` names before a sample of ``size`` bytes."""
    if pages == "aged":
        time.sleep(AGED_WAIT)
    elif pages == "recycled":
        run_measured([sys.executable, "-c", RECYCLE, str(size * 3 // 2)])
    elif pages != "as-is":
        raise ValueError(f"pages: one of {', '.join(PAGES)}, not {pages!r}")


def pages_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--pages`` option every bench with landing floors takes."""
    parser.add_argument("--pages", choices=PAGES, default="as-is",
                        help="the free memory each sample lands in: as-is (default), recycled (freed just "
                             f"before), aged (a {AGED_WAIT:.0f} s wait first: as new as after boot)")


def curl_null(url: str) -> list[str]:
    return ["curl", "-sf", "-o", "/dev/null", url]


def file_write(path: Path, size: int) -> list[str]:
    return ["dd", "if=/dev/zero", f"of={path}", "bs=64K", f"count={-(-size // (64 * 1024))}", "status=none"]


def fresh_memory(size: int) -> list[str]:
    return [sys.executable, "-c", TOUCH, str(size), str(capacity().cpus)]  # a thread per CPU this process may use


def write_sample(path: Path, size: int, env: dict[str, str] | None = None) -> Sample:
    """``file_write`` timed, the file removed after (and flushed first, untimed)."""
    os.sync()
    try:
        return run_measured(file_write(path, size), env=env)
    finally:
        path.unlink(missing_ok=True)


def ratio_lines(medians: dict[str, float], base: str = CURL_NULL) -> list[str]:
    """``- name: 1.23 s, 4.56× curl to /dev/null`` for each median, the base first."""
    if base not in medians or medians[base] <= 0:
        return []
    return [f"- {name}: {m:.2f} s, **{m / medians[base]:.2f}×** {base}" for name, m in medians.items()]


def main(argv: list[str] | None = None) -> None:
    from .registries import fresh_registry

    p = argparse.ArgumentParser(prog="python -m bench.landing", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="MiB (default 1024)")
    p.add_argument("--repeat", type=int, default=5)
    pages_argument(p)
    args = p.parse_args(argv)
    size = args.size * MiB
    print(f"machine: {state()}; each sample's pages: {args.pages}")
    samples: dict[str, list[float]] = {CURL_NULL: [], "curl -o FILE": [], FILE_WRITE: [], FRESH_MEMORY: []}
    with tempfile.TemporaryDirectory(prefix="ocibridge-landing-") as tmp:
        work = Path(tmp)
        with fresh_registry(work) as reg:
            digest = _put_blob(reg.url, work, size)
            url = f"{reg.url}/v2/bench/landing/blobs/{digest}"
            for _ in range(args.repeat):
                prepare(args.pages, size)
                samples[CURL_NULL].append(run_measured(curl_null(url)).seconds)
                prepare(args.pages, size)
                os.sync()
                samples["curl -o FILE"].append(run_measured(["curl", "-sf", "-o", str(work / "got"), url]).seconds)
                (work / "got").unlink()
                prepare(args.pages, size)
                samples[FILE_WRITE].append(write_sample(work / "written", size).seconds)
                prepare(args.pages, size)
                samples[FRESH_MEMORY].append(run_measured(fresh_memory(size)).seconds)
    for name, xs in samples.items():
        print(f"| {name} | {statistics.median(xs):.2f} s ({', '.join(f'{x:.2f}' for x in xs)}) |")
    print("\n".join(ratio_lines({k: statistics.median(v) for k, v in samples.items()})))
    print(f"machine at the end: {state()}")


def _put_blob(registry: str, work: Path, size: int) -> str:
    """A blob of ``size`` random bytes in ``bench/landing``, pushed with curl: its digest."""
    import hashlib

    from . import tools

    path = work / "blob"
    sha = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(-(-size // MiB)):
            block = os.urandom(min(MiB, size - f.tell()))
            sha.update(block)
            f.write(block)
    digest = f"sha256:{sha.hexdigest()}"
    run_measured(tools.curl_put([(path, tools.start_upload(registry, "bench/landing"), digest)], 1))
    path.unlink()
    return digest


if __name__ == "__main__":
    main()
