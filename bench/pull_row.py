"""Only the 1 GiB verified pull row of ``bench.run`` (issue 64): ocibridge's pull into a
directory against its floors, all from one registry, interleaved, several repetitions.

The floors: curl GET to a file (receiving and writing, unverified), ``openssl dgst -sha256``
of the file (hashing alone: the issue's floor is the slower of the two), and Python's bare
``http.client`` read with a hashing thread (``bench.rawpull``). Wall time and the client's
user+system CPU seconds of the same runs, medians and ratios, peak RSS, and the load average:
on a shared machine CPU seconds are the steadier figure. Beside them the machine's landing
floors (``bench.landing``, issue 91): curl to /dev/null, ``dd`` of the size into a new file and
a first touch of that much new memory, each against curl to /dev/null; ``--pages`` names the free
memory each sample lands in (``aged``: as on a machine just booted).

    .venv/bin/python -m bench.pull_row --repeat 5
    .venv/bin/python -m bench.pull_row --repeat 5 --baseline /work/main   # + another checkout's pull
    .venv/bin/python -m bench.pull_row --size-mib 4096 --repeat 1          # memory at 4 GiB
    .venv/bin/python -m bench.pull_row --repeat 5 --pages aged             # the first run after boot
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ocibridge.chunks.chunktable import ANNOTATION_DIGEST

from . import landing, models, tools
from .proc import Sample, Series, python_path, run_measured, run_quiet
from .push_row import row_arguments
from .registries import fresh_registry
from .report import VERIFIED_FLOOR
from .run import _loadavg, compile_package, log
from .scenarios import REPO_ROOT, TAG, Bench, Results

MiB = models.MiB


def main(argv: list[str] | None = None) -> int:
    parser = row_arguments("python -m bench.pull_row", __doc__)
    landing.pages_argument(parser)
    args = parser.parse_args(argv)
    size = args.size_mib * MiB
    before = landing.state()
    compile_package(args.baseline)
    work = Path(tempfile.mkdtemp(prefix="ocibridge-pullrow-", dir=args.workdir))
    loads = [_loadavg()]
    scenario = f"pull 1x{args.size_mib}MiB"
    try:
        bench = Bench(work, args.repeat, Results(), log)
        model = models.single_weight(work / "models" / "m", args.size_mib * MiB, seed=1)
        weight = model.root / model.files[0]
        with fresh_registry(work) as reg:
            bench.seed(reg, model, "", "bench/one")
            manifest = json.loads(run_quiet(["curl", "-sS", "-f", "-H",
                                             "Accept: application/vnd.oci.image.manifest.v1+json",
                                             f"{reg.url}/v2/bench/one/manifests/{TAG}"]))
            blob = manifest["layers"][0]["digest"]
            if ANNOTATION_DIGEST not in (manifest.get("annotations") or {}):
                raise SystemExit("the bench model was pushed without a chunk table: the row would not "
                                 "measure a pull as push's default makes it")
            ref = f"{reg.host}/bench/one:{TAG}"

            def fresh(run: Callable[[Path], Sample]) -> Callable[[int], Sample]:
                def sample(i: int) -> Sample:
                    out = bench.tmp("out-")
                    try:
                        return run(out)
                    finally:
                        shutil.rmtree(out, ignore_errors=True)
                return sample

            def ocibridge(checkout: str) -> Callable[[int], Sample]:
                # the working directory too: ``-m`` imports from it first; a fresh pull cache each
                def run(out: Path) -> Sample:
                    path = python_path(checkout)
                    env = {**bench.env, "PYTHONPATH": path, "OCIBRIDGE_CACHE_DIR": str(out / "cache")}
                    os.sync()
                    return run_measured(tools.ocibridge("pull", ref, str(out / "model")), cwd=checkout, env=env)
                return fresh(run)

            rows: dict[str, Callable[[int], Sample] | str] = {
                "curl (floor)": fresh(lambda out: bench.run(
                    tools.curl_get(reg.url, "bench/one", [(blob, out / "blob")]))),
                "openssl sha256 (floor)": lambda i: bench.run(tools.openssl_sha256([weight])),
                "python http.client (floor 2)": fresh(lambda out: bench.run(
                    [tools.PY, "-m", "bench.rawpull", f"{reg.url}/v2/bench/one/blobs/{blob}", str(out / "blob")])),
                "ocibridge": ocibridge(str(REPO_ROOT)),
            }
            if args.baseline:
                rows["ocibridge (baseline)"] = ocibridge(str(Path(args.baseline).resolve()))
            rows[landing.CURL_NULL] = lambda i: bench.run(landing.curl_null(f"{reg.url}/v2/bench/one/blobs/{blob}"))
            rows[landing.FILE_WRITE] = lambda i: landing.write_sample(bench.workdir / "written", size)
            rows[landing.FRESH_MEMORY] = lambda i: bench.run(landing.fresh_memory(size))

            def prepared(run: Callable[[int], Sample]) -> Callable[[int], Sample]:
                def sample(i: int) -> Sample:
                    landing.prepare(args.pages, size)
                    return run(i)
                return sample
            bench.measure(scenario, {name: run if isinstance(run, str) else prepared(run)
                                     for name, run in rows.items()})
        loads.append(_loadavg())
        series = bench.results.table[scenario]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"machine before: {before}; each sample's pages: {args.pages}\nmachine after: {landing.state()}\n")
    print(render(scenario, series, args.repeat, loads))
    print("\nagainst curl to /dev/null, each median (which figure is the machine's floor):")
    print("\n".join(landing.ratio_lines({name: row.median for name, row in series.items() if row.samples})))
    return 0


def render(scenario: str, series: dict[str, Series], repeat: int, loads: list[str]) -> str:
    floors = [series[f] for f in VERIFIED_FLOOR if series[f].samples]
    base = max(floors, key=lambda s: s.median)
    lines = [f"{scenario}, {repeat} runs each, interleaved; load average (1/5/15 min) {loads[0]} → {loads[-1]}; "
             f"{os.cpu_count()} CPUs; the floor: {base.label} (the slower of {' and '.join(VERIFIED_FLOOR)})",
             "| tool | wall median s (min–max) | ÷ floor | fastest ÷ fastest floor | CPU s (min–max) | peak RSS MB |",
             "|---|---|---|---|---|---|"]
    fastest_floor = max(min(f.times) for f in floors)
    for name, row in series.items():
        if not row.samples:
            lines.append(f"| {name} | failed: {row.extra.get('error')} | | | | |")
            continue
        cpus = [s.cpu for s in row.samples]
        lo, hi = row.spread
        lines.append(f"| {name} | {row.median:.2f} ({lo:.2f}–{hi:.2f}) | {row.median / base.median:.2f}× "
                     f"| {lo / fastest_floor:.2f}× | {statistics.median(cpus):.2f} ({min(cpus):.2f}–{max(cpus):.2f}) "
                     f"| {row.rss_mb:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
