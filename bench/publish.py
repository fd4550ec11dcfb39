"""Publishing through ``ocibridge serve`` against ``ocibridge push`` (issue 55), on a fresh local
registry, over Xet (hf_xet, huggingface_hub's default where it is installed) and over LFS
(``HF_HUB_DISABLE_XET=1``).

    .venv/bin/python -m bench.publish                      # 1024 MiB, --repeat 3, Xet and LFS
    .venv/bin/python -m bench.publish --sizes 1024 4096 --repeat 1 --protocols xet
    .venv/bin/python -m bench.publish --dedupe 256          # one tensor of ten changed, over Xet

The model is one safetensors-like file of random bytes and a config.json. Each sample is a
process of its own, as a user runs it, the ways alternating within each repetition:
``HfApi().upload_folder`` into a new repository through a serve started afresh (empty staging
and model cache; its writer lease taken before the timed run, as a running serve holds it;
over Xet, hf_xet's own cache empty too, so nothing is deduplicated against an
earlier sample), against ``python -m ocibridge push DIR REF`` into a new repository (targets:
Xet ≤ 1.3×, LFS ≤ 1.2×). serve's peak RSS (``VmHWM``) after the upload is
shown at each size (flat: bytes move a piece at a time). The same run measures what bounds each
way on this machine (issue 64): curl's monolithic PUT of the weights (the registry's own speed),
huggingface_hub's work before its first byte (it hashes the file before it asks where to send
it), serve's least work per byte in one process, and every process's CPU seconds; the floor of
LFS is the first two one after the other, that of Xet the CPU seconds the run needs at least
over the machine's cores; beside each, the CPU seconds the run used (serve's as measured, not its
least) over the cores: no schedule of those processes on this machine is faster.

``--dedupe SIZE`` (only changed chunks travel up): a safetensors file of ten tensors is uploaded
over Xet (hf_xet, as huggingface_hub runs by default), then again with one tensor drawn anew,
each time from a fresh HF_HOME (the fine-tune's machine has no local shard cache); the row is
the bytes serve received in xorb POSTs the second time (its log line per xorb) as a fraction of
the file (target ≤ 20 %), and whether the registry's layer is then the new file's SHA-256.

Each round also measures each way's floor as the work done at once (``bench.floor_at_once``: over
Xet hf_xet to a sink, curl's PUT and serve's least work together on these cores; over LFS the
client's send to a sink, curl's PUT and serve's least work together after the client's hashing),
and the row is divided by it (issue 108: a row that misses its target is judged against the floor
that stops it).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ocibridge.core.capacity import capacity

from . import floor_at_once, tools
from .proc import Sample, run_measured
from .registries import AtUrl, BenchRegistry, fresh_registry
from .serve import MiB, base_env, cpu_of, free_port, load, timed, wait_healthy

UPLOAD = ("import sys; from huggingface_hub import HfApi; api = HfApi(); api.create_repo(sys.argv[1]); "
          "api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2])")


@contextlib.contextmanager
def serving(work: Path, source: str, log: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """serve with a write token, its caches (staging included) empty (its log into ``log``)."""
    cache = work / "serve-cache"
    shutil.rmtree(cache, ignore_errors=True)
    (work / "tokens.txt").write_text("bench-token write\n")
    port = free_port()
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(cache), "OCIBRIDGE_CACHE_DIR": str(cache) + "-dir"}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", source, "--listen", f"127.0.0.1:{port}",
                             "--no-access-log", "--token-file", str(work / "tokens.txt")],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE if log is None else log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log)
        # a serve that just started decides its writer lease (hubserver/replicas/writerlease.py:
        # written, 1 s to settle, read back) before its first write: a write asked now waits for
        # that, so the timed uploads measure a serve that is running, not one starting
        httpx.post(f"{url}/api/models/bench/none/preupload/main", json={"files": []}, timeout=30,
                   headers={"Authorization": "Bearer bench-token"})
        yield url, proc
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


@contextlib.contextmanager
def first_seen(log: Path, text: str) -> Iterator[list[float]]:
    """The seconds from entering until ``text`` first shows in ``log`` past its size then (polled
    every 20 ms), in the list yielded, once seen."""
    seen: list[float] = []
    done = threading.Event()
    mark, start = log.stat().st_size, time.monotonic()

    def watch() -> None:
        while not done.wait(0.02):
            with log.open("rb") as f:
                f.seek(mark)
                if text.encode() in f.read():
                    seen.append(time.monotonic() - start)
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def make_model(root: Path, size_mib: int) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    header = json.dumps({"w": {"dtype": "U8", "shape": [size_mib * MiB], "data_offsets": [0, size_mib * MiB]}})
    data = header.encode() + b" " * (-len(header) % 8)
    with open(root / "model.safetensors", "wb") as f:
        f.write(len(data).to_bytes(8, "little") + data)
        for _ in range(size_mib):
            f.write(os.urandom(MiB))
    return root


#: what a client does before its first byte moves over LFS: import huggingface_hub and hash the
#: file (the LFS batch names it by its SHA-256; hashed lazily, so only over LFS)
PRELUDE = ("import sys; from huggingface_hub import CommitOperationAdd, HfApi; "
           "CommitOperationAdd(path_in_repo='model.safetensors', path_or_fileobj=sys.argv[1]).upload_info.sha256")
#: the least serve must do to each byte it publishes, whatever the protocol: hash it twice
#: (its SHA-256, the layer digest, and the chunk table push binds); over Xet also check it with
#: BLAKE3 once (the chunk hashes a xorb is named by) and write it once (the xorbs are kept, for
#: later uploads to name); over LFS nothing is written (a large upload is relayed from memory)
LEAST_WORK = """
import hashlib, sys, blake3
from ocibridge.chunks.chunking import ChunkHasher
whole, table, xet = hashlib.sha256(), ChunkHasher(1 << 20, threaded=False), blake3.blake3()
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as out:
    while block := f.read(1 << 20):
        whole.update(block); table.update(block)
        if sys.argv[3] == "xet":
            xet.update(block); out.write(block)
"""


@dataclass
class Runs:
    """The samples of one row: wall seconds, and CPU seconds of the client, serve and registry."""

    wall: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)
    serve: list[float] = field(default_factory=list)
    registry: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)

    def add(self, sample: Sample, serve: float | None = None, registry: float | None = None,
            rss: float | None = None) -> None:
        self.wall.append(sample.seconds)
        self.client.append(sample.cpu)
        if serve is not None:
            self.serve.append(serve)
        if registry is not None:
            self.registry.append(registry)
        self.rss.append(sample.rss_mb if rss is None else rss)

    def median(self, what: str = "wall") -> float:
        values: list[float] = getattr(self, what)
        return statistics.median(values) if values else 0.0

    def shown(self) -> str:
        return f"{self.median():.2f} s [{', '.join(f'{s:.2f}' for s in self.wall)}]"


def upload_session(reg: AtUrl, path: Path, repo: str) -> tuple[str, str]:
    """An upload session started now for the file ``path`` (its location), and the file's digest."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    started = httpx.post(f"{reg.url}/v2/{repo}/blobs/uploads/")
    return str(httpx.URL(reg.url).join(started.headers["location"])), f"sha256:{digest.hexdigest()}"


def curl_put_cmd(reg: AtUrl, path: Path, repo: str) -> list[str]:
    """curl's PUT of the file whose digest is known into an upload session started now."""
    return tools.curl_put([(path, *upload_session(reg, path, repo))])


def curl_put(reg: BenchRegistry, path: Path, repo: str) -> Sample:
    """The registry's own floor: curl PUTs the file whose digest is known, one monolithic upload."""
    return run_measured(curl_put_cmd(reg, path, repo))


def push_cmd(model: Path, ref: str) -> list[str]:
    return [sys.executable, "-m", "ocibridge", "push", str(model), ref, "-q"]


def client_env(work: Path, url: str, protocol: str, home: Path) -> dict[str, str]:
    """huggingface_hub's environment for publishing through serve at ``url`` over ``protocol``
    (its HF_HOME ``home``: hf_xet's cache in it)."""
    env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token", "HF_HOME": str(home)}
    if protocol == "lfs":
        env["HF_HUB_DISABLE_XET"] = "1"
    return env


def run(size_mib: int, work: Path, repeat: int, protocols: list[str]) -> list[str]:
    model = make_model(work / f"m{size_mib}", size_mib)
    weights = model / "model.safetensors"
    ways = ("curl", "push", "prelude", "least", "first-xorb", "at-once", "lfs-at-once", *protocols)
    rows: dict[str, Runs] = {name: Runs() for name in ways}
    before = load()
    with fresh_registry(work) as reg:
        for n in range(repeat):
            r0 = reg.cpu_seconds()
            sample = curl_put(reg, weights, f"bench/curl{size_mib}-{n}")
            rows["curl"].add(sample, registry=reg.cpu_seconds() - r0)
            env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / f"push-cache{n}")}
            r0 = reg.cpu_seconds()
            sample = run_measured(push_cmd(model, f"{reg.host}/bench/push{size_mib}-{n}:latest"), env=env)
            rows["push"].add(sample, registry=reg.cpu_seconds() - r0)
            shutil.rmtree(work / f"push-cache{n}", ignore_errors=True)
            rows["prelude"].add(run_measured([sys.executable, "-c", PRELUDE, str(weights)], env=base_env(work)))
            for protocol in protocols:
                home = work / f"hf-home-{protocol}-{n}"  # hf_xet's cache in it: nothing known from before
                log = work / f"serve-{protocol}-{n}.log"  # when hf_xet's first xorb came
                with serving(work, f"{reg.host}/bench", log) as (url, proc):
                    env = client_env(work, url, protocol, home)
                    s0, r0 = cpu_of(proc.pid), reg.cpu_seconds()
                    with first_seen(log, "xorb received") as seen:
                        sample = run_measured([sys.executable, "-c", UPLOAD, f"acme/{protocol}{size_mib}-{n}",
                                               str(model)], env=env)
                    if protocol == "xet" and seen:
                        rows["first-xorb"].wall.append(seen[0])
                    rows[protocol].add(sample, serve=cpu_of(proc.pid) - s0, registry=reg.cpu_seconds() - r0,
                                       rss=peak_rss_mib(proc.pid))
                shutil.rmtree(home, ignore_errors=True)
                # its floor, measured in the same round (bench/floor_at_once.py)
                if protocol == "xet":
                    at_once = floor_at_once.xet(reg, weights, f"bench/floor{size_mib}-{n}", work)
                    rows["at-once"].wall.append(at_once.after_first_xorb)
                else:
                    rows["lfs-at-once"].wall.append(floor_at_once.lfs(reg, weights, f"bench/lfsfloor{size_mib}-{n}",
                                                                      work))
        for protocol in protocols:
            out = work / "least-work.out"
            rows[f"least-{protocol}"] = Runs()
            for _ in range(repeat):
                rows[f"least-{protocol}"].add(run_measured([sys.executable, "-c", LEAST_WORK, str(weights), str(out),
                                                            protocol], env=base_env(work)))
                out.unlink()
    shutil.rmtree(model)
    return table(size_mib, rows, protocols, before, load())


def table(size_mib: int, rows: dict[str, Runs], protocols: list[str], before: str, after: str) -> list[str]:
    """The rows of one size: each way's wall time and CPU, its ratio to push, and the floor that
    bounds it on this machine (measured in the same run)."""
    push, curl, prelude = rows["push"], rows["curl"], rows["prelude"]
    # the floors divide by the cores these processes may run on (``taskset``, a cgroup's quota), not the machine's
    cores = capacity().cpus
    lines = [f"#### {size_mib} MiB: {len(push.wall)} alternating runs each, load {before} → {after}, "
             f"{os.cpu_count()} CPUs ({cores} this process may use)",
             "",
             "| way | wall median s [runs] | ÷ push | client CPU s | serve CPU s | registry CPU s | peak RSS MiB |",
             "|---|---|---|---|---|---|---|",
             f"| curl PUT of the weights, digest known (the registry's floor) | {curl.shown()} | "
             f"{curl.median() / push.median():.2f}× | {curl.median('client'):.2f} | - | "
             f"{curl.median('registry'):.2f} | {max(curl.rss):.0f} |",
             f"| `ocibridge push` | {push.shown()} | 1.00× | {push.median('client'):.2f} | - | "
             f"{push.median('registry'):.2f} | {max(push.rss):.0f} |",
             f"| huggingface_hub before its first byte (import, SHA-256 of the file) | {prelude.shown()} | "
             f"{prelude.median() / push.median():.2f}× | {prelude.median('client'):.2f} | - | - | - |"]
    first = rows["first-xorb"]
    if first.wall:
        lines.append(f"| hf_xet's first xorb at serve (import, create_repo, its first 64 MiB chunked and sent) | "
                     f"{first.shown()} | {first.median() / push.median():.2f}× | - | - | - | - |")
    floors = []
    for protocol in protocols:
        runs, least = rows[protocol], rows[f"least-{protocol}"]
        label = "LFS (`HF_HUB_DISABLE_XET=1`)" if protocol == "lfs" else "Xet (hf_xet, the default)"
        target = 1.2 if protocol == "lfs" else 1.3
        lines.append(f"| `upload_folder` through serve, {label} | {runs.shown()} | "
                     f"**{runs.median() / push.median():.2f}×** (target ≤ {target}×) | {runs.median('client'):.2f} | "
                     f"{runs.median('serve'):.2f} | {runs.median('registry'):.2f} | serve {max(runs.rss):.0f} |")
        work = "SHA-256, the chunk table" if protocol == "lfs" else "SHA-256, the chunk table, BLAKE3, one write"
        lines.append(f"| serve's least work per byte ({work}), in one process | {least.shown()} | - | "
                     f"{least.median('client'):.2f} | - | - | - |")
        if protocol == "lfs":
            # the client hashes the file before any byte moves, and the registry takes the bytes
            # no faster than curl's PUT: the two follow each other
            floor = prelude.median() + curl.median()
            why = (f"the client's {prelude.median():.2f} s before its first byte + the registry's "
                   f"{curl.median():.2f} s to take the bytes (curl)")
        else:
            # every CPU second the run needs at least, over the machine's cores: the client's own
            # (hf_xet chunks, hashes, compresses), the registry's for the bytes, serve's least work
            # and a receive and a send of the bytes (curl's CPU for one, twice)
            need = runs.median("client") + curl.median("registry") + least.median("client") + 2 * curl.median("client")
            floor = need / cores
            why = (f"({runs.median('client'):.2f} s hf_xet's CPU + {curl.median('registry'):.2f} s the registry's + "
                   f"{least.median('client'):.2f} s serve's least work + {2 * curl.median('client'):.2f} s a receive "
                   f"and a send) / {cores} cores")
        floors.append(f"| floor of {label} | {floor:.2f} s | **{floor / push.median():.2f}×** | {why} |")
        floors += measured_floor(protocol, label, runs, push, first if protocol == "xet" else prelude,
                                 rows.get("at-once" if protocol == "xet" else "lfs-at-once"))
        if protocol == "xet" and first.wall:
            # the registry takes one blob on one thread: no byte of it before serve has the first
            # verified xorb, then no faster than it takes curl's PUT of the same bytes
            chain = first.median() + curl.median()
            floors.append(f"| {label}, the registry's chain | {chain:.2f} s | **{chain / push.median():.2f}×** | "
                          f"hf_xet's first xorb at serve {first.median():.2f} s + the registry's {curl.median():.2f} s "
                          f"to take the bytes (curl) |")
        # the same bound with serve's CPU as measured, not its least: what the run itself needs
        used = runs.median("client") + runs.median("serve") + runs.median("registry")
        bound = used / cores
        floors.append(f"| {label} at serve's measured CPU | {bound:.2f} s | {bound / push.median():.2f}× | "
                      f"({runs.median('client'):.2f} s client + {runs.median('serve'):.2f} s serve + "
                      f"{runs.median('registry'):.2f} s registry) / {cores} cores |")
    lines += ["", "| floor | s | ÷ push | made of (measured above, same run) |", "|---|---|---|---|", *floors, ""]
    return lines


def measured_floor(protocol: str, label: str, runs: Runs, push: Runs, before: Runs, at_once: Runs | None) -> list[str]:
    """The floor row measured as the work at once (bench/floor_at_once.py), the row divided by it:
    the client's time before the others can begin (``before``: hf_xet's first xorb at serve, or
    huggingface_hub's hashing over LFS) + the time the work at once took; no row when not measured."""
    if not before.wall or at_once is None or not at_once.wall:
        return []
    measured = before.median() + at_once.median()
    if protocol == "xet":
        made = (f"hf_xet's first xorb at serve {before.median():.2f} s + {at_once.median():.2f} s from a sink's first "
                f"xorb until hf_xet to the sink, curl's PUT and serve's least work were all done")
    else:
        made = (f"the client's {before.median():.2f} s before its first byte + {at_once.median():.2f} s until its "
                f"send to a sink, curl's PUT and serve's least work, begun together, were all done")
    return [f"| floor of {label}, measured: the work at once | {measured:.2f} s | "
            f"**{measured / push.median():.2f}×** | {made} (bench/floor_at_once.py); "
            f"the row ÷ it: **{runs.median() / measured:.2f}×** |"]


TENSORS = 10
XET_UPLOAD = ("import sys; from huggingface_hub import HfApi; api = HfApi(); "
              "api.create_repo(sys.argv[1], exist_ok=True); "
              "api.upload_file(path_or_fileobj=sys.argv[2], path_in_repo='model.safetensors', repo_id=sys.argv[1])")


def ten_tensors(path: Path, size_mib: int, fresh: int | None = None) -> str:
    """A safetensors file of ten U8 tensors of random bytes (seeded: the same file twice), tensor
    ``fresh`` drawn anew; its SHA-256."""
    import random

    each = size_mib * MiB // TENSORS
    header = json.dumps({f"layer{i}.weight": {"dtype": "U8", "shape": [each],
                                              "data_offsets": [i * each, (i + 1) * each]}
                         for i in range(TENSORS)}).encode()
    header += b" " * (-len(header) % 8)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for piece in (len(header).to_bytes(8, "little"), header):
            f.write(piece)
            digest.update(piece)
        for i in range(TENSORS):
            rng = random.Random(1000 + i if i != fresh else 2000 + i)
            for _ in range(each // MiB):
                piece = rng.randbytes(MiB)
                f.write(piece)
                digest.update(piece)
            piece = rng.randbytes(each % MiB)
            f.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def xorb_bytes(log: str) -> int:
    """What serve says it received in xorb POSTs (its log line per xorb)."""
    return sum(int(n) for n in re.findall(r"xorb (?:received|held already), (\d+) bytes", log))


def run_dedupe(size_mib: int, work: Path) -> list[str]:
    first, second = work / "v1.safetensors", work / "v2.safetensors"
    ten_tensors(first, size_mib)
    new_sha = ten_tensors(second, size_mib, fresh=4)
    log = work / "serve.log"
    with fresh_registry(work) as reg, serving(work, f"{reg.host}/bench", log) as (url, proc):
        took = []
        for n, path in enumerate((first, second)):
            mark = len(log.read_text())
            env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token", "HF_HOME": str(work / f"hf{n}")}
            env.pop("HF_HUB_DISABLE_XET", None)
            took.append(timed([sys.executable, "-c", XET_UPLOAD, "acme/ft", str(path)], env))
            sent = xorb_bytes(log.read_text()[mark:])
        manifest = httpx.get(f"http://{reg.host}/v2/bench/acme/ft/manifests/latest",
                             headers={"Accept": "application/vnd.oci.image.manifest.v1+json"}).json()
        held = f"sha256:{new_sha}" in [layer["digest"] for layer in manifest["layers"]]
        rss = peak_rss_mib(proc.pid)
    size = second.stat().st_size
    return [f"| {size_mib} MiB, one tensor of ten changed (Xet) | second upload sent {sent / MiB:.1f} MiB = "
            f"{100 * sent / size:.1f} % of the file | upload {took[0]:.1f} s, then {took[1]:.1f} s | registry layer "
            f"is the new SHA-256: {'yes' if held else 'NO'} | serve peak RSS {rss:.0f} MiB | load {load()} |"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1024], help="weights sizes in MiB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dedupe", type=int, metavar="SIZE", help="the one-tensor-changed row at SIZE MiB, only")
    p.add_argument("--protocols", nargs="+", choices=["xet", "lfs"], default=["xet", "lfs"],
                   help="how huggingface_hub uploads: hf_xet (its default) or LFS (HF_HUB_DISABLE_XET=1)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        work = Path(tmp)
        os.environ["OCIBRIDGE_CACHE"] = str(work / "own-cache")
        if args.dedupe:
            print(*run_dedupe(args.dedupe, work), flush=True)
            return
        for size in args.sizes:
            for row in run(size, work, args.repeat, args.protocols):
                print(row, flush=True)


if __name__ == "__main__":
    main()
