"""Benchmark ocibridge against curl (the floor), skopeo and oras-py on a real local registry.

    .venv/bin/python -m bench.run                 # full run (~15 min), writes docs/benchmarks.md
    .venv/bin/python -m bench.run --quick         # every size ÷16, a smoke run (~1 min)
    .venv/bin/python -m bench.run --sizes one --repeat 5

Models are generated in a temporary directory (removed at the end unless --keep).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import models, tools
from .cartonzip import write_carton
from .proc import run_quiet
from .registries import fresh_registry
from .report import check_targets, merge_with_notes, render
from .scenarios import REPO_ROOT, TAG, Bench, Results

MiB = models.MiB
SIZES = ("one", "multi", "big", "files")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="shrink every size ×1/16 for a fast smoke run")
    p.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement (default 3)")
    p.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES),
                   help="models to run: one (1 GiB: push, pull, re-push, carton), multi (8×256 MiB: push, "
                        "pull, copies), big (4 GiB: ocibridge's memory on push, pull and copy against 1 GiB's), "
                        "files (250 / 2,500 / 10,000 small files)")
    p.add_argument("--workdir", help="parent of the temporary directory (default: the system temp dir)")
    p.add_argument("--output", default=str(REPO_ROOT / "docs" / "benchmarks.md"),
                   help="Markdown report to write (default docs/benchmarks.md); '-' for stdout only")
    p.add_argument("--keep", action="store_true", help="keep the generated models and registries")
    return p.parse_args(argv)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _first_line(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def _loadavg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def machine_info(argv: list[str]) -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    commit = _first_line(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    return {
        "command": "`.venv/bin/python -m bench.run" + "".join(f" {a}" for a in argv) + "`",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs (`nproc`), {platform.machine()}, {cpu}, "
                   f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 1024**3} GiB RAM",
        "python": platform.python_version(),
        "ocibridge": f"git {commit}",
        "peers": f"{_first_line(['skopeo', '--version'])}; oras-py {version('oras')}; "
                 f"{_first_line(['curl', '--version']).split(' (')[0]}",
        "registry": _first_line(["docker-registry", "--version"]),
    }


def sizes(quick: bool) -> dict[str, int]:
    """Byte sizes ÷16 in quick mode; file counts ÷4 only, so that every count stays above the
    builder's auto-grouping threshold (64 files of a kind) and all three runs pack alike."""
    d = 16 if quick else 1
    f = 4 if quick else 1
    return {"one": 1024 * MiB // d, "multi_count": 8, "multi": 256 * MiB // d, "big": 4096 * MiB // d,
            "few": 250, "mid": 2500 // f, "many": 10000 // f}


def compile_package(*others: str | Path | None) -> None:
    """Byte-compile ocibridge (untimed), this checkout's and each other checkout's named (a
    ``--baseline``), as pip does when it installs a wheel: with PYTHONDONTWRITEBYTECODE set
    (this VM and the lent GPU machines set it) a checkout run with PYTHONPATH would otherwise
    compile every module from source on every run (~0.1 s of each command here, ~0.2 s on the
    lent machines: paid by no installed copy and by none of the peers, whose Python packages are
    compiled at install)."""
    trees = [REPO_ROOT, *(Path(other) for other in others if other)]
    run_quiet([sys.executable, "-m", "compileall", "-q", *(str(tree / "ocibridge") for tree in trees)])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    compile_package()
    s = sizes(args.quick)
    parent = Path(args.workdir) if args.workdir else None
    work = Path(tempfile.mkdtemp(prefix="ocibridge-bench-", dir=parent))
    results = Results()
    names = {"one": f"1x{s['one'] // MiB}MiB", "multi": f"{s['multi_count']}x{s['multi'] // MiB}MiB",
             "big": f"1x{s['big'] // MiB}MiB", "few": f"{s['few']}files", "mid": f"{s['mid']}files",
             "many": f"{s['many']}files"}
    started = time.monotonic()
    load_before = _loadavg()
    try:
        bench = Bench(work, args.repeat, results, log)
        if not bench.has_registry_store:
            results.notes.append("ocibridge's registry store was not importable: its registry rows are empty.")
        log(f"work dir {work}; registry store {'present' if bench.has_registry_store else 'MISSING'}")
        run_all(bench, work, s, names, set(args.sizes))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    checks = check_targets(results, names)
    meta = machine_info(argv)
    meta["wall time of the run"] = f"{(time.monotonic() - started) / 60:.1f} min"
    meta["load average (1/5/15 min) before → after"] = (
        f"{load_before} → {_loadavg()} (other work on the machine inflates and scatters the times)"
    )
    text = render(results, checks, meta)
    if results.notes:
        text += "\n" + "\n".join(f"- {n}" for n in results.notes) + "\n"
    if args.output == "-":
        print(text)
    else:
        out = Path(args.output)
        existing = out.read_text() if out.exists() else None
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(merge_with_notes(text, existing))
        log(f"wrote {out}")
    for c in checks:
        print(f"{c.status:4}  {c.target}: {c.measured}")
    return 0


def _layout(bench: Bench, model: models.Model, work: Path) -> str:
    """An OCI layout of ``model`` (by ocibridge, unmeasured) for the tools that push from one."""
    ref = f"oci:{work / 'layouts' / model.name}:{TAG}"
    run_quiet(tools.ocibridge("push", str(model.root), ref), env=bench.env)
    return ref


def run_all(bench: Bench, work: Path, s: dict[str, int], names: dict[str, str], chosen: set[str]) -> None:
    src = work / "models"
    built: dict[str, models.Model] = {}
    layouts: dict[str, str] = {}
    if "one" in chosen:
        log(f"generating {names['one']}")
        built["one"] = models.single_weight(src / names["one"], s["one"], seed=1)
    if "multi" in chosen:
        log(f"generating {names['multi']}")
        built["multi"] = models.multi_weight(src / names["multi"], s["multi_count"], s["multi"])
    for key, model in built.items():
        layouts[key] = _layout(bench, model, work)

    for key in ("one", "multi"):
        if key in built:
            log(f"push {built[key].name}")
            bench.push(built[key], layouts[key], parallel=1 if key == "one" else 4)

    if built:
        with fresh_registry(work) as reg:
            for key, model in built.items():
                bench.seed(reg, model, layouts[key], f"bench/{key}")
            for key, model in built.items():
                log(f"pull {model.name}")
                bench.pull(reg, model, f"bench/{key}", parallel=1 if key == "one" else 4)
            if "one" in built:
                log("re-push")
                bench.repush(reg, built["one"], "bench/one")
                log("push of a fresh copy")
                bench.fresh_copy_push(reg, built["one"], "bench/one")
                if "big" in chosen:  # the 1 GiB side of the memory comparison with "big"
                    bench.copy_between(reg, built["one"], "bench/one", only=("ocibridge",))
            if "multi" in built:
                log("copies")
                bench.copy_within(reg, built["multi"], "bench/multi")
                bench.copy_between(reg, built["multi"], "bench/multi")

    if "one" in built:
        log("carton")
        carton = work / f"{names['one']}.carton"
        write_carton(carton, built["one"].root, built["one"].files)
        bench.carton(carton, names["one"])
        carton.unlink()

    if "big" in chosen:
        log(f"generating {names['big']}")
        big = models.single_weight(src / names["big"], s["big"], seed=2)
        bench.push(big, "", parallel=1, only=("curl (floor)", "ocibridge"))
        if bench.has_registry_store:
            with fresh_registry(work) as reg:
                bench.seed(reg, big, "", "bench/big")
                bench.pull(reg, big, "bench/big", parallel=1, only=("curl (floor)", "ocibridge"))
                bench.copy_between(reg, big, "bench/big", only=("ocibridge",))
        shutil.rmtree(big.root)

    if "files" in chosen:
        for key in ("few", "mid", "many"):
            log(f"generating {names[key]}")
            model = models.many_files(src / names[key], s[key])
            bench.pack_and_push(model)
            shutil.rmtree(model.root)


if __name__ == "__main__":
    sys.exit(main())
