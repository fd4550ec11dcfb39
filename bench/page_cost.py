"""What a page of the page cache costs on this machine: new to the guest, or used before.

    .venv/bin/python -m bench.page_cost              # 6 files of 1 GiB, the first 3 deleted after
    .venv/bin/python -m bench.page_cost --wait 5     # the rest written 5 s after the deletion

Why (issue 64): on these virtual machines memory the guest frees goes back to the host (the
balloon's free page reporting), and the first touch of such a page is a fault the host serves:
writing a file into pages new to the guest costs several times the kernel CPU of writing it
into pages freed a moment ago. Every way that writes to disk pays it (serve's staging, the
registry's blobs, push's cache) as its files grow, which is most of the spread between runs of
``bench.publish`` and ``bench.run``. The script writes ``--files`` files of ``--gib`` GiB one
after the other from one reused buffer, deletes the first half, waits ``--wait`` seconds, and
writes the rest:
the first files take the free pages the kernel hands out (on a machine idle for a while, pages
the host has taken back; after a run that freed memory a moment ago, those pages), the ones
after the deletion reuse the pages just freed. Each line is the kernel CPU seconds of one file.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

MiB = 1024 * 1024


def write(path: Path, gib: int, block: bytes) -> tuple[float, float]:
    """Write ``gib`` GiB to a new file at ``path``: (wall seconds, kernel CPU seconds)."""
    before, started = os.times(), time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for _ in range(gib * 1024 * MiB // len(block)):
            os.write(fd, block)
    finally:
        os.close(fd)
    after = os.times()
    return time.perf_counter() - started, after.system - before.system


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=int, default=1, help="size of each file in GiB")
    p.add_argument("--files", type=int, default=6, help="files written, the first half deleted midway")
    p.add_argument("--wait", type=float, default=0.0, help="seconds between the deletion and the next file")
    p.add_argument("--dir", default=None, help="where to write (a temporary folder by default)")
    args = p.parse_args()
    block = os.urandom(MiB)
    with tempfile.TemporaryDirectory(prefix="page-cost-", dir=args.dir) as tmp:
        paths = [Path(tmp) / f"f{k}" for k in range(args.files)]
        half = args.files // 2
        print("| file | pages | wall s | kernel CPU s per GiB |\n|---|---|---|---|")
        for k, path in enumerate(paths):
            if k == half:
                for done in paths[:half]:
                    done.unlink()
                time.sleep(args.wait)  # the balloon reports free pages to the host after 2 s
            wall, kernel = write(path, args.gib, block)
            pages = "what the kernel hands out" if k < half else f"freed {args.wait:g} s before (file {k - half}'s)"
            print(f"| {k} | {pages} | {wall:.2f} | {kernel / args.gib:.2f} |", flush=True)


if __name__ == "__main__":
    main()
