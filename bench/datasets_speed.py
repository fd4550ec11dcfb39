"""The ``datasets`` library through ``ocibridge serve`` against its floors, on a fresh local registry.

    .venv/bin/python -m bench.datasets_speed --size-mib 1024 --rounds 5
    .venv/bin/python -m bench.datasets_speed --size-mib 1024 --rounds 5 --no-xet   # HF_HUB_DISABLE_XET=1

The dataset: ``--shards`` parquet files (seeded random ints, floats and strings of 64 letters,
which snappy cannot shrink), ``--size-mib`` in all, laid out as a dataset repository's
``data/train-0000N-of-0000S.parquet``. Every client is a process of its own with fresh, empty
caches (``HF_HUB_CACHE``, ``HF_DATASETS_CACHE``, ``HF_HOME``), as a user runs it; the timed part is
the library call (imports and start-up of the process are not in it). The rows alternate in each
round (their order turns round to round), medians over the rounds.

load (serve holds the dataset, uploaded once with ``upload_folder``, and has read it once from the
registry before the rounds: its cache is warm, as the floor's files are on disk):

- floor: ``load_dataset("parquet", data_files=[URLs])`` against ``python -m http.server`` over a
  directory laid out as the Hub's resolve URLs (``datasets/ORG/NAME/resolve/main/data/...``);
- serve, same call: the very same call with serve's resolve URLs. ``HF_ENDPOINT`` is not serve in
  both, so the library takes both as plain web files (fsspec's HTTP, a HEAD and a GET each): the
  same client code and the same download and arrow conversion, only the server differs. This
  is the row the target (≤ 1.1×) is read on;
- serve, by name: ``load_dataset("ORG/NAME", split="train")`` with ``HF_ENDPOINT`` at serve, what a
  user types: the Hub API's listing and card requests, then ``hf_hub_download`` of each shard
  (over Xet where hf_xet is installed and serve offers it). No plain server answers that call;
  it is shown against the same floor.

push (a fresh registry and a fresh serve each round, so nothing is deduplicated against an earlier
round; the registry's log says how many bytes it took in each run):

- floor: ``ocibridge push DIR REGISTRY/bench/files:latest -q`` of the directory of parquet files,
  the wall time of the command (its start-up included);
- ``Dataset.push_to_hub("acme/pushed")`` through serve of the Dataset of those files (built once
  with ``save_to_disk``; each run ``load_from_disk``, memory-mapped, then the timed call). The
  library writes parquet shards of its own (``max_shard_size`` 500 MB), not the files above;
- beside them, not judged: that encoding alone (each shard's ``to_parquet`` to a local file), the
  part of push_to_hub's time that is the library's own work before any byte is sent.

CPU seconds of the client, the server and the registry are shown with each median, the machine's
cores, load and uptime with the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .registries import BenchRegistry, fresh_registry
from .serve import Cpu, base_env, free_port, load, wait_healthy

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
REPO = "acme/bench"
TOKENS = "bench-token user=bench write=*\nanonymous read=*\n"
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .", dtype=np.uint8)

#: one load_dataset call, timed; the rows it loaded (checked against the dataset's)
LOAD = r"""
import json, sys, time
from datasets import load_dataset
t = time.perf_counter()
if sys.argv[1] == "name":
    ds = load_dataset(sys.argv[2], split="train")
else:
    ds = load_dataset("parquet", data_files=sys.argv[2:], split="train")
took = time.perf_counter() - t
print(json.dumps({"seconds": took, "rows": ds.num_rows}))
"""
#: push_to_hub of the saved Dataset, timed
PUSH = r"""
import json, sys, time
from datasets import load_from_disk
ds = load_from_disk(sys.argv[1])
t = time.perf_counter()
ds.push_to_hub(sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - t, "rows": ds.num_rows}))
"""
#: what push_to_hub does before it sends anything: its shards written as parquet, to local files
ENCODE = r"""
import json, sys, time
from datasets import config, load_from_disk
from datasets.utils.py_utils import convert_file_size_to_int
ds = load_from_disk(sys.argv[1])
t = time.perf_counter()
shards = int(ds._estimate_nbytes() / convert_file_size_to_int(config.MAX_SHARD_SIZE)) + 1
for n in range(shards):
    ds.shard(num_shards=shards, index=n, contiguous=True).to_parquet(f"{sys.argv[2]}/{n}.parquet")
print(json.dumps({"seconds": time.perf_counter() - t, "rows": shards}))
"""
UPLOAD = r"""
import sys
from huggingface_hub import HfApi
api = HfApi()
api.create_repo(sys.argv[1], repo_type="dataset")
api.upload_folder(repo_id=sys.argv[1], repo_type="dataset", folder_path=sys.argv[2])
"""


def write_shards(directory: Path, size_mib: int, shards: int, seed: int = 104) -> int:
    """``shards`` parquet files of about ``size_mib / shards`` MiB each under ``directory/data``;
    the number of rows in all."""
    rng = np.random.default_rng(seed)
    (directory / "data").mkdir(parents=True)
    rows = 0
    for n in range(shards):
        path = directory / "data" / f"train-{n:05d}-of-{shards:05d}.parquet"
        target = size_mib * MiB // shards
        with pq.ParquetWriter(path, pa.schema([("id", pa.int64()), ("score", pa.float64()),
                                               ("text", pa.string())])) as writer:
            while not path.exists() or path.stat().st_size < target:
                batch = _batch(rng, rows, min(8 * MiB, target))
                writer.write_table(batch)
                rows += batch.num_rows
    return rows


def _batch(rng: np.random.Generator, first: int, nbytes: int) -> pa.Table:
    """About ``nbytes`` of rows: an id, a float, a string of 20 to 300 random letters."""
    count = max(1, nbytes // 176)
    lengths = rng.integers(20, 300, size=count)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    letters = LETTERS[rng.integers(0, len(LETTERS), size=int(offsets[-1]))]
    text = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(letters.tobytes()))
    return pa.table({"id": pa.array(np.arange(first, first + count)), "score": pa.array(rng.random(count)),
                     "text": text})


@dataclass
class Proc:
    """A server process of ours: its URL, stopped after."""

    proc: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=60)


@contextlib.contextmanager
def file_server(root: Path, work: Path) -> Iterator[Proc]:
    """``python -m http.server`` over ``root`` on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(root)], env=base_env(work), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    s = Proc(proc, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["curl", "-sf", "-o", "/dev/null", s.url + "/"]).returncode:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("http.server did not start")
            time.sleep(0.1)
        yield s
    finally:
        s.stop()


@contextlib.contextmanager
def serve(registry: BenchRegistry, work: Path, name: str) -> Iterator[Proc]:
    """``ocibridge serve`` over ``registry``/bench, a fresh cache and its access log under ``work/name``."""
    home = work / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "tokens.txt").write_text(TOKENS)
    port = free_port()
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(home / "cache"), "OCIBRIDGE_CACHE_DIR": str(home / "cache-dir")}
    log = home / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", f"{registry.host}/bench",
                                 "--listen", f"127.0.0.1:{port}", "--token-file", str(home / "tokens.txt")],
                                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    s = Proc(proc, f"http://127.0.0.1:{port}")
    try:
        wait_healthy(proc, s.url, log)
        yield s
    finally:
        s.stop()
        shutil.rmtree(home / "cache", ignore_errors=True)


#: what every client's environment adds (``--no-xet``: HF_HUB_DISABLE_XET, LFS and the resolve route)
NO_XET: dict[str, str] = {}


def client_env(work: Path, endpoint: str | None) -> dict[str, str]:
    """A user's environment with fresh, empty caches under ``work/client``; ``endpoint`` None: a
    closed port, so the library takes every URL as a plain web file (and any Hub request fails)."""
    home = work / "client"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = {**base_env(work), "HF_ENDPOINT": endpoint or f"http://127.0.0.1:{free_port()}",
           "HF_TOKEN": "bench-token", "HF_HUB_CACHE": str(home / "hub"), "HF_DATASETS_CACHE": str(home / "datasets"),
           "HF_HOME": str(home / "home"), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", **NO_XET}
    for offline in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(offline, None)
    return env


def run_program(program: str, env: dict[str, str], *args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@dataclass
class Row:
    """One measured row: seconds of each run and the CPU seconds of each process in each run."""

    label: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[dict[str, float]] = field(default_factory=list)
    note: list[str] = field(default_factory=list)
    judged: bool = True

    def median(self) -> float:
        return statistics.median(self.seconds)

    def spread(self) -> str:
        return f"{min(self.seconds):.2f}-{max(self.seconds):.2f}"

    def cpu_text(self) -> str:
        return " + ".join(f"{k} {statistics.median(c[k] for c in self.cpu):.1f}" for k in self.cpu[0])


def measured(row: Row, run: Callable[[], float], server: int, registry: BenchRegistry) -> None:
    if registry.process.pid is None:
        raise RuntimeError("the registry is not running")
    meter = Cpu(server=server, registry=registry.process.pid)
    row.seconds.append(run())
    row.cpu.append(meter.used())


def load_once(work: Path, endpoint: str | None, args: list[str], rows: int) -> float:
    seen = run_program(LOAD, client_env(work, endpoint), *args)
    if seen["rows"] != rows:
        raise RuntimeError(f"load_dataset gave {seen['rows']} rows, the dataset has {rows}")
    shutil.rmtree(work / "client", ignore_errors=True)
    return seen["seconds"]


def upload(url: str, work: Path, folder: Path) -> None:
    run_program(UPLOAD + "\nprint('{}')", client_env(work, url), REPO, str(folder))


def resolve_urls(base: str, files: list[str]) -> list[str]:
    return [f"{base}/datasets/{REPO}/resolve/main/{f}" for f in files]


def load_rows(work: Path, dataset: Path, rows: int, rounds: int, registry: BenchRegistry) -> list[Row]:
    """The three load rows, ``rounds`` alternating runs each."""
    files = sorted(str(p.relative_to(dataset)) for p in (dataset / "data").glob("*.parquet"))
    floor_root = work / "floor"
    shutil.rmtree(floor_root, ignore_errors=True)
    (floor_root / "datasets" / REPO / "resolve").mkdir(parents=True)
    (floor_root / "datasets" / REPO / "resolve" / "main").symlink_to(dataset)
    floor = Row("`load_dataset(\"parquet\", data_files=URLs)`, http.server (floor)")
    same = Row("the same call, serve's resolve URLs")
    named = Row("`load_dataset(\"acme/bench\")`, `HF_ENDPOINT` at serve")
    with file_server(floor_root, work) as fs, serve(registry, work, "serve-load") as sv:
        upload(sv.url, work, dataset)
        warm = load_once(work, None, ["urls", *resolve_urls(sv.url, files)], rows)
        print(f"serve: uploaded; first (cold) load through serve {warm:.2f} s", flush=True)
        runs: list[tuple[Row, Callable[[], float], int]] = [
            (floor, lambda: load_once(work, None, ["urls", *resolve_urls(fs.url, files)], rows), fs.proc.pid),
            (same, lambda: load_once(work, None, ["urls", *resolve_urls(sv.url, files)], rows), sv.proc.pid),
            (named, lambda: load_once(work, sv.url, ["name", REPO], rows), sv.proc.pid)]
        for r in range(rounds):
            for row, run, pid in runs[r % 3:] + runs[:r % 3]:
                measured(row, run, pid, registry)
                print(f"round {r + 1}: {row.label}: {row.seconds[-1]:.2f} s", flush=True)
        requests = (work / "serve-load" / "serve.log").read_text().count('"GET ')
        named.note.append(f"serve's access log: {requests} GETs in all")
    return [floor, same, named]


def push_rows(work: Path, dataset: Path, rows: int, rounds: int) -> list[Row]:
    """ocibridge push of the files against push_to_hub through serve, a fresh registry each round."""
    saved = work / "saved"
    if not saved.exists():
        run_program("import sys; from datasets import Dataset\n"
                    "Dataset.from_parquet(sys.argv[1]).save_to_disk(sys.argv[2])\nprint('{}')",
                    client_env(work, None), str(dataset / "data" / "*.parquet"), str(saved))
        shutil.rmtree(work / "client", ignore_errors=True)
    floor = Row("`ocibridge push DIR REGISTRY/bench/files` (floor)")
    hub = Row("`Dataset.push_to_hub(\"acme/pushed\")` through serve")
    encode = Row("(what push_to_hub encodes, alone: its shards' `to_parquet` to local files)", judged=False)
    for r in range(rounds):
        with fresh_registry(work) as registry, serve(registry, work, "serve-push") as sv:
            def push_files() -> float:
                env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / "push-cache"),
                       "OCIBRIDGE_CACHE_DIR": str(work / "push-cache-dir")}
                t = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(dataset),
                                       f"{registry.host}/bench/files:latest", "-q"], env=env, cwd=ROOT,
                                      capture_output=True, text=True)
                took = time.perf_counter() - t
                if done.returncode:
                    raise RuntimeError(f"ocibridge push: {done.stderr[-3000:]}")
                for d in ("push-cache", "push-cache-dir"):
                    shutil.rmtree(work / d, ignore_errors=True)
                return took

            def push_hub() -> float:
                seen = run_program(PUSH, client_env(work, sv.url), str(saved), "acme/pushed")
                shutil.rmtree(work / "client", ignore_errors=True)
                return seen["seconds"]

            def encode_only() -> float:
                out = work / "encoded"
                out.mkdir()
                seen = run_program(ENCODE, client_env(work, None), str(saved), str(out))
                shutil.rmtree(out)
                encode.note[:1] = [f"{seen['rows']:.0f} shards"]
                return seen["seconds"]

            runs = [(floor, push_files), (hub, push_hub), (encode, encode_only)]
            for row, run in runs[r % 3:] + runs[:r % 3]:
                registry.mark()
                measured(row, run, sv.proc.pid, registry)
                took_in = registry.uploads_since_mark()
                if row.judged:
                    row.note.append(f"{took_in.blob_bytes / MiB:.0f} MiB")
                print(f"round {r + 1}: {row.label}: {row.seconds[-1]:.2f} s, registry took in "
                      f"{took_in.blob_bytes / MiB:.0f} MiB in {took_in.blobs} blobs", flush=True)
    return [floor, hub, encode]


def machine() -> str:
    up = float(Path("/proc/uptime").read_text().split()[0])
    return f"{os.cpu_count()} cores, load {load()}, up {up / 3600:.1f} h"


def table(title: str, rows: list[Row], target: float, against: Row) -> str:
    lines = [f"**{title}**", "", "| run | median s | min-max s | ÷ floor | CPU s (medians) | samples s |",
             "|---|---:|---:|---:|---|---|"]
    for row in rows:
        ratio = row.median() / against.median()
        mark = "" if row is against or not row.judged else (" ✓" if ratio <= target else " ✗")
        samples = ", ".join(f"{s:.2f}" for s in row.seconds) + (f" ({'; '.join(row.note)})" if row.note else "")
        lines.append(f"| {row.label} | {row.median():.2f} | {row.spread()} | {ratio:.2f}×{mark} | "
                     f"{row.cpu_text()} | {samples} |")
    lines.append(f"\ntarget ≤ {target}× the floor's median")
    return "\n".join(lines)


def versions() -> str:
    import datasets
    import huggingface_hub

    try:
        import hf_xet  # noqa: F401
        xet = "hf_xet installed"
    except ImportError:
        xet = "no hf_xet"
    xet += ", HF_HUB_DISABLE_XET=1" if NO_XET else ""
    return f"datasets {datasets.__version__}, huggingface_hub {huggingface_hub.__version__}, {xet}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.datasets_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=["load", "push"], help="one half of the benchmark")
    parser.add_argument("--no-xet", action="store_true", help="the clients with HF_HUB_DISABLE_XET=1 (LFS, resolve)")
    parser.add_argument("--work", type=Path, help="a directory for the data (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.no_xet:
        NO_XET["HF_HUB_DISABLE_XET"] = "1"
    work = Path(tempfile.mkdtemp(prefix="datasets-speed-", dir=args.work))
    try:
        dataset = work / "dataset"
        rows = write_shards(dataset, args.size_mib, args.shards)
        size = sum(p.stat().st_size for p in (dataset / "data").glob("*.parquet"))
        print(f"dataset: {args.shards} parquet shards, {size / MiB:.0f} MiB, {rows} rows; {versions()}", flush=True)
        out = [f"{args.size_mib} MiB of parquet ({args.shards} shards, {size / MiB:.0f} MiB on disk, {rows} rows), "
               f"{args.rounds} alternating rounds; {versions()}; start: {machine()}", ""]
        if args.only != "push":
            with fresh_registry(work) as registry:
                loads = load_rows(work, dataset, rows, args.rounds, registry)
            out += [table("load_dataset", loads, 1.1, loads[0]), ""]
        if args.only != "load":
            pushes = push_rows(work, dataset, rows, args.rounds)
            out += [table("push", pushes, 1.3, pushes[0]), ""]
        out.append(f"end: {machine()}")
        print("\n" + "\n".join(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
