"""Only the 1 GiB push row of ``bench.run`` (issue 43): curl (the floor: a PUT of a file whose
digest is known), ocibridge's first push (digest cache and sample index off: new content) and
the same ``--no-chunks``, each into an empty registry, interleaved, several repetitions. Wall
time and the client's user+system CPU seconds of the same runs, medians and ratios to curl, and
the load average: on a shared machine CPU seconds are the steadier figure.

    .venv/bin/python -m bench.push_row --repeat 7
    .venv/bin/python -m bench.push_row --repeat 5 --baseline /work/main   # + rows of another checkout
    .venv/bin/python -m bench.push_row --fresh-copy   # + a copy's push to a registry holding it
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import models, tools
from .proc import Sample, python_path, run_measured, run_quiet
from .registries import BenchRegistry, fresh_registry
from .run import _loadavg, compile_package, log
from .scenarios import REPO_ROOT, TAG, Bench, Results

MiB = models.MiB


def row_arguments(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The options every one-row bench shares (this one's, bench.pull_row's)."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    p.add_argument("--size-mib", type=int, default=1024, help="the weight's size (default 1024)")
    p.add_argument("--baseline", help="another checkout whose ocibridge is measured too (e.g. main)")
    p.add_argument("--workdir", help="parent of the temporary directory")
    return p


def main(argv: list[str] | None = None) -> int:
    p = row_arguments("python -m bench.push_row", __doc__)
    p.add_argument("--fresh-copy", action="store_true",
                   help="also push a copy of the model (new directory, same content) to a registry holding it")
    args = p.parse_args(argv)
    compile_package(args.baseline)
    work = Path(tempfile.mkdtemp(prefix="ocibridge-pushrow-", dir=args.workdir))
    loads = [_loadavg()]
    try:
        bench = Bench(work, args.repeat, Results(), log)
        model = models.single_weight(work / "models" / "m", args.size_mib * MiB, seed=1)
        weight = model.root / model.files[0]
        digest = bench.digest(weight)

        registry_cpu: dict[str, list[float]] = {}

        def timed(name: str, reg: BenchRegistry, run: Callable[[], Sample]) -> Sample:
            before = reg.cpu_seconds()
            sample = run()
            registry_cpu.setdefault(name, []).append(reg.cpu_seconds() - before)
            return sample

        def floor(i: int) -> Sample:
            with fresh_registry(work) as reg:
                cmd = tools.curl_put([(weight, tools.start_upload(reg.url, "bench/floor"), digest)])
                return timed("curl (floor)", reg, lambda: bench.run(cmd))

        def ocibridge(name: str, *extra: str, checkout: str | None = None) -> Callable[[int], Sample]:
            home = checkout or str(REPO_ROOT)  # the working directory too: ``-m`` imports from it first
            env = {**bench.env, "OCIBRIDGE_DIGEST_CACHE": "0", "OCIBRIDGE_SAMPLE_INDEX": "0",
                   "PYTHONPATH": python_path(home)}

            def sample(i: int) -> Sample:
                with fresh_registry(work) as reg:
                    cmd = tools.ocibridge("push", str(model.root), f"{reg.host}/bench/ob:{TAG}", *extra)
                    os.sync()
                    return timed(name, reg, lambda: run_measured(cmd, cwd=home, env=env))
            return sample

        def fresh_copy(i: int) -> Sample:
            """A copy of the model in a new directory (same name), pushed under a new tag to a
            registry that holds it: the digest cache knows no file of it, the sample index does."""
            cache = work / f"cache-copy-{i}"
            env = {**bench.env, "OCIBRIDGE_CACHE_DIR": str(cache), "PYTHONPATH": python_path(str(REPO_ROOT))}
            copy = work / f"copy-{i}" / model.root.name
            with fresh_registry(work) as reg:
                run_quiet(tools.ocibridge("push", str(model.root), f"{reg.host}/bench/ob:{TAG}"), env=env)
                shutil.copytree(model.root, copy)
                os.sync()
                reg.mark()
                sample = timed("ocibridge, fresh copy", reg,
                               lambda: run_measured(tools.ocibridge("push", str(copy), f"{reg.host}/bench/ob:v2"),
                                                    cwd=str(REPO_ROOT), env=env))
                sent.append(reg.uploads_since_mark().blob_bytes)
            shutil.rmtree(copy.parent)
            shutil.rmtree(cache)
            return sample

        sent: list[int] = []
        rows: dict[str, Callable[[int], Sample] | str] = {
            "curl (floor)": floor, "ocibridge": ocibridge("ocibridge"),
            "ocibridge --no-chunks": ocibridge("ocibridge --no-chunks", "--no-chunks")}
        if args.fresh_copy:
            rows["ocibridge, fresh copy"] = fresh_copy
        if args.baseline:
            rows["ocibridge (baseline)"] = ocibridge("ocibridge (baseline)", checkout=args.baseline)
            rows["ocibridge --no-chunks (baseline)"] = ocibridge("ocibridge --no-chunks (baseline)",
                                                                 "--no-chunks", checkout=args.baseline)
        bench.measure(f"push 1x{args.size_mib}MiB", rows)
        loads.append(_loadavg())
        series = bench.results.table[f"push 1x{args.size_mib}MiB"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = series["curl (floor)"]
    base_wall = base.median
    base_total = statistics.median(_totals(base.samples, registry_cpu["curl (floor)"]))
    print(f"push 1x{args.size_mib}MiB, {args.repeat} runs each, interleaved; load average (1/5/15 min) "
          f"{loads[0]} → {loads[-1]}; {os.cpu_count()} CPUs")
    print("| tool | wall median s (min–max) | ÷ curl | client CPU s (min–max) | registry CPU s "
          "| client+registry CPU s | ÷ curl |")
    print("|---|---|---|---|---|---|---|")
    for name, row in series.items():
        if not row.samples:
            print(f"| {name} | failed: {row.extra.get('error')} | | | | | |")
            continue
        cpus = [s.cpu for s in row.samples]
        total = statistics.median(_totals(row.samples, registry_cpu[name]))
        lo, hi = row.spread
        print(f"| {name} | {row.median:.2f} ({lo:.2f}–{hi:.2f}) | {row.median / base_wall:.2f}× "
              f"| {statistics.median(cpus):.2f} ({min(cpus):.2f}–{max(cpus):.2f}) "
              f"| {statistics.median(registry_cpu[name]):.2f} | {total:.2f} | {total / base_total:.2f}× |")
    if sent:
        print(f"fresh copy: blob bytes the registry received per run: {sent}")
    return 0


def _totals(samples: list[Sample], registry: list[float]) -> list[float]:
    """Each run's CPU seconds, client and registry together (the registry's share of a push is
    the same work whoever sends: the client's difference is what the tools differ by)."""
    return [s.cpu + r for s, r in zip(samples, registry, strict=True)]


if __name__ == "__main__":
    sys.exit(main())
