"""bench.fresh_vm: each row's figure read from its bench's output as that bench prints it, rows the
machine cannot run skipped with the reason, and the closing table's verdicts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bench import fresh_vm
from bench.fresh_vm import Pass, parse_load, parse_mount, parse_publish, parse_pull, parse_wire, parse_wire_load

PULL = """pull 1x1024MiB, 5 runs each, interleaved; load average (1/5/15 min) 1.0 → 1.2; 2 CPUs; the floor: x
| tool | wall median s (min–max) | ÷ floor | fastest ÷ fastest floor | CPU s (min–max) | peak RSS MB |
|---|---|---|---|---|---|
| curl (floor) | 1.50 (1.40–1.60) | 0.88× | 0.80× | 0.50 (0.40–0.60) | 10 |
| ocibridge | 1.99 (1.90–2.10) | 1.17× | 1.10× | 2.00 (1.90–2.10) | 80 |
"""
PUSH = """push 1x1024MiB, 5 runs each, interleaved; load average (1/5/15 min) 1.0 → 1.1; 2 CPUs
| tool | wall median s (min–max) | ÷ curl | client CPU s (min–max) | registry CPU s | client+registry CPU s | ÷ curl |
|---|---|---|---|---|---|---|
| curl (floor) | 9.00 (8.90–9.10) | 1.00× | 0.50 (0.40–0.60) | 1.00 | 1.50 | 1.00× |
| ocibridge | 9.90 (9.80–10.0) | 1.10× | 2.00 (1.90–2.10) | 1.00 | 3.00 | 2.00× |
| ocibridge --no-chunks | 9.50 (9.40–9.60) | 1.06× | 1.00 (0.90–1.10) | 1.00 | 2.00 | 1.33× |
"""


def test_each_row_reads_its_figure() -> None:
    assert parse_pull(PULL) == {"pull": 1.17}
    assert parse_wire("shaped: qdisc tbf\n" + PUSH + "\n" + PULL.replace("1.17×", "1.13×")) == \
        {"wire push": 1.10, "wire pull": 1.13}
    assert parse_mount("| 1024 MiB | whole file, sequential: cat through the mount (throughput 307 MiB/s) "
                       "| 3.33 (3.2, 3.4) | pull 1.63 (1.6, 1.7) (628 MiB/s) | 0.49× pull's |\n") == {"mount": 0.49}
    assert parse_load("- load_tensors / (pull + load_file): **0.62×** (target ≤ 0.6×)\n") == {"load": 0.62}
    assert parse_wire_load("- against curl to /dev/null, each median (which figure is the machine's floor):\n"
                           "  - curl to /dev/null: 8.60 s, **1.00×** curl to /dev/null\n"
                           "  - load_tensors: 9.20 s, **1.07×** curl to /dev/null\n") == {"wire load": 1.07}
    assert parse_publish(
        "| `upload_folder` through serve, Xet (hf_xet, the default) | 9.1 [9.0, 9.2] | **1.59×** (target ≤ 1.3×) |\n"
        "| `upload_folder` through serve, LFS (`HF_HUB_DISABLE_XET=1`) | 8.5 [8.4] | **1.49×** (target ≤ 1.2×) |\n"
    ) == {"publish xet": 1.59, "publish lfs": 1.49}


def test_the_mount_row_reads_its_floor_as_bench_mount_prints_it() -> None:
    """The cat ÷ its floor: a pull and the FUSE delivery floor's cat at the same time (not the floor alone)."""
    from bench.mount import floor_lines

    row = ("| 1024 MiB | whole file, sequential: cat through the mount (throughput 1162 MiB/s) "
           "| 0.88 s (0.87, 0.90) | pull 0.73 s (0.72, 0.75) (1406 MiB/s) | 0.83× pull's |\n")
    assert parse_mount(row + "\n".join(floor_lines(0.73, 0.88, 0.45, 0.80))) == {"mount": 0.83, "mount floor": 1.1}
    assert parse_mount(row + "\n".join(floor_lines(0.73, 0.88, 0.45, 0.92))) == {"mount": 0.83, "mount floor": 0.96}


def test_an_output_without_the_figure_gives_none() -> None:
    assert parse_pull("Traceback (most recent call last):\n") == {}
    assert parse_wire(PUSH) == {"wire push": 1.10}  # the pull half never printed


def test_a_row_the_machine_cannot_run_is_skipped_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert fresh_vm.needs_shaping() == "needs root (unshare -n, tc)"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert fresh_vm.needs_tools("curl", "openssl")() == "no curl, openssl on PATH"
    rows = [r for r in fresh_vm.ROWS if r.name == "wire"]
    result = fresh_vm.run_pass(rows, 1, 8, None, "first")
    assert result.figures == {"wire push": None, "wire pull": None}
    assert result.skipped["wire push"] == "skipped: needs root (unshare -n, tc)"


def test_the_table_says_which_targets_each_pass_met() -> None:
    rows = [r for r in fresh_vm.ROWS if r.name in ("pull", "mount", "publish")]
    first = Pass("2 CPUs", {"pull": 1.27, "mount": 0.95, "publish xet": 1.2, "publish lfs": None},
                 {"publish lfs": "failed: exit 1"})
    again = Pass("2 CPUs", {"pull": 1.04, "mount": 0.49, "publish xet": 1.31, "publish lfs": 1.1})
    lines = fresh_vm.table(rows, [("first", first), ("again", again)]).splitlines()
    assert "| pull verified ÷ max(curl, OpenSSL) | 1.27× | 1.04× | ≤ 1.05× | no, yes |" in lines
    assert "| the mount's sequential read ÷ pull (throughput) | 0.95× | 0.49× | ≥ 0.9× | yes, no |" in lines
    assert "| the mount's cat ÷ its floor, pull and a FUSE delivery at once (time) | – | – | ≤ 1.05× | –, – |" in lines
    assert "| publish through serve ÷ `ocibridge push`, Xet | 1.20× | 1.31× | ≤ 1.3× | yes, no |" in lines
    assert "| publish through serve ÷ `ocibridge push`, LFS | failed: exit 1 | 1.10× | ≤ 1.2× | –, yes |" in lines


def test_two_passes_end_in_one_table_written_where_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # the wire rows skip themselves at once
    benchmarks = tmp_path / "benchmarks.md"
    benchmarks.write_text("# Benchmarks\n")
    monkeypatch.setattr(fresh_vm, "BENCHMARKS", benchmarks)
    out = tmp_path / "fresh.md"
    assert fresh_vm.main(["--rows", "wire", "wire-load", "--again-after", "0", "--out", str(out), "--write"]) == 0
    section = out.read_text()
    assert "| row | first pass | again (0 min after) | target | met |" in section
    assert "| pull on a 1 Gbit/s shaped wire ÷ curl | skipped: needs root (unshare -n, tc) | skipped: needs root " \
           "(unshare -n, tc) | ≤ 1.05× | –, – |" in section
    assert section.count("CPUs (") == 2  # each pass names the machine as it began
    assert benchmarks.read_text() == "# Benchmarks\n" + section
    assert section in capsys.readouterr().out
    with pytest.raises(SystemExit):
        fresh_vm.main(["--size", "32"])  # under the chunk table's size: refused before anything runs


def test_long_repeat_gives_only_the_rows_of_long_rounds_fewer_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int]] = []

    def record(row: fresh_vm.Row, repeat: int, *_: object) -> tuple[dict[str, float], None]:
        asked.append((row.name, repeat))
        return {}, None

    monkeypatch.setattr(fresh_vm, "run_row", record)
    fresh_vm.run_pass(fresh_vm.ROWS, 5, 64, None, "first", long_repeat=3)
    assert asked == [("pull", 5), ("wire", 3), ("mount", 5), ("load", 5), ("wire-load", 3), ("publish", 3)]
    asked.clear()
    fresh_vm.run_pass(fresh_vm.ROWS, 5, 64, None, "first")
    assert {n for _, n in asked} == {5}
