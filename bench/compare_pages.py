"""serve's memory and event loop while compare pages of very wide models are asked for (issue
62 item 5): 200,000 tensors a file, every one changed between two versions (F16 <-> BF16).

    .venv/bin/python -m bench.compare_pages                 # 200,000 tensors, 8 pairs
    .venv/bin/python -m bench.compare_pages --tensors 50000 --pairs 4

(run from a checkout: serve is started from it; for the figure before a change, copy this file
into an export of the older commit, ``git archive``, and run it there)

Nine versions of one model are pushed to a fresh local registry, each a safetensors file of
TENSORS tiny tensors (a header of ~13 MiB: below 16 MiB, from which a file without a chunk table
was not read whole for a page before), its dtype alternating, so that any two consecutive
versions differ in every tensor. A serve started over that registry is asked the 8 pages
``v0...v1`` to ``v7...v8`` one after the other while another thread asks ``/healthz`` every
50 ms. Shown: each page's time and size, serve's RSS after each (``/proc/PID/status`` VmRSS),
its peak (VmHWM), and the ``/healthz`` times (targets: RSS < 300 MiB after the 8 pairs, every
``/healthz`` < 100 ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

import ocibridge

from .registries import fresh_registry
from .serve import MiB, load, server


def wide_model(root: Path, tensors: int, number: int) -> Path:
    """Version ``number``: ``tensors`` tensors of two elements, F16 on even versions, BF16 on odd."""
    root.mkdir(parents=True)
    dtype = "F16" if number % 2 == 0 else "BF16"
    header: dict[str, object] = {"__metadata__": {"version": str(number)}}
    for i in range(tensors):
        header[f"l{i // 1000}.e{i % 1000}"] = {
            "dtype": dtype, "shape": [2], "data_offsets": [4 * i, 4 * i + 4]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    (root / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + bytes(4 * tensors))
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "version": number}))
    return root


def rss_mib(pid: int, field: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


class Health(threading.Thread):
    """``/healthz`` every 50 ms; the time of each answer, and the requests that got none."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.times, self.failed, self.stopped = url, list[float](), 0, threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stopped.is_set():
                start = time.perf_counter()
                try:
                    client.get(f"{self.url}/healthz")
                except httpx.HTTPError:
                    self.failed += 1  # a reset or a timeout: no answer at all
                self.times.append(time.perf_counter() - start)
                time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tensors", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        run(Path(tmp), args.tensors, args.pairs)


def run(work: Path, tensors: int, pairs: int) -> None:
    with fresh_registry(work) as registry:
        size = 0
        for number in range(pairs + 1):
            root = wide_model(work / f"v{number}", tensors, number)
            size = (root / "model.safetensors").stat().st_size
            ocibridge.push(str(root), f"{registry.host}/bench/wide:v{number}")
        with server(work, f"{registry.host}/bench", work / "serve-cache") as serve:
            pid = serve.proc.pid
            print(f"{tensors} tensors a file ({size / MiB:.1f} MiB), {pairs} pairs; "
                  f"serve RSS at start {rss_mib(pid):.0f} MiB; load {load()}")
            health = Health(serve.url)
            health.start()
            with httpx.Client(timeout=600) as client:
                for number in range(pairs):
                    start = time.perf_counter()
                    page = client.get(f"{serve.url}/wide/compare/v{number}...v{number + 1}")
                    took = time.perf_counter() - start
                    print(f"v{number}...v{number + 1}: {page.status_code}, {took:.1f} s, "
                          f"{len(page.content) / 1e6:.2f} MB page, RSS {rss_mib(pid):.0f} MiB")
            health.stopped.set()
            health.join()
            slow = sorted(health.times)
            print(f"after {pairs} pairs: RSS {rss_mib(pid):.0f} MiB, peak "
                  f"{rss_mib(pid, 'VmHWM:'):.0f} MiB (target < 300 MiB after)")
            over = sum(t >= 0.1 for t in slow)
            print(f"/healthz: {len(slow)} answers, median {statistics.median(slow) * 1000:.1f} ms, "
                  f"99th {slow[int(len(slow) * 0.99)] * 1000:.1f} ms, slowest {slow[-1] * 1000:.1f} ms, "
                  f"{over} of 100 ms or more, {health.failed} unanswered (target: none); load {load()}")


if __name__ == "__main__":
    main()
