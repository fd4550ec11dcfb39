"""Where a push's time beyond the wire goes (issue 108): its start and its tail, this checkout
against another in alternating rounds, each push into a fresh registry.

    .venv/bin/python -m bench.push_stamps --baseline /work/main --rounds 8
    .venv/bin/python -m bench.push_stamps --baseline /work/main --size-mib 1024 --rounds 6
    unshare -n sh -c 'ip link set lo up && tc qdisc add dev lo root tbf rate 1gbit burst 1mb latency 50ms \
        && .venv/bin/python -m bench.push_stamps --baseline /work/main --size-mib 1024 --rounds 6'   # the wire

Each push runs under ``bench/push_stamp_child.py``, which stamps in the process when each
request left and when the first blob's ``PUT ?digest=`` was answered. Per row, the median (min)
of: exec → first request, first request → first PATCH, exec → first PATCH, first PATCH → the
blob's answer (the wire), the blob's answer → the last request, the last request → exit, the
blob's answer → exit, the wall, and the client's CPU seconds (all threads; by the first request,
by the first PATCH, by the exit). Digest cache and sample index off (new content), as
``bench.push_row`` runs it; both trees byte-compiled.
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

from . import models
from .proc import python_path
from .registries import fresh_registry
from .run import compile_package
from .scenarios import REPO_ROOT

CHILD = Path(__file__).with_name("push_stamp_child.py")
MiB = models.MiB


def one_push(checkout: str, model: Path, work: Path) -> dict[str, float]:
    """One push of ``model`` by ``checkout``'s ocibridge into a fresh registry: its stamps."""
    out = work / "stamps.json"
    with fresh_registry(work) as reg:
        env = {**os.environ, "OCIBRIDGE_DIGEST_CACHE": "0", "OCIBRIDGE_SAMPLE_INDEX": "0",
               "OCIBRIDGE_CACHE_DIR": str(work / "cache"), "PYTHONPATH": python_path(checkout)}
        os.sync()
        start = time.time()
        child = subprocess.Popen([sys.executable, str(CHILD), str(out), "push", str(model), f"{reg.host}/b/m:v1"],
                                 cwd=checkout, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        end = time.time()
    shutil.rmtree(work / "cache", ignore_errors=True)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"push by {checkout} failed ({os.waitstatus_to_exitcode(status)})")
    s = json.loads(out.read_text())
    requests = s["requests"]
    first, last = requests[0][0], requests[-1][0]
    patch = next(t for t, line in requests if line.startswith("PATCH "))
    answered = s["blob_answered"]
    return {"exec → first request": first - start, "first request → first PATCH": patch - first,
            "exec → first PATCH": patch - start, "first PATCH → blob answered": answered - patch,
            "blob answered → last request": last - answered,
            "last request → exit": end - last, "blob answered → exit": end - answered, "wall": end - start,
            "CPU by the first request": s["cpu_first"], "CPU by the first PATCH": s["cpu_patch"],
            "CPU": usage.ru_utime + usage.ru_stime}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.push_stamps", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, help="the other checkout (e.g. a worktree of main)")
    p.add_argument("--rounds", type=int, default=8, help="alternating rounds (default 8)")
    p.add_argument("--size-mib", type=int, default=64, help="the weight's size (default 64)")
    p.add_argument("--workdir", help="parent of the temporary directory")
    args = p.parse_args(argv)
    compile_package(args.baseline)
    sides = {"baseline": str(Path(args.baseline).resolve()), "this checkout": str(REPO_ROOT)}
    work = Path(tempfile.mkdtemp(prefix="ocibridge-pushstamps-", dir=args.workdir))
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    loads = [os.getloadavg()]
    try:
        model = models.single_weight(work / "models" / "m", args.size_mib * MiB, seed=1)
        for n in range(args.rounds):
            for name in (sides if n % 2 == 0 else reversed(sides)):
                rows[name].append(one_push(sides[name], model.root, work))
                print(f"round {n + 1} {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[name][-1].items()),
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    loads.append(os.getloadavg())
    print(f"\npush 1x{args.size_mib}MiB, {args.rounds} alternating rounds, median (min); load average "
          f"{loads[0][0]:.1f} → {loads[-1][0]:.1f}; {os.cpu_count()} CPUs")
    print("| seconds | " + " | ".join(sides) + " |")
    print("|---|" + "---|" * len(sides))
    for key in rows["baseline"][0]:
        cells = [f"{statistics.median(r[key] for r in rows[name]):.3f} ({min(r[key] for r in rows[name]):.3f})"
                 for name in sides]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
