"""Ctrl-C half-way through a push straight to distribution, then the same command: how long the
process took to exit after the signal, and what the rerun sent (counted by a forwarding proxy
before the registry: tests/support/faultproxy.py without rules, so a cut body reaches the
registry as it would without the proxy).

    .venv/bin/python -m bench.push_interrupt --size-mib 1024 --repeat 3
    .venv/bin/python -m bench.push_interrupt --chunk-mib 32 --at-mib 528   # fixed chunks, mid-chunk
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.faultproxy import FaultProxy

from . import models, tools
from .registries import fresh_registry

MiB = models.MiB


def _uploaded(proxy: FaultProxy) -> int:
    return sum(r.request_bytes for r in proxy.requests if "/blobs/uploads/" in r.path)


def one(work: Path, model: models.Model, at: int, chunk: int | None, env: dict[str, str]) -> str:
    """One sample as a table row."""
    with fresh_registry(work) as reg, FaultProxy(reg.process) as proxy:
        cmd = tools.ocibridge("push", str(model.root), f"{proxy.host}/b/int:v1", "--plain-http")
        if chunk:
            cmd += ["--chunk-size", str(chunk)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while _uploaded(proxy) < at:
            if proc.poll() is not None:
                raise RuntimeError(f"the push ended first: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.001)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait()
        exit_s = time.monotonic() - signalled
        first = _uploaded(proxy)
        cut = sum(1 for r in proxy.requests_matching("PATCH", "/blobs/uploads/") if r.status is None)
        proxy.clear()
        before = len(proxy.requests)
        again_start = time.monotonic()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        again_s = time.monotonic() - again_start
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        again = sum(r.request_bytes for r in proxy.requests[before:] if "/blobs/uploads/" in r.path)
        resumed = [r.status for r in proxy.requests_matching("GET", "/blobs/uploads/")]
    size = model.size
    return (f"| {proc.returncode} | {exit_s:.2f} | {first / MiB:.0f} MiB | {'cut' if cut else 'ended'} "
            f"| {resumed} | {again / MiB:.0f} MiB ({again / size:.0%}) | {again_s:.1f} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.push_interrupt", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--chunk-mib", type=int, default=0, help="--chunk-size for ocibridge (0: its default)")
    p.add_argument("--at-mib", type=int, help="signal once this many MiB reached the proxy (default: half)")
    p.add_argument("--workdir")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ocibridge-int-", dir=args.workdir))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "OCIBRIDGE_CACHE_DIR": str(work / "cache"), "OCIBRIDGE_DIGEST_CACHE": "0"}
    try:
        model = models.single_weight(work / "model", args.size_mib * MiB, seed=4)
        print(f"load average before: {os.getloadavg()}", file=sys.stderr)
        print("| exit code | seconds from SIGINT to exit | sent before | chunk in flight | "
              "rerun's GET on the session | rerun sent | rerun seconds |")
        print("|---|---|---|---|---|---|---|")
        for _ in range(args.repeat):
            at = (args.at_mib * MiB) if args.at_mib else args.size_mib * MiB // 2
            print(one(work, model, at, args.chunk_mib * MiB, env), flush=True)
        print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
