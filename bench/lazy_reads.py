"""Lazy, verified reads against a full pull (issue 29), on a fresh local registry.

    .venv/bin/python -m bench.lazy_reads                  # 1 GiB and 4 GiB safetensors files
    .venv/bin/python -m bench.lazy_reads --sizes 256      # MiB; a quick run

Rows: time to the first tensor (open_tensors + one small tensor) against ``pull`` of the model,
with the bytes each moved; and a whole-file sequential read through the ocibridge:// filesystem
against ``pull`` (target ≤ 1.3×): pull and the reads alternate ``--repeat`` times, medians
shown with every sample (one sample of a GiB pull varies 1.5-2.6 s on these machines).

    .venv/bin/python -m bench.lazy_reads --processes --sizes 1024   # issue 43's measure

``--processes``: the whole-file read as a user runs it, against ``ocibridge pull`` run the same
way: each sample a whole process (interpreter, imports, manifest, the read) with a fresh cache
root, and ``sync`` after each so the GiB one run wrote is on disk before the next starts
(target ≤ 1.2× pull).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from .registries import fresh_registry

MiB = 1024 * 1024
SMALL = 4096


def write_model(directory: Path, size: int) -> Path:
    directory.mkdir(parents=True)
    path = directory / "model.safetensors"
    big = (size - 4 * SMALL) // 4
    header = {"a.big": {"dtype": "F32", "shape": [big], "data_offsets": [0, 4 * big]},
              "b.small": {"dtype": "F32", "shape": [SMALL], "data_offsets": [4 * big, 4 * big + 4 * SMALL]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left = 4 * (big + SMALL)
        while left:
            n = min(left, 64 * MiB)
            f.write(os.urandom(n))
            left -= n
    return path


def _kept(chunks: Path) -> str:
    """What a cold read left in the block cache: whole-layer files and chunk files."""
    def count(sub: str) -> int:
        return len(list((chunks / sub).iterdir())) if (chunks / sub).is_dir() else 0
    return f"kept as {count('layers')} layer file(s), {count('sha256')} chunk file(s)"


def run(size_mib: int, work: Path, repeat: int = 3) -> list[str]:
    import fsspec

    from ocibridge.api.lazy_ops import open_tensors
    from ocibridge.api.model_ops import pull, push

    rows = []
    with fresh_registry(work) as reg:
        src = work / f"m{size_mib}"
        write_model(src, size_mib * MiB)
        ref = f"{reg.host}/bench/lazy{size_mib}:v1"
        push(str(src), ref)  # a chunk table by default (issue 43)

        t = time.perf_counter()
        tensors = open_tensors(ref, "model.safetensors")
        tensors.get_bytes("b.small")
        first = time.perf_counter() - t
        moved = tensors.blob.bytes_fetched
        tensors.blob.close()

        def pull_once() -> float:
            out = work / f"pulled{size_mib}"
            t = time.perf_counter()
            pull(ref, str(out))
            took = time.perf_counter() - t
            shutil.rmtree(out)
            return took

        layer = tensors.blob.layer.digest
        repo = ref.split("/", 1)[1].rsplit(":", 1)[0]

        def curl_once() -> float:
            """The floor: one curl stream of the blob to a file (what any client must wait for)."""
            out = work / "curl.bin"
            t = time.perf_counter()
            subprocess.run(["curl", "-sf", "-o", str(out), f"http://{reg.host}/v2/{repo}/blobs/{layer}"], check=True)
            took = time.perf_counter() - t
            out.unlink()
            return took

        def sequential(cache: bool) -> float:
            fs = fsspec.filesystem("ocibridge", skip_instance_cache=True, cache=cache)
            t = time.perf_counter()
            with fs.open(f"{ref}/model.safetensors", "rb") as f:
                while f.read(16 * MiB):
                    pass
            for model in list(fs._models.values()):
                model.close()  # (waits for the block cache's writes: part of the cold read's cost)
            return time.perf_counter() - t

        from ocibridge.cache.chunks import CacheChunks
        from ocibridge.cache.modelcache import model_cache_root

        chunks = CacheChunks(model_cache_root()).dir.parent  # chunks/sha256 and chunks/layers
        samples: dict[str, list[float]] = {"curl": [], "pull": [], "off": [], "cold": [], "warm": []}
        kept = ""
        for _ in range(repeat):  # alternating, so that a slow stretch of the machine hits all alike
            samples["curl"].append(curl_once())
            samples["pull"].append(pull_once())
            samples["off"].append(sequential(cache=False))
            shutil.rmtree(chunks, ignore_errors=True)
            samples["cold"].append(sequential(cache=True))  # every chunk fetched, and kept
            kept = _kept(chunks)
            samples["warm"].append(sequential(cache=True))  # every chunk from the model cache
        shutil.rmtree(chunks, ignore_errors=True)
        full = statistics.median(samples["pull"])
        rows.append(f"| {size_mib} MiB | first tensor | {first:.2f} s ({moved / MiB:.1f} MiB moved) "
                    f"| pull {full:.2f} s | {first / full:.3f}× |")
        via = "sequential read via fsspec, block cache"
        for key, what in (("curl", "for scale: curl of the blob to a file"), ("off", f"{via} off"),
                          ("cold", f"{via} cold ({kept})"), ("warm", f"{via} warm")):
            took = statistics.median(samples[key])
            each = ", ".join(f"{x:.2f}" for x in samples[key])
            rows.append(f"| {size_mib} MiB | {what} | {took:.2f} s ({each}) "
                        f"| pull {full:.2f} s ({', '.join(f'{x:.2f}' for x in samples['pull'])}) "
                        f"| {took / full:.2f}× |")
        shutil.rmtree(src)
    return rows


#: a whole-file read through the filesystem as a user's script does it (the block cache on)
READ_SCRIPT = """
import sys, fsspec
fs = fsspec.filesystem("ocibridge")
with fs.open(sys.argv[1], "rb") as f:
    while f.read(16 << 20):
        pass
"""


def run_processes(size_mib: int, work: Path, repeat: int = 3) -> list[str]:
    """Pull and the whole-file read as processes, alternating; fresh caches, ``sync`` between."""
    import sys

    from ocibridge.api.model_ops import push

    with fresh_registry(work) as reg:
        src = work / f"p{size_mib}"
        write_model(src, size_mib * MiB)
        ref = f"{reg.host}/bench/whole{size_mib}:v1"
        push(str(src), ref)
        shutil.rmtree(src)

        cpu: dict[str, list[float]] = {"pull": [], "read": []}

        def timed(argv: list[str], kind: str = "") -> float:
            cache = work / "process-cache"
            shutil.rmtree(cache, ignore_errors=True)
            env = {**os.environ, "OCIBRIDGE_CACHE": str(cache)}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
            took = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if kind:  # the child's own CPU (user + system): steadier than wall time on a shared machine
                cpu[kind].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            shutil.rmtree(work / "pulled", ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            subprocess.run(["sync"], check=True)
            return took

        pull_argv = [sys.executable, "-m", "ocibridge", "pull", ref, str(work / "pulled"), "-q"]
        read_argv = [sys.executable, "-c", READ_SCRIPT, f"{ref}/model.safetensors"]
        timed(pull_argv)  # warm-up: the interpreter's and the page cache's first touch
        samples: dict[str, list[float]] = {"pull": [], "read": []}
        for _ in range(repeat):
            samples["pull"].append(timed(pull_argv, "pull"))
            samples["read"].append(timed(read_argv, "read"))
        full, read = statistics.median(samples["pull"]), statistics.median(samples["read"])
        each = ", ".join(f"{x:.2f}" for x in samples["read"])
        pulls = ", ".join(f"{x:.2f}" for x in samples["pull"])
        cpu_read, cpu_pull = statistics.median(cpu["read"]), statistics.median(cpu["pull"])
        return [f"| {size_mib} MiB | whole file through fsspec, as a process (fresh cache, sync between) "
                f"| {read:.2f} s ({each}) | ocibridge pull as a process {full:.2f} s ({pulls}) | {read / full:.2f}× |",
                f"| {size_mib} MiB | the same, CPU of the process (user + system, medians) "
                f"| {cpu_read:.2f} s | {cpu_pull:.2f} s | {cpu_read / cpu_pull:.2f}× |"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lazy_reads", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=int, default=[1024, 4096], help="file sizes in MiB")
    p.add_argument("--repeat", type=int, default=3, help="alternating samples of each read (medians shown)")
    p.add_argument("--processes", action="store_true",
                   help="only the whole-file read and pull, each a whole process (issue 43's measure)")
    args = p.parse_args(argv)
    print("| file | measure | ocibridge lazy | against | ratio |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="lazybench-") as tmp:
        os.environ["OCIBRIDGE_CACHE"] = str(Path(tmp) / "cache")  # never the user's model cache
        for size in args.sizes:
            for row in (run_processes if args.processes else run)(size, Path(tmp), args.repeat):
                print(row, flush=True)
    print("load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
