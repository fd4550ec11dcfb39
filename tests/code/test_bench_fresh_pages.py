"""bench.fresh_pages: a command run with the small free blocks held, what is left as new as after boot.
What can be checked without taking gigabytes from the suite: the free lists are read, the command's
status comes back, the memory floor stops the ballast, a missing command is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.fresh_pages import MiB, fill_small_blocks, free_blocks

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.fresh_pages", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_free_lists_are_read_and_within_the_free_memory() -> None:
    small, large = free_blocks()
    total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    assert small > 0 and large >= 0
    assert small + large < total  # (not MemFree: the suite's other workers free memory between the reads)


def test_nothing_is_held_where_the_small_blocks_are_already_few_enough() -> None:
    small, _ = free_blocks()
    ballast, why = fill_small_blocks(small + 16384 * MiB, leave=0)
    assert ballast == []
    assert why.startswith("small free blocks down to ")


def test_the_memory_floor_stops_it_and_the_commands_status_comes_back() -> None:
    done = run("--leave", str(1 << 30), "--settle", "0", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert done.returncode == 3, done.stderr
    held = [line for line in done.stdout.splitlines() if line.startswith("fresh_pages: held ")]
    assert len(held) == 1 and held[0].startswith("fresh_pages: held 0 MiB (stopped with "), done.stdout
    assert "--leave 1073741824 MiB reached" in held[0]


def test_a_missing_command_is_one_line() -> None:
    done = run("--settle", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("error: a command to run is needed after --")
