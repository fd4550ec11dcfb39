"""``load_tensors`` when one connection is much slower than the others: the wait at the end.

    .venv/bin/python -m bench.load_tail --size 1024 --rate 16 --repeat 3 --baseline DIR

A fresh local registry behind the test suite's fault proxy (``tests/support/faultproxy.py``),
which paces ONE request to ``--rate`` MiB/s: the first range asked after the file's header (a
long range of ``load_tensors``), every other at the proxy's own speed. Each round loads the
model in a process of its own through the proxy, this checkout's and the baseline's in turn
(which goes first alternates), and reports its wall time, the bytes the slow connection carried
and the blob GETs; then the same load with no request paced (the even network, through the same
proxy). Medians of the rounds, every sample shown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.faultproxy import FaultProxy, throttle

from .load_tensors import LOAD, MiB, write_model
from .proc import python_path, run_measured
from .registries import fresh_registry
from .run import compile_package


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="MiB of tensors (default 1024)")
    parser.add_argument("--rate", type=float, default=16.0, help="the slow connection's MiB/s (default 16)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, loaded in the same rounds")
    parser.add_argument("--even-only", action="store_true", help="only the loads with no request paced")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    trees = {"this checkout": None, **({f"baseline ({args.baseline})": args.baseline} if args.baseline else {})}
    samples: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="ocibridge-bench-tail-") as tmp, fresh_registry(Path(tmp)) as reg:
        from ocibridge.api.lazy_ops import open_model
        from ocibridge.api.model_ops import push

        write_model(Path(tmp) / "model", args.size * MiB, 64)
        ref = f"{reg.host}/bench/tail:v1"
        push(str(Path(tmp) / "model"), ref)
        with open_model(ref, cache=False) as model:
            digest = model.file("model.safetensors").layer.digest
        compile_package(args.baseline)
        for round_ in range(args.repeat):
            order = list(trees.items())
            for name, home in order if round_ % 2 == 0 else order[::-1]:
                for wire in ("even",) if args.even_only else ("one slow connection", "even"):
                    with FaultProxy(reg.process) as proxy:
                        if wire != "even":
                            proxy.add("GET", f"/blobs/{digest}", throttle(args.rate * MiB), skip=1)
                        where = str(home.resolve()) if home is not None else None
                        env = {**os.environ, "OCIBRIDGE_CACHE": str(Path(tmp) / "cache"),
                               **({"PYTHONPATH": python_path(where)} if where else {})}
                        s = run_measured([sys.executable, "-c", LOAD, ref.replace(reg.host, proxy.host)],
                                         cwd=where, env=env)
                        gets = proxy.requests_matching("GET", f"/blobs/{digest}")
                        slow = next((r.response_bytes for r in gets if r.action == "throttle"), 0)
                        samples.setdefault((name, wire), []).append((s.seconds, slow, len(gets)))
    print(f"### `python -m bench.load_tail --size {args.size} --rate {args.rate:g} --repeat {args.repeat}` "
          f"({started}, load {os.getloadavg()[0]:.1f})\n")
    print("| load_tensors through the proxy | wall | the slow connection's MiB | blob GETs |")
    print("| --- | --- | --- | --- |")
    for (name, wire), rows in samples.items():
        walls, slows, gets = zip(*rows, strict=True)
        print(f"| {name}, {wire} | {statistics.median(walls):.2f} s ({', '.join(f'{w:.2f}' for w in walls)}) "
              f"| {', '.join(f'{b / MiB:.0f}' for b in slows) if wire != 'even' else '-'} "
              f"| {', '.join(map(str, gets))} |")


if __name__ == "__main__":
    main()
