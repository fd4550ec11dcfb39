"""Delta pulls (issue 43): ``ocibridge path`` of a second version whose chunk table shares most
chunks with the first, against a full ``path`` of it into an empty model cache.

    .venv/bin/python -m bench.delta --mib 1024 --changed 0.1 --repeat 3 [--limit-rate 100M]

A safetensors model of ``--mib`` MiB (float32 tensors of 16 MiB, made with the safetensors
library) is pushed with a chunk table (``--chunk-threshold 1M``) as v1, and as v2 with a share
``--changed`` of its tensors given other values (same shapes: the header, hence every offset,
stays). Per repeat, in a fresh cache: ``path v1`` (not timed), then ``path v2`` timed (the
delta); and ``path v2`` timed in another fresh cache (the full pull). Blob bytes are counted
on a proxy in front of a fresh local registry. Times are medians; report the ratios (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.faultproxy import FaultProxy
from tests.support.registry import RegistryProcess

TENSOR_MIB = 16


def make_model(root: Path, mib: int, changed: float, version: int) -> int:
    """The model of ``version``; how many tensors differ from v1."""
    import numpy as np
    from safetensors.numpy import save_file

    root.mkdir(parents=True)
    count = max(1, mib // TENSOR_MIB)
    rng = np.random.default_rng(1)
    shape = (TENSOR_MIB * 1024 * 1024 // 4 // 1024, 1024)
    tensors = {f"layers.{i:04d}.weight": rng.standard_normal(shape, dtype=np.float32) for i in range(count)}
    if version > 1:
        other = np.random.default_rng(version)
        step = max(1, round(1 / changed)) if changed > 0 else count + 1
        for i in range(0, count, step):  # spread out: every run of changed chunks is its own request
            tensors[f"layers.{i:04d}.weight"] = other.standard_normal(shape, dtype=np.float32)
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text('{"model_type": "bench"}')
    return 0 if version == 1 else len(range(0, count, step))


def cli(*args: str, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ocibridge", *args], env=env, check=True,
                          capture_output=True, text=True)
    return time.perf_counter() - start, done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.delta", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--changed", type=float, default=0.1, help="share of tensors changed in v2")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--limit-rate", metavar="RATE", help="passed to both paths (e.g. 100M: a link, not loopback)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "OCIBRIDGE_CACHE_DIR": str(work / "pulls")}
        with RegistryProcess(work / "registry", log_level="warn") as registry:
            proxy = FaultProxy(registry)
            try:
                for version in (1, 2):
                    differ = make_model(work / f"v{version}", args.mib, args.changed, version)
                    cli("push", str(work / f"v{version}"), f"{registry.host}/bench/d:v{version}", "-q",
                        "--chunk-threshold", "1M", env=env)
                size = (work / "v2" / "model.safetensors").stat().st_size
                delta_s, full_s, delta_b, full_b, said = [], [], [], [], ""
                for i in range(args.repeat):
                    for kind in ("delta", "full"):
                        cache = work / f"cache-{kind}-{i}"
                        run_env = {**env, "OCIBRIDGE_CACHE": str(cache)}
                        if kind == "delta":
                            cli("path", f"{registry.host}/bench/d:v1", env=run_env)
                        proxy.clear()
                        rate = ("--limit-rate", args.limit_rate) if args.limit_rate else ()
                        seconds, done = cli("path", f"{proxy.host}/bench/d:v2", "-q", *rate, env=run_env)
                        moved = sum(r.response_bytes for r in proxy.requests_matching("GET", r"/blobs/sha256:"))
                        (delta_s if kind == "delta" else full_s).append(seconds)
                        (delta_b if kind == "delta" else full_b).append(moved)
                        if kind == "delta":
                            said = next((line for line in done.stderr.splitlines() if "reused " in line), "")
                        shutil.rmtree(cache, ignore_errors=True)
            finally:
                proxy.stop()
    d, f = statistics.median(delta_s), statistics.median(full_s)
    db, fb = statistics.median(delta_b), statistics.median(full_b)
    print(f"| v2 of {size / 2**20:.0f} MiB, {differ} of {max(1, args.mib // TENSOR_MIB)} tensors "
          f"of {TENSOR_MIB} MiB changed, {args.limit_rate or 'loopback'} | "
          f"delta {d:.2f} s, {db / 2**20:.1f} MiB | full {f:.2f} s, {fb / 2**20:.1f} MiB | "
          f"bytes {db / fb:.1%}, time {d / f:.2f}× | load {os.getloadavg()[0]:.1f} |")
    print(f"<!-- {said} -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
