"""Where ``load_tensors``' process spends the time before its first byte is asked for (issue 91).

    .venv/bin/python -m bench.load_start                    # 5 rounds, a 64 MiB model
    .venv/bin/python -m bench.load_start --baseline DIR     # + another checkout, in the same rounds

On the 1 Gbit/s wire ``load_tensors`` takes curl's time from its first ``connect`` to its last
tensor; what it loses is the process around that: the interpreter's start, the imports and the
set-up before the first ``connect``, and the exit. This bench splits the middle part. Each round
runs, as processes of their own and alternating:

- ``python -c pass`` (the interpreter's start) and ``python -c "import httpx"`` (the HTTP client
  every registry request goes through, a fixed choice, with what it imports where installed:
  httpx's command-line tool's click, rich and pygments; httpcore's anyio and trio);
- ``load_tensors(REF)`` with an audit hook that takes the wall clock at the first
  ``socket.connect``: the script's first line to it, and to the last tensor;
- the same under ``-X importtime``, the hook marking the first ``connect`` on stderr: the imports
  finished before the mark are split by the package that owns each module (its self time:
  ocibridge, httpx, httpcore, httpx's command-line tool's click/rich/pygments, anyio/trio, numpy;
  a standard-library module counts for the package that imported it). importtime's own cost
  inflates these; read them as shares.

Every figure is the median over rounds, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from .load_tensors import MiB, write_model
from .proc import python_path
from .registries import fresh_registry
from .run import compile_package

MARK = "== first connect =="

PROBE = f"""
import sys, time
begun = time.perf_counter()
marked = []
def first_connection(event, args):
    if event == "socket.connect" and not marked:
        marked.append(time.perf_counter())
        sys.stderr.write("{MARK}\\n")
        sys.stderr.flush()
sys.addaudithook(first_connection)
import ocibridge
tensors = ocibridge.load_tensors(sys.argv[1])
ended = time.perf_counter()
print((marked[0] - begun) * 1000, (ended - begun) * 1000)
"""

#: the packages that own the imports before the first connect (the rest: stdlib or "other")
OWNERS = {"ocibridge": "ocibridge", "httpx": "httpx", "httpcore": "httpcore", "h11": "h11",
          "click": "httpx's CLI", "rich": "httpx's CLI", "pygments": "httpx's CLI",
          "markdown_it": "httpx's CLI", "mdurl": "httpx's CLI", "anyio": "anyio/trio", "sniffio": "anyio/trio",
          "trio": "anyio/trio", "outcome": "anyio/trio", "sortedcontainers": "anyio/trio", "attr": "anyio/trio",
          "numpy": "numpy", "certifi": "httpx", "idna": "httpx", "blake3": "blake3"}
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def owner(module: str) -> str:
    root = module.split(".")[0]
    if root in OWNERS:
        return OWNERS[root]
    if root.lstrip("_") in sys.stdlib_module_names or root in sys.builtin_module_names:
        return "stdlib"
    return "other"


def split_imports(stderr: str) -> dict[str, float]:
    """Self time (ms) of the imports finished before the first connect, by owner: a standard
    library module counts for the package that imported it (ssl for httpx, dataclasses for
    ocibridge), found by importtime's nesting (its lines come children first)."""
    lines = []
    for line in stderr.splitlines():
        if line.startswith(MARK):
            break
        m = LINE.match(line)
        if m:
            lines.append((int(m.group(1)) / 1000, (len(m.group(3)) - 1) // 2, m.group(4)))
    spent: dict[str, float] = defaultdict(float)
    stack: list[tuple[int, str]] = []  # (level, owner) of the ancestors, walking parents first
    for self_ms, level, module in reversed(lines):
        while stack and stack[-1][0] >= level:
            stack.pop()
        mine = owner(module)
        if mine == "stdlib" and stack:
            mine = stack[-1][1]
        spent[mine] += self_ms
        stack.append((level, mine))
    return dict(spent)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def timed(cmd: list[str], **kw: object) -> float:
    import time
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    return (time.perf_counter() - t) * 1000


def run(size_mib: int, repeat: int, work: Path, baseline: Path | None) -> list[str]:
    from ocibridge.api.model_ops import push

    py = sys.executable
    with fresh_registry(work) as reg:
        src = work / "model"
        write_model(src, size_mib * MiB, 16)
        ref = f"{reg.host}/bench/start:v1"
        push(str(src), ref)
        cache = work / "cache"
        trees = {"this": Path.cwd()}
        if baseline is not None:
            trees["baseline"] = baseline.resolve()
        compile_package(baseline)  # (both trees as an installed copy is: compiled)
        samples: dict[str, list[float]] = defaultdict(list)
        parts: dict[str, dict[str, list[float]]] = {k: defaultdict(list) for k in trees}

        def probe(name: str, tree: Path) -> None:
            shutil.rmtree(cache, ignore_errors=True)
            path = python_path(str(tree))
            env = {**os.environ, "OCIBRIDGE_CACHE": str(cache), "PYTHONPATH": path}
            done = subprocess.run([py, "-c", PROBE, ref], cwd=str(tree), env=env,
                                  capture_output=True, text=True, check=True)
            to_connect, whole = (float(v) for v in done.stdout.split()[-2:])
            samples[f"{name}: first line to first connect"].append(to_connect)
            samples[f"{name}: first line to last tensor"].append(whole)
            shutil.rmtree(cache, ignore_errors=True)
            timed_imports = subprocess.run([py, "-X", "importtime", "-c", PROBE, ref], cwd=str(tree), env=env,
                                           capture_output=True, text=True, check=True)
            split = split_imports(timed_imports.stderr)
            for key in set(OWNERS.values()) | {"stdlib", "other"}:
                parts[name][key].append(split.get(key, 0.0))
            parts[name]["(all, under importtime: its own cost inflates them)"].append(sum(split.values()))

        for name, tree in trees.items():  # warm-up: every tree compiled, the page cache warm
            probe(name, tree)
        samples.clear()
        for key in parts:
            parts[key].clear()
        for round_ in range(repeat):
            samples["python -c pass"].append(timed([py, "-c", "pass"]))
            samples["python -c 'import httpx'"].append(timed([py, "-c", "import httpx"]))
            samples["python -c 'import numpy'"].append(timed([py, "-c", "import numpy"]))
            order = list(trees.items())
            if round_ % 2:
                order.reverse()
            for name, tree in order:
                probe(name, tree)

    rows = [f"## load_tensors before its first connect ({size_mib} MiB model, {repeat} rounds, ms: median (range))",
            "", "| what | ms |", "|---|---|"]
    rows += [f"| {k} | {ms(v)} |" for k, v in samples.items()]
    for name, split in parts.items():
        rows += ["", f"**{name}**: self time of the imports finished before the first connect, by owner", "",
                 "| owner | ms |", "|---|---|"]
        rows += [f"| {k} | {ms(v)} |" for k, v in sorted(split.items(), key=lambda kv: -statistics.median(kv[1]))
                 if max(v) > 0]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load_start", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=64, help="the model's size in MiB (default 64)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--baseline", type=Path, default=None, help="another checkout, in the same rounds")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="load-start-") as work:
        print("\n".join(run(args.size, args.repeat, Path(work), args.baseline)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
