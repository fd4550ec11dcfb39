"""The rows a 2-core VM in its first half hour is judged by, as one command: run first thing on a
fresh machine, and again ``--again-after`` minutes after the first pass began (issue 108).

    .venv/bin/python -m bench.fresh_vm                                  # every row, 1 GiB, 5 rounds
    .venv/bin/python -m bench.fresh_vm --again-after 30 --write   # + the second pass; docs/bench-2core-fresh-vm.md
    .venv/bin/python -m bench.fresh_vm --size 64 --repeat 1 --rows pull load   # the flow, quickly
    taskset -c 0,1 bash bench/gpu/boot_rows.sh --rows fresh             # on the GPU machine, pinned to 2 cores

Each row is the bench that measures it, run as a process of its own, in the issue's order:
``bench.pull_row`` (pull verified ÷ max(curl, OpenSSL)), ``bench.shaped_wire --rows push pull``
(÷ curl on a loopback shaped to 1 Gbit/s), ``bench.mount`` (the mount's sequential read ÷ pull, and
its cat ÷ a pull and the FUSE delivery floor's cat at the same time),
``bench.load_tensors`` (÷ pull + load_file), ``bench.shaped_wire --rows load`` (÷ curl on the
shaped wire) and ``bench.publish`` (upload_folder through serve ÷ ``ocibridge push``, Xet and LFS).
A row whose machine lacks what it needs (root, unshare and tc for the shaped wire, /dev/fuse and
fusermount3 for the mount, huggingface_hub for publish) is skipped with the reason. Every bench's
own output goes by as it runs (``--logs DIR``: each kept in a file too); the end is a Markdown
table, the row, its ratio in each pass, the target and whether it is met, headed by the machine's
CPUs (the machine's, and those this process may use), memory and uptime at each pass's start.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocibridge.core.capacity import capacity

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "docs" / "bench-2core-fresh-vm.md"

#: MiB: push's chunk table, which the pull and load rows measure, comes from this size
SMALLEST = 64
#: each figure a row gives: its name, the target, and whether the figure must stay at or under it
Target = tuple[str, float, bool]


@dataclass(frozen=True)
class Row:
    """One bench run and the figures read from its output."""

    name: str
    module: str
    args: Callable[[int, int], list[str]]  # (repeat, size MiB) -> the module's arguments
    figures: list[Target]
    parse: Callable[[str], dict[str, float]]
    needs: Callable[[], str | None] = lambda: None  # why the machine cannot run it (None: it can)
    baseline: bool = False  # whether its bench runs another checkout's code in the same rounds
    long_rounds: bool = False  # a round takes long (the 1 Gbit/s wire: ~9 s a GiB a transfer; publish: seven ways)


@dataclass
class Pass:
    """One pass over the rows: the machine when it began, and each figure (None: not measured)."""

    machine: str
    figures: dict[str, float | None] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


# -- reading each bench's output ----------------------------------------------------------------
def _first(pattern: str, text: str) -> float | None:
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else None


def _figures(**found: float | None) -> dict[str, float]:
    return {name: value for name, value in found.items() if value is not None}


_OCIBRIDGE_RATIO = r"^\| ocibridge \| [^|]+\| ([0-9.]+)×"


def parse_pull(out: str) -> dict[str, float]:
    """bench.pull_row: the ocibridge row's ÷ floor (the slower of curl and OpenSSL)."""
    return _figures(pull=_first(_OCIBRIDGE_RATIO, out))


def parse_wire(out: str) -> dict[str, float]:
    """bench.shaped_wire --rows push pull: push's ÷ curl, then pull's ÷ floor (curl, on this wire)."""
    push, _, pull = out.partition("\npull 1x")
    return _figures(**{"wire push": _first(_OCIBRIDGE_RATIO, push),
                       "wire pull": _first(_OCIBRIDGE_RATIO, pull) if pull else None})


def parse_mount(out: str) -> dict[str, float]:
    """bench.mount: the sequential read's throughput against pull's (``pull ÷ cat``), and the cat's
    time against its floor, a pull and the FUSE delivery floor's cat at the same time: where the
    row misses its target, the floor that stops it, measured in the same rounds."""
    return _figures(mount=_first(r"whole file, sequential: cat through the mount.*\| ([0-9.]+)× pull's \|", out),
                    **{"mount floor": _first(r"at the same time took [0-9.]+ s: the mount's cat ÷ that: \*\*([0-9.]+)×",
                                             out)})


def parse_load(out: str) -> dict[str, float]:
    """bench.load_tensors: load_tensors ÷ (pull + load_file)."""
    return _figures(load=_first(r"load_tensors / \(pull \+ load_file\): \*\*([0-9.]+)×\*\*", out))


def parse_wire_load(out: str) -> dict[str, float]:
    """bench.shaped_wire --rows load: load_tensors ÷ curl to /dev/null."""
    return _figures(**{"wire load": _first(r"^\s*- load_tensors: [0-9.]+ s, \*\*([0-9.]+)×\*\* curl", out)})


def parse_publish(out: str) -> dict[str, float]:
    """bench.publish: upload_folder through serve ÷ ocibridge push, over Xet and over LFS."""
    return _figures(**{"publish xet": _first(r"through serve, Xet[^|]*\|[^|]*\| \*\*([0-9.]+)×\*\*", out),
                       "publish xet floor": _first(r"floor of Xet[^|]*measured: the work at once \|.*the row ÷ it: "
                                                   r"\*\*([0-9.]+)×", out),
                       "publish lfs floor": _first(r"floor of LFS[^|]*measured: the work at once \|.*the row ÷ it: "
                                                   r"\*\*([0-9.]+)×", out),
                       "publish lfs": _first(r"through serve, LFS[^|]*\|[^|]*\| \*\*([0-9.]+)×\*\*", out)})


# -- what each row needs ------------------------------------------------------------------------
def needs_tools(*names: str) -> Callable[[], str | None]:
    def why() -> str | None:
        missing = [n for n in names if shutil.which(n) is None]
        return f"no {', '.join(missing)} on PATH" if missing else None
    return why


def needs_shaping() -> str | None:
    """The shaped wire: root, a network namespace of its own, and tc (or pyroute2) to shape it."""
    if os.geteuid() != 0:
        return "needs root (unshare -n, tc)"
    if shutil.which("unshare") is None:
        return "no unshare on PATH"
    if shutil.which("tc") is None and importlib.util.find_spec("pyroute2") is None:
        return "neither tc nor the pyroute2 package"
    tried = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, check=False)
    if tried.returncode:
        return f"unshare -n fails here: {tried.stderr.strip() or tried.returncode}"
    return needs_tools("curl")()


def needs_fuse() -> str | None:
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    return needs_tools("fusermount3", "curl")()


def needs_hub() -> str | None:
    missing = [m for m in ("huggingface_hub", "hf_xet") if importlib.util.find_spec(m) is None]
    return f"no {', '.join(missing)} installed" if missing else needs_tools("curl")()


ROWS: list[Row] = [
    Row("pull", "bench.pull_row", lambda r, s: ["--repeat", str(r), "--size-mib", str(s)],
        [("pull", 1.05, True)], parse_pull, needs_tools("curl", "openssl"), baseline=True),
    Row("wire", "bench.shaped_wire", lambda r, s: ["--rows", "push", "pull", "--repeat", str(r), "--size-mib", str(s)],
        [("wire push", 1.05, True), ("wire pull", 1.05, True)], parse_wire, needs_shaping, long_rounds=True),
    Row("mount", "bench.mount", lambda r, s: ["--repeat", str(r), "--size", str(s)],
        [("mount", 0.9, False), ("mount floor", 1.05, True)], parse_mount, needs_fuse),
    Row("load", "bench.load_tensors", lambda r, s: ["--repeat", str(r), "--size", str(s)],
        [("load", 0.6, True)], parse_load, needs_tools("curl"), baseline=True),
    Row("wire-load", "bench.shaped_wire", lambda r, s: ["--rows", "load", "--repeat", str(r), "--size-mib", str(s)],
        [("wire load", 1.05, True)], parse_wire_load, needs_shaping, baseline=True, long_rounds=True),
    Row("publish", "bench.publish", lambda r, s: ["--sizes", str(s), "--repeat", str(r)],
        [("publish xet", 1.3, True), ("publish xet floor", 1.05, True), ("publish lfs", 1.2, True),
         ("publish lfs floor", 1.05, True)], parse_publish,
        needs_hub, long_rounds=True),
]

#: what each figure is, as the issue's table names it
LABELS = {
    "pull": "pull verified ÷ max(curl, OpenSSL)",
    "wire push": "push on a 1 Gbit/s shaped wire ÷ curl",
    "wire pull": "pull on a 1 Gbit/s shaped wire ÷ curl",
    "mount": "the mount's sequential read ÷ pull (throughput)",
    "mount floor": "the mount's cat ÷ its floor, pull and a FUSE delivery at once (time)",
    "load": "`load_tensors` ÷ (pull + `load_file`)",
    "wire load": "`load_tensors` on the 1 Gbit/s wire ÷ curl",
    "publish xet": "publish through serve ÷ `ocibridge push`, Xet",
    "publish xet floor": "publish over Xet ÷ its floor, the client, the registry and serve's least work at once (time)",
    "publish lfs": "publish through serve ÷ `ocibridge push`, LFS",
    "publish lfs floor": "publish over LFS ÷ its floor, the client's hashing, then the registry and serve's least work "
                         "at once (time)",
}


# -- the machine ---------------------------------------------------------------------------------
def machine_line() -> str:
    """CPUs (the machine's and this process's), memory (total, available to this process), uptime, load."""
    have = capacity()
    total = _meminfo_kib("MemTotal")
    uptime = float(Path("/proc/uptime").read_text().split()[0]) if Path("/proc/uptime").exists() else float("nan")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    memory = f"{total / 2**20:.1f} GiB" if total else "?"
    available = f"{have.memory / 2**30:.1f} GiB" if have.memory is not None else "?"
    return (f"{os.cpu_count()} CPUs ({have.cpus} this process may use), memory {memory} ({available} available), "
            f"up {uptime / 60:.1f} min, load {load}")


def _meminfo_kib(key: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


# -- running ---------------------------------------------------------------------------------------
def run_row(row: Row, repeat: int, size: int, logs: Path | None, label: str,
            baseline: str | None = None) -> tuple[dict[str, float], str | None]:
    """The row's bench as a process, its output passed through as it comes; its figures, or why none."""
    why = row.needs()
    if why is not None:
        print(f"== {row.name}: skipped, {why}", flush=True)
        return {}, f"skipped: {why}"
    command = [sys.executable, "-m", row.module, *row.args(repeat, size),
               *(["--baseline", baseline] if baseline and row.baseline else [])]
    print(f"== {row.name}: {' '.join(command[1:])} ({machine_line()})", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines: list[str] = []
    with subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    out = "".join(lines)
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{label}-{row.name}.log").write_text(out)
    found = row.parse(out)
    if proc.returncode or not found:
        return found, f"failed: exit {proc.returncode}" + ("" if found else ", no figure in its output")
    return found, None


def run_pass(rows: list[Row], repeat: int, size: int, logs: Path | None, label: str,
             baseline: str | None = None, long_repeat: int | None = None) -> Pass:
    result = Pass(machine_line())
    print(f"# pass {label}: {result.machine}", flush=True)
    for row in rows:
        rounds = long_repeat if row.long_rounds and long_repeat is not None else repeat
        found, problem = run_row(row, rounds, size, logs, label, baseline)
        for name, _, _ in row.figures:
            result.figures[name] = found.get(name)
            if problem is not None and name not in found:
                result.skipped[name] = problem
    return result


def met(value: float | None, target: float, at_most: bool) -> str:
    if value is None:
        return "–"
    return "yes" if (value <= target if at_most else value >= target) else "no"


def table(rows: list[Row], passes: list[tuple[str, Pass]]) -> str:
    """The rows' figures in each pass, the target, and whether each pass met it."""
    heads = " | ".join(label for label, _ in passes)
    lines = [*(f"- {label}: {p.machine}" for label, p in passes), "",
             f"| row | {heads} | target | met |", "|---|" + "---|" * len(passes) + "---|---|"]
    for row in rows:
        for name, target, at_most in row.figures:
            cells = []
            for _, p in passes:
                value = p.figures.get(name)
                cells.append(f"{value:.2f}×" if value is not None else p.skipped.get(name, "–"))
            verdict = ", ".join(met(p.figures.get(name), target, at_most) for _, p in passes)
            lines.append(f"| {LABELS[name]} | {' | '.join(cells)} | {'≤' if at_most else '≥'} {target}× | {verdict} |")
    return "\n".join(lines)


def section(argv: list[str], rows: list[Row], passes: list[tuple[str, Pass]]) -> str:
    commit = checkout_commit()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = f"python -m bench.fresh_vm {' '.join(argv)}".strip()
    return f"\n## Fresh-machine rows (issue 108): `{command}` (git {commit}, {when})\n\n{table(rows, passes)}\n"


def checkout_commit() -> str:
    """This checkout's commit; "not a git checkout" for a copy of the tree inside another repository's
    folder (the device machines get such a copy: git would name the enclosing repository's commit)."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=False).stdout.split()
    if len(top) != 2 or Path(top[0]).resolve() != REPO_ROOT:
        return "not a git checkout"
    return top[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fresh_vm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="MiB of each row's model (default 1024)")
    p.add_argument("--repeat", type=int, default=5, help="alternating rounds of each row (default 5)")
    p.add_argument("--long-repeat", type=int, default=None, metavar="N",
                   help="rounds of the rows whose rounds take long: the two 1 Gbit/s wire rows (~9 s a GiB a "
                        "transfer) and publish (seven ways a round); default: --repeat")
    p.add_argument("--again-after", type=float, default=None, metavar="MIN",
                   help="run every row again MIN minutes after the first pass began (e.g. 30)")
    p.add_argument("--rows", nargs="+", choices=[r.name for r in ROWS], default=[r.name for r in ROWS],
                   help="which rows (default: all, in the issue's order)")
    p.add_argument("--baseline", default=None,
                   help="another checkout whose code the pull and load rows run in the same rounds (in the logs)")
    p.add_argument("--logs", type=Path, default=None, help="keep each bench's output in a file in this folder")
    p.add_argument("--out", type=Path, default=None, help="write the closing section to this file too")
    p.add_argument("--write", action="store_true", help="append the closing section to docs/bench-2core-fresh-vm.md")
    args = p.parse_args(argv)
    if args.size < SMALLEST:
        p.error(f"--size {args.size}: at least {SMALLEST} MiB (pull's and load's rows need the chunk table "
                "push gives a model from that size)")
    rows = [r for r in ROWS if r.name in args.rows]
    began = time.monotonic()
    passes = [("first pass", run_pass(rows, args.repeat, args.size, args.logs, "first", args.baseline,
                                                args.long_repeat))]
    if args.again_after is not None:
        wait = began + args.again_after * 60 - time.monotonic()
        if wait > 0:
            print(f"# waiting {wait / 60:.1f} min for the second pass", flush=True)
            time.sleep(wait)
        passes.append((f"again ({args.again_after:g} min after)",
                       run_pass(rows, args.repeat, args.size, args.logs, "again", args.baseline,
                                args.long_repeat)))
    text = section(sys.argv[1:] if argv is None else argv, rows, passes)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    if args.write:
        with open(BENCHMARKS, "a") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
