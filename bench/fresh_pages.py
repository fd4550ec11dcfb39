"""Run a command with the machine's memory as new as on a virtual machine just booted.

    .venv/bin/python -m bench.fresh_pages -- .venv/bin/python -m bench.page_cost
    .venv/bin/python -m bench.fresh_pages --leave 8192 -- .venv/bin/python -m bench.mount --pages aged

Why (issue 108): the first-half-hour rows lose on a VM just booted because every page there is one
the host has not backed yet: a fault the host serves at its first touch (``bench.page_cost``). A VM
up for hours keeps gigabytes of free memory in blocks under 2 MiB, which its balloon never reports
to the host; the page cache and small allocations take those first, so the loss no longer shows and
a change meant for the first half hour cannot be judged there. This holds those small blocks in a
ballast of 4 KiB anonymous pages (the allocator hands an order-0 page from the smallest free block
first) until less than ``--small`` MiB of them is left, waits for the large blocks the ballast
split to be reported, runs the command, and lets the ballast go when it ends. What is left free
is then blocks of 2 MiB and more, reported to the host: as after boot (and the small blocks of
the kinds the page cache does not take: ``/proc/pagetypeinfo``'s unmovable and reclaimable). It stops early rather than
leave less than ``--leave`` MiB free, and says so. Linux only (``/proc/buddyinfo``).
"""

from __future__ import annotations

import argparse
import mmap
import subprocess
import sys
import time
from pathlib import Path

MiB = 1024 * 1024
PAGE = 4096
REPORTED_ORDER = 9  # page reporting's order here (2 MiB blocks; /sys/module/page_reporting)
STEP = 64 * MiB


def free_blocks() -> tuple[int, int]:
    """Bytes free in blocks under 2 MiB and in blocks of 2 MiB and more, over every zone: of the
    movable kind where ``/proc/pagetypeinfo`` says (root), as the page cache and the ballast take
    only those; of every kind from ``/proc/buddyinfo`` elsewhere."""
    try:
        lines = [line for line in Path("/proc/pagetypeinfo").read_text().splitlines()
                 if line.startswith("Node") and " type " in line and line.split()[5] == "Movable"]
        first = 6
    except OSError:
        lines, first = Path("/proc/buddyinfo").read_text().splitlines(), 4
    small = large = 0
    for line in lines:
        for order, count in enumerate(int(n) for n in line.split()[first:]):
            size = count * PAGE << order
            if order < REPORTED_ORDER:
                small += size
            else:
                large += size
    return small, large


def fill_small_blocks(small_left: int, leave: int) -> tuple[list[mmap.mmap], str]:
    """The ballast: anonymous 4 KiB pages until the small free blocks are down to ``small_left`` bytes."""
    ballast: list[mmap.mmap] = []
    while True:
        small, large = free_blocks()
        if small + large - STEP < leave:  # (first: the floor holds whatever the blocks are)
            return ballast, f"stopped with {small // MiB} MiB of small blocks left: --leave {leave // MiB} MiB reached"
        if small <= small_left:
            return ballast, f"small free blocks down to {small // MiB} MiB"
        region = mmap.mmap(-1, STEP)
        region.madvise(mmap.MADV_NOHUGEPAGE)
        for offset in range(0, STEP, PAGE):
            region[offset] = 1
        ballast.append(region)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", type=int, default=256, help="MiB of small free blocks left unheld (default 256)")
    p.add_argument("--leave", type=int, default=6144, help="MiB of free memory never taken (default 6144)")
    p.add_argument("--settle", type=float, default=10.0, help="seconds waited for page reporting (default 10)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("a command to run is needed after --")
    small, large = free_blocks()
    print(f"fresh_pages: before: {small // MiB} MiB free in blocks < 2 MiB, {large // MiB} MiB in larger", flush=True)
    ballast, why = fill_small_blocks(args.small * MiB, args.leave * MiB)
    time.sleep(args.settle)
    small, large = free_blocks()
    print(
        f"fresh_pages: held {len(ballast) * STEP // MiB} MiB ({why}); free now: {small // MiB} MiB small, "
        f"{large // MiB} MiB in blocks of 2 MiB and more",
        flush=True,
    )
    try:
        return subprocess.run(command).returncode
    finally:
        for region in ballast:
            region.close()


if __name__ == "__main__":
    sys.exit(main())
