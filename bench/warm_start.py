"""A warm start from the registry against a cold one, on the CPU (issue 106).

    .venv/bin/python -m bench.warm_start              # 5 rounds
    .venv/bin/python -m bench.warm_start --rounds 7

A small transformer (bench/warm_child.py) compiled by ``torch.compile`` with Inductor's C++
backend. Once: a process with empty caches compiles it and attaches two caches to the model in a
registry started here, both signed: torch's portable cache (``save_cache_artifacts()``'s bytes,
``warm save --torch``) and Inductor's whole cache directory (``warm save DIR``, the C++ kernels
built included). Then each round runs, as processes of their own with empty
``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``, in turn: cold, warm from the torch bytes,
warm from the directory. Each process reports the seconds from before ``ocibridge.warm_load`` (cold:
before the compile) to the end of its first compiled call; the wall time of the whole process
(interpreter, imports, exit) is taken here. Every output is checked equal to the cold one.
Printed: medians (min-max) over the rounds, the ratio cold/warm, and each cache's size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ocibridge
from tests.modelgen import make_model
from tests.signing_keys import key_pair

from .registries import fresh_registry

ROOT = Path(__file__).resolve().parent.parent
MODES = ("cold", "warm torch", "warm dir")


def _child(args: list[str], work: Path) -> tuple[dict, bytes, float]:
    """One process with empty caches: its report, its output's bytes, its wall seconds."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"), TRITON_CACHE_DIR=str(work / "triton"))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.warm_child", *args, "--out", str(work / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench.warm_child {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), (work / "out").read_bytes(), wall


def _shown(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="warm-start-") as tmp:
        work = Path(tmp)
        with fresh_registry(work) as registry:
            ref = f"{registry.host}/bench/tiny:v1"
            ocibridge.push(str(make_model(work / "model")), ref)
            private, public = key_pair(work / "keys")
            sizes = {}
            for form in ("torch", "dir"):
                report, _, _ = _child(["save", ref, "--form", form, "--sign-key", str(private)], work / "save")
                sizes[form] = report["saved"]["size"]
            firsts: dict[str, list[float]] = {m: [] for m in MODES}
            walls: dict[str, list[float]] = {m: [] for m in MODES}
            expected = None
            for _ in range(options.rounds):
                for mode in MODES:
                    flags = [] if mode == "cold" else ["--warm", "--verify-key", str(public),
                                                        "--form", mode.split()[1]]
                    report, out, wall = _child(["run", ref, *flags], work / "run")
                    expected = out if expected is None else expected
                    if out != expected or (mode != "cold" and report["misses"]):
                        raise SystemExit(f"{mode}: output differs or the cache missed: {report}")
                    firsts[mode].append(report["seconds"])
                    walls[mode].append(wall)
    load = os.getloadavg()[0]
    print(f"# bench.warm_start: {options.rounds} rounds, torch {report['loaded']['key']['torch']}, "
          f"device {report['loaded']['key']['device']}, load average {load:.1f}")
    print("| | to the first compiled call's end | whole process | cold / warm (first call) | cache |")
    print("|---|---|---|---|---|")
    cold = statistics.median(firsts["cold"])
    for mode in MODES:
        ratio = "" if mode == "cold" else f"{cold / statistics.median(firsts[mode]):.2f}x"
        size = "" if mode == "cold" else f"{sizes[mode.split()[1]] / 1024:.0f} KiB"
        print(f"| {mode} | {_shown(firsts[mode])} | {_shown(walls[mode])} | {ratio} | {size} |")


if __name__ == "__main__":
    main()
