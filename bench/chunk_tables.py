"""What a chunk table costs a push now that it is the default (issue 43): the same file pushed by
curl (the floor), by ``ocibridge push`` (a table, made in the hashing read) and by ``ocibridge
push --no-chunks``, each into a registry started empty, variants alternating within each
repetition so the shared machine's drift hits them alike. Then the hashing read alone, in
process: SHA-256 of the file, and with the chunk hashes beside it on the same thread or on a
second one (why the push hashes chunks on a thread).

    .venv/bin/python -m bench.chunk_tables --size-mib 1024 --repeat 5
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ocibridge.chunks.chunking import ChunkingReader, ChunkPolicy
from ocibridge.oci.digest import CHUNK

from . import models, tools
from .proc import run_measured
from .registries import fresh_registry

MiB = models.MiB


def hash_read(path: Path, wrap: Callable[[BinaryIO], BinaryIO]) -> tuple[float, float]:
    """The copy's hashing read (``hash_pending``): wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    h = hashlib.sha256()
    with wrap(path.open("rb")) as f:
        while data := f.read(CHUNK):
            h.update(data)
        chunked = f.chunks(path.stat().st_size) if isinstance(f, ChunkingReader) else ()
    assert chunked is not None
    return time.perf_counter() - wall, time.process_time() - cpu


def _chunking(threaded: bool) -> Callable[[BinaryIO], BinaryIO]:
    def wrap(raw: BinaryIO) -> BinaryIO:
        return ChunkingReader(raw, ChunkPolicy(threaded=threaded))  # type: ignore[return-value]
    return wrap


def _table(times: dict[str, list[float]], floor: str, cpu: dict[str, list[float]] | None = None) -> None:
    base = statistics.median(times[floor])
    head = "| variant | median s | min–max s | median ÷ " + floor + " |" + (" CPU s (median) |" if cpu else "")
    print(head)
    print("|---" * (5 if cpu else 4) + "|")
    for name, ts in times.items():
        med = statistics.median(ts)
        row = f"| {name} | {med:.2f} | {min(ts):.2f}–{max(ts):.2f} | {med / base:.2f}× |"
        if cpu:
            row += f" {statistics.median(cpu[name]):.2f} |"
        print(row)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chunk_tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--workdir")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="ocibridge-tables-", dir=args.workdir))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "OCIBRIDGE_CACHE": str(work / "cache"), "OCIBRIDGE_DIGEST_CACHE": "0"}
    try:
        model = models.single_weight(work / "model", args.size_mib * MiB, seed=4)
        weight = model.root / model.weights[0]
        digest = "sha256:" + hashlib.file_digest(weight.open("rb"), "sha256").hexdigest()

        def curl() -> float:
            with fresh_registry(work) as reg:
                location = tools.start_upload(reg.url, "b/floor")
                os.sync()
                return run_measured(tools.curl_put([(weight, location, digest)])).seconds

        def ob(*flags: str) -> Callable[[], float]:
            def run() -> float:
                with fresh_registry(work) as reg:
                    os.sync()
                    cmd = tools.ocibridge("push", str(model.root), f"{reg.host}/b/ob:v1", "-q", "--json", *flags)
                    sample = run_measured(cmd, env=env)
                    assert ('"chunks"' in sample.stdout) == (not flags), sample.stdout
                    return sample.seconds
            return run

        pushes = {"curl PUT": curl, "ocibridge push (table)": ob(), "ocibridge push --no-chunks": ob("--no-chunks")}
        reads: dict[str, Callable[[BinaryIO], BinaryIO]] = {
            "sha256 only": lambda raw: raw, "sha256 + chunks, one thread": _chunking(False),
            "sha256 + chunks, second thread": _chunking(True)}
        times: dict[str, list[float]] = {k: [] for k in pushes}
        read_wall: dict[str, list[float]] = {k: [] for k in reads}
        read_cpu: dict[str, list[float]] = {k: [] for k in reads}
        print(f"load average before: {os.getloadavg()}", file=sys.stderr)
        for i in range(args.repeat):
            for name, fn in pushes.items():
                times[name].append(fn())
                print(f"[{i}] {name}: {times[name][-1]:.2f} s (load {os.getloadavg()[0]:.1f})", file=sys.stderr,
                      flush=True)
            for name, wrap in reads.items():
                wall, cpu = hash_read(weight, wrap)
                read_wall[name].append(wall)
                read_cpu[name].append(cpu)
                print(f"[{i}] {name}: {wall:.2f} s wall, {cpu:.2f} s CPU", file=sys.stderr, flush=True)
        print(f"load average after: {os.getloadavg()}", file=sys.stderr)
        _table(times, "curl PUT")
        print()
        _table(read_wall, "sha256 only", read_cpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
