"""Time to the first compiled token, cold against warm from the registry, for a model of ~1.1 B
parameters on a GPU (or the same flow with a tiny model on the CPU).

    python -m bench.warm_gpu                                   # on the device: cuda, 1b, 3 rounds
    python -m bench.warm_gpu --device cpu --size tiny --rounds 2

A local registry; the model (bench/warm_gpu_child.py: a Llama shape, random weights from a fixed
seed) pushed with ``ocibridge push``: its config and weights (``--push weights``) or its config
only (``--push config``); the cache's subject is that manifest either way. Then rounds, each two
processes with empty ``TORCHINDUCTOR_CACHE_DIR`` (``TRITON_CACHE_DIR`` inside it): cold (the model
built, ``torch.compile``, the first forward's logits; the first cold one then attaches the whole
Inductor + Triton cache directory to the model, signed) and warm (``warm_load`` of that directory,
its signature verified, then the same). Each warm output must equal the first cold one bit for
bit. ``--deadline`` stops starting rounds once another would end after it. Printed (and written to
``--out``/warm_gpu.md): medians (min-max) from the process's launch and from the compile call to
the first token, the ratio, the cache's size, the machine and versions.
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

import numpy as np

from tests.signing_keys import key_pair

from .gpu_load import registry

ROOT = Path(__file__).resolve().parent.parent
CHILD = "bench.warm_gpu_child"


def _child(args: list[str], work: Path, *, fresh: bool = True) -> tuple[dict, float]:
    """One child process (with an empty cache directory where ``fresh``): its report and launch time."""
    if fresh:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    cache = work / "inductor"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "triton"))
    launched = time.time()
    proc = subprocess.run([sys.executable, "-m", CHILD, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{CHILD} {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), launched


def _push(model: Path, ref: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(model), ref], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ocibridge push failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def _shown(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def _machine(device: str) -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    if device.startswith("cuda") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        where = f"{torch.cuda.get_device_name()} (sm_{major}{minor}), CUDA {torch.version.cuda}"
    else:
        where = f"CPU ({os.cpu_count()} cores)"
    return (f"{where}, torch {torch.__version__}, triton {triton_version}, Python {sys.version.split()[0]}, "
            f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", choices=("1b", "tiny"), default="1b")
    parser.add_argument("--rounds", type=int, default=3, help="cold/warm pairs at most")
    parser.add_argument("--deadline", type=float, default=420, help="seconds: no round starts that would end later")
    parser.add_argument("--push", choices=("weights", "config"), default="weights")
    parser.add_argument("--out", default=os.environ.get("OUT") or ".")
    options = parser.parse_args()
    began = time.time()
    shape = ["--device", options.device, "--size", options.size]
    with tempfile.TemporaryDirectory(prefix="warm-gpu-") as tmp:
        work = Path(tmp)
        with registry(work / "registry") as host:
            ref = f"{host}/bench/llama:v1"
            weights = ["--weights"] if options.push == "weights" else []
            made, _ = _child(["make", str(work / "model"), *shape, *weights], work / "make")
            pushed = sum(f.stat().st_size for f in (work / "model").rglob("*") if f.is_file())
            push_seconds = _push(work / "model", ref)
            print(f"pushed {options.push} ({pushed / 2**20:.1f} MiB) in {push_seconds:.1f} s; "
                  f"{time.time() - began:.0f} s so far", flush=True)
            private, public = key_pair(work / "keys")
            runs: dict[str, list[dict]] = {"cold": [], "warm": []}
            expected: bytes | None = None
            saved: dict = {}
            pair = 0.0
            for round_ in range(options.rounds):
                if runs["cold"] and time.time() - began + pair > options.deadline:
                    print(f"deadline: {options.deadline:.0f} s would pass in round {round_ + 1}; stopping", flush=True)
                    break
                pair_began = time.time()
                for mode in ("cold", "warm"):
                    flags = (["--warm", "--verify-key", str(public)] if mode == "warm"
                             else ["--save", "--sign-key", str(private)] if not saved else [])
                    report, launched = _child(["run", ref, *shape, "--out", str(work / "logits"), *flags], work / "run")
                    out = (work / "logits").read_bytes()
                    if mode == "cold" and expected is None:
                        expected, saved = out, report["saved"]
                    diff = float(np.abs(np.frombuffer(out, np.float32) - np.frombuffer(expected, np.float32)).max())
                    report.update(mode=mode, launched=launched, equal=out == expected, max_abs_diff=diff,
                                  to_token=report["first_token"] - launched,
                                  compile_to_token=report["first_token"] - report["built"],
                                  load_to_token=report["first_token"] - report["imported"],
                                  restore=report["restored"] - report["imported"])
                    runs[mode].append(report)
                    _write(options, made, runs, saved, push_seconds, pushed)
                    print(f"round {round_ + 1} {mode}: {report['to_token']:.1f} s from launch to the first token, "
                          f"{report['compile_to_token']:.1f} s from torch.compile, restore {report['restore']:.1f} s, "
                          f"FX graph cache hits {report['hits']} misses {report['misses']}, token {report['token']}, "
                          f"logits equal to cold #1: {report['equal']} (max abs diff {diff})", flush=True)
                pair = time.time() - pair_began
    print(_write(options, made, runs, saved, push_seconds, pushed))
    if not all(r["equal"] for r in runs["warm"]):
        raise SystemExit("a warm run's logits differ from the cold run's")


def _write(options: argparse.Namespace, made: dict, runs: dict[str, list[dict]], saved: dict,
           push_seconds: float, pushed: int) -> str:
    """The table so far, written after every run (a run cut off by a time limit keeps the rounds done)."""
    table = _table(options, made, runs, saved, push_seconds, pushed)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "warm_gpu.md").write_text(table + "\n")
    (out / "warm_gpu.json").write_text(json.dumps({"runs": runs, "saved": saved}, indent=1) + "\n")
    return table


def _table(options: argparse.Namespace, made: dict, runs: dict[str, list[dict]], saved: dict,
           push_seconds: float, pushed: int) -> str:
    params = (runs["cold"] or [made])[0].get("params", 0)
    lines = [f"# bench.warm_gpu: {params:,} parameters ({options.size}), {options.device}, "
             f"{len(runs['cold'])} cold / {len(runs['warm'])} warm rounds",
             f"{_machine(options.device)}; cache key device {saved.get('key', {}).get('device')}",
             f"model pushed: {options.push} ({pushed / 2**20:.1f} MiB, {push_seconds:.1f} s); cache attached: "
             f"Inductor + Triton directory, {saved.get('size', 0) / 2**20:.1f} MiB, {saved.get('files')} files, "
             f"signed ({', '.join(saved.get('signed', []))})", "",
             "| | launch to first token | warm load (or model build) to first token | torch.compile to first token "
             "| warm load | FX cache hits/misses | cold / warm (launch) | cold / warm (load) | cold / warm (compile) "
             "| logits equal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    cold_launch = [r["to_token"] for r in runs["cold"]]
    cold_compile = [r["compile_to_token"] for r in runs["cold"]]
    cold_load = [r["load_to_token"] for r in runs["cold"]]
    for mode in ("cold", "warm"):
        rows = runs[mode]
        launch, compile_ = [r["to_token"] for r in rows], [r["compile_to_token"] for r in rows]
        load = [r["load_to_token"] for r in rows]
        ratio = tuple(f"{statistics.median(c) / statistics.median(w):.2f}x" if mode == "warm" and rows else ""
                      for c, w in ((cold_launch, launch), (cold_load, load), (cold_compile, compile_)))
        hits = ", ".join(f"{r['hits']}/{r['misses']}" for r in rows)
        restore = _shown([r["restore"] for r in rows]) if mode == "warm" else ""
        equal = "all" if rows and all(r["equal"] for r in rows) else f"{sum(r['equal'] for r in rows)}/{len(rows)}"
        lines.append(f"| {mode} | {_shown(launch)} | {_shown(load)} | {_shown(compile_)} | {restore} | {hits} "
                     f"| {ratio[0]} | {ratio[1]} | {ratio[2]} | {equal} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
