"""Paired samples of publishing through serve from two checkouts (issue 64): the same model, the
same registry, a fresh serve of each checkout in turn for every sample, so load that comes and
goes falls on both sides alike.

    git worktree add /tmp/before REV
    cd /tmp && PYTHONPATH=/work/main /work/main/.venv/bin/python -m bench.publish_pair \
        --size 1024 --repeat 4 /tmp/before /work/main

Run it from a directory that holds no ``ocibridge`` package (``python -m`` puts the working
directory first on ``sys.path``, before ``PYTHONPATH``, which is how each serve is given its
checkout; ``PYTHONPATH`` here finds this ``bench``). Each line: ``upload_folder`` over Xet (hf_xet,
huggingface_hub's default; ``--lfs``: over LFS) through
that serve, its wall time, serve's and the registry's CPU seconds and serve's peak RSS; then ``ocibridge push`` of the
same directory for the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from . import publish
from .proc import python_path, run_measured
from .registries import fresh_registry
from .serve import base_env, cpu_of


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="weights size in MiB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--lfs", action="store_true", help="over LFS (HF_HUB_DISABLE_XET=1), not Xet")
    p.add_argument("checkouts", nargs="+", type=Path, help="the checkouts whose serve is measured")
    args = p.parse_args()
    if (Path.cwd() / "ocibridge").is_dir():
        sys.exit("bench.publish_pair: run it from a directory without an ocibridge package (see --help)")
    rows: dict[Path, list[tuple[float, float, float, float]]] = {c: [] for c in args.checkouts}
    pushes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-pair-") as tmp:
        work = Path(tmp)
        model = publish.make_model(work / "m", args.size)
        with fresh_registry(work) as reg:
            for n in range(args.repeat):
                env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / f"push-cache{n}")}
                pushes.append(run_measured([sys.executable, "-m", "ocibridge", "push", str(model),
                                            f"{reg.host}/bench/push{n}:latest", "-q"], env=env).seconds)
                for k, checkout in enumerate(args.checkouts):
                    def with_checkout(w: Path, c: Path = checkout) -> dict[str, str]:
                        return {**base_env(w), "PYTHONPATH": python_path(str(c))}

                    publish.base_env = with_checkout  # serving() starts serve with it
                    try:
                        with publish.serving(work, f"{reg.host}/bench") as (url, proc):
                            env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token",
                                   "HF_HOME": str(work / f"hf-{n}-{k}")}
                            if args.lfs:
                                env["HF_HUB_DISABLE_XET"] = "1"
                            s0, r0 = cpu_of(proc.pid), reg.cpu_seconds()
                            sample = run_measured([sys.executable, "-c", publish.UPLOAD, f"acme/p{n}-{k}", str(model)],
                                                  env=env)
                            rows[checkout].append((sample.seconds, cpu_of(proc.pid) - s0,
                                                   publish.peak_rss_mib(proc.pid), reg.cpu_seconds() - r0))
                    finally:
                        publish.base_env = base_env
                    wall, cpu, rss, registry = rows[checkout][-1]
                    print(f"{checkout}: wall {wall:.2f} s, serve CPU {cpu:.2f} s, registry CPU {registry:.2f} s, "
                          f"serve peak RSS {rss:.0f} MiB", flush=True)
    push = statistics.median(pushes)
    print(f"| checkout | wall median s | ÷ push ({push:.2f} s) | serve CPU median s | registry CPU median s "
          "| serve peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for checkout, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        registry = statistics.median(s[3] for s in samples)
        print(f"| {checkout} | {wall:.2f} | {wall / push:.2f}× | {cpu:.2f} | {registry:.2f} "
              f"| {max(s[2] for s in samples):.0f} |")


if __name__ == "__main__":
    main()
