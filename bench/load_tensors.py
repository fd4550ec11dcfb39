"""A whole model's tensors into memory (issue 80): ``load_tensors`` against ``ocibridge pull`` +
``safetensors.numpy.load_file``, and against the floor, on a fresh local registry.

    .venv/bin/python -m bench.load_tensors                          # 1 GiB of 64 tensors, 5 rounds
    .venv/bin/python -m bench.load_tensors --size 256 --repeat 3    # MiB; a quick run

Each round runs, alternating so that a slow stretch of the machine hits every row alike, and
each as a process of its own (its wall time, its peak RSS from GNU time), with ``sync`` and an
empty model cache between them:

- ``load``: ``ocibridge.load_tensors(REF)`` (the model pushed with its chunk table, the default
  from 64 MiB); the script also prints its own time from the call to the last tensor, and the
  wall clock at its first line, at its first connection (an audit hook on ``socket.connect``)
  and at its last tensor: beside the parent's clock at the start and at the reaping, the
  process's timeline: the interpreter's start, the call's imports and set-up before anything is
  on the wire, the wire, and the exit (finalization, the tensors' memory freed) (issue 91);
- ``pull+load``: ``ocibridge pull REF DIR -q``, then a process that runs
  ``safetensors.numpy.load_file`` over the pulled file (the two wall times added);
- ``curl``: ``curl -o /dev/null`` of the blob (the wire, nothing written);
- ``into memory``: the blob over one plain socket, ``recv_into`` a ``numpy.empty`` of its size (the
  wire into fresh memory, as a loader must land it: no hash, no check, no Python per byte), and
  its exit beside load_tensors' (both free the same memory). On a
  VM the first touch of fresh memory can cost more than the wire (docs/benchmarks.md, issue 80),
  and ``curl`` to /dev/null pays none of it;
- ``file write``, ``fresh memory``: the machine's landing floors (``bench.landing``): ``dd`` of
  the size into a new file, and a first touch of that much new memory;
- ``hash``: the table's hash (BLAKE3 for tables pushed now, SHA-256 for older ones) over the
  bytes, 1 MiB chunks on one thread, timed in a process that holds the bytes in memory first
  (the CPU floor; only the hashing is timed).

The floor is max(curl, hash) of each round (the issue's), and beside it max(into memory, hash):
what landing the bytes costs on this machine at least. Medians of the rounds, every sample shown.
``--baseline DIR`` runs another checkout's ``load``, with its timeline, in the same rounds.
``--pages`` names the free memory each sample lands in (``bench.landing.prepare``: ``aged`` is the
first run after boot); the header names the machine's memory state, before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

from . import landing
from .proc import Sample, python_path, run_measured
from .registries import fresh_registry
from .run import compile_package

MiB = 1024 * 1024

LOAD = """
import resource, sys, time
begun = time.time()
connected = []
def first_connection(event, args):  # its wall clock: the call's imports and set-up are behind it
    if event == "socket.connect" and not connected:
        connected.append(time.time())
sys.addaudithook(first_connection)
t = time.perf_counter()
import ocibridge
tensors = ocibridge.load_tensors(sys.argv[1])
took = time.perf_counter() - t
ended = time.time()
use = resource.getrusage(resource.RUSAGE_SELF)
print(took, sum(a.nbytes for a in tensors.values()), len(tensors), use.ru_utime, use.ru_stime, begun, ended,
      connected[0])
"""

LOAD_FILE = """
import sys, time
t = time.perf_counter()
from safetensors.numpy import load_file
tensors = load_file(sys.argv[1])
print(time.perf_counter() - t, sum(a.nbytes for a in tensors.values()), len(tensors))
"""

TABLE_HASH = """
import sys, time
from ocibridge.chunks.hashes import factory
new = factory(sys.argv[2])
data = open(sys.argv[1], "rb").read()
view = memoryview(data)
t = time.perf_counter()
for at in range(0, len(data), 1 << 20):
    h = new()
    h.update(view[at:at + (1 << 20)])
    h.hexdigest()
print(time.perf_counter() - t)
"""

INTO_MEMORY = """
import time
begun = time.time()
import socket, sys
import numpy
host, port = sys.argv[1].rsplit(":", 1)
size = int(sys.argv[3])
t = time.perf_counter()
buffer = numpy.empty(size, dtype=numpy.uint8)
view = memoryview(buffer)
with socket.create_connection((host, int(port))) as sock:
    sock.sendall(f"GET {sys.argv[2]} HTTP/1.1\\r\\nHost: {sys.argv[1]}\\r\\nConnection: close\\r\\n\\r\\n".encode())
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += sock.recv(65536)
    head, _, body = head.partition(b"\\r\\n\\r\\n")
    assert head.split()[1] == b"200", head
    view[:len(body)] = body
    at = len(body)
    while at < size:
        got = sock.recv_into(view[at:])
        assert got, "the registry ended the body early"
        at += got
print(time.perf_counter() - t, begun, time.time())
"""


def write_model(directory: Path, size: int, count: int) -> Path:
    """``count`` F32 tensors of ``size / count`` bytes each, random, streamed to the file."""
    directory.mkdir(parents=True)
    each = size // count // 4
    header = {f"layers.{i}.weight": {"dtype": "F32", "shape": [each // 1024, 1024],
                                     "data_offsets": [4 * each * i, 4 * each * (i + 1)]} for i in range(count)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path = directory / "model.safetensors"
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in range(count):
            f.write(os.urandom(4 * each))
    (directory / "config.json").write_text('{"model_type": "bench"}')
    return path


def run(size_mib: int, count: int, work: Path, repeat: int, pages: str = "as-is",
        baseline: Path | None = None) -> list[str]:
    from ocibridge.api.lazy_ops import open_model
    from ocibridge.api.model_ops import push

    rows: list[str] = []
    with fresh_registry(work) as reg:
        src = work / "model"
        file = write_model(src, size_mib * MiB, count)
        ref = f"{reg.host}/bench/load{size_mib}:v1"
        pushed = push(str(src), ref)
        assert "chunks" in pushed.extra, "the bench model must have its chunk table"
        with open_model(ref, cache=False) as model:
            layer = model.file("model.safetensors").layer
            entry = model.chain.table.for_layer(layer) if model.chain.table is not None else None
            algorithm = entry.algorithm if entry is not None else "sha256"
        repo = ref.split("/", 1)[1].rsplit(":", 1)[0]
        cache = work / "cache"
        env = {**os.environ, "OCIBRIDGE_CACHE": str(cache)}
        pulled = work / "pulled"

        def clean() -> None:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(pulled, ignore_errors=True)
            subprocess.run(["sync"], check=True)

        kinds = ("load", "load_inside", "base", "base_inside", "load_start", "load_to_wire", "load_on_wire",
                 "load_exit", "load_user", "load_sys", "base_start", "base_to_wire", "base_on_wire", "base_exit",
                 "base_user", "base_sys", "load_registry", "base_registry", "load_gets", "base_gets",
                 "pull", "load_file", "curl", "memory", "memory_inside", "memory_exit",
                 "hash", "write", "touch")
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        rss: dict[str, list[float]] = {"load": [], "load_file": [], "pull": []}
        clean()
        compile_package(baseline)  # (both trees as an installed copy is: compiled)
        run_measured([sys.executable, "-c", LOAD, ref], env=env)  # warm-up: imports and the page cache
        if baseline is not None:  # its modules warmed up as this checkout's are
            clean()
            run_measured([sys.executable, "-c", LOAD, ref], cwd=str(baseline.resolve()),
                         env={**env, "PYTHONPATH": python_path(str(baseline.resolve()))})
        size = size_mib * MiB

        def measured(cmd: list[str], env: dict[str, str] | None = None) -> Sample:
            landing.prepare(pages, size)
            return run_measured(cmd, env=env)

        def load_timed(row: str, cwd: str | None, run_env: dict[str, str]) -> None:
            """One load_tensors process: its wall time, and its timeline (the child's wall clocks
            beside the parent's: the process's two ends)."""
            clean()
            landing.prepare(pages, size)
            reg.mark()
            registry_cpu = reg.cpu_seconds()
            spawned = time.time()
            s = run_measured([sys.executable, "-c", LOAD, ref], cwd=cwd, env=run_env)
            reaped = time.time()
            samples[f"{row}_registry"].append(reg.cpu_seconds() - registry_cpu)
            samples[f"{row}_gets"].append(reg.blob_gets_since_mark() / (size_mib / 1024))
            inside, nbytes, tensors, user, system, begun, ended, connected = s.stdout.split()
            assert int(nbytes) == count * (size_mib * MiB // count // 4) * 4 and int(tensors) == count
            samples[row].append(s.seconds)
            samples[f"{row}_inside"].append(float(inside))
            samples[f"{row}_start"].append(float(begun) - spawned)
            samples[f"{row}_to_wire"].append(float(connected) - float(begun))
            samples[f"{row}_on_wire"].append(float(ended) - float(connected))
            samples[f"{row}_exit"].append(reaped - float(ended))
            samples[f"{row}_user"].append(float(user))
            samples[f"{row}_sys"].append(float(system))
            if row == "load":
                rss["load"].append(s.rss_mb)

        def load_baseline() -> None:
            """The other checkout's load_tensors, in the same round (its directory the working
            one too: ``-c`` imports from there before PYTHONPATH)."""
            home = str(baseline.resolve()) if baseline is not None else ""
            load_timed("base", home, {**env, "PYTHONPATH": python_path(home)})

        for round_ in range(repeat):
            if baseline is not None and round_ % 2 == 1:  # (which goes first alternates: a round's first
                load_baseline()  # process lands in memory the previous rows just gave back)
            load_timed("load", None, env)
            if baseline is not None and round_ % 2 == 0:
                load_baseline()
            clean()
            s = measured([sys.executable, "-m", "ocibridge", "pull", ref, str(pulled), "-q"], env=env)
            samples["pull"].append(s.seconds)
            rss["pull"].append(s.rss_mb)
            s = measured([sys.executable, "-c", LOAD_FILE, str(pulled / "model.safetensors")], env=env)
            samples["load_file"].append(s.seconds)
            rss["load_file"].append(s.rss_mb)
            clean()
            s = measured(landing.curl_null(f"http://{reg.host}/v2/{repo}/blobs/{layer.digest}"))
            samples["curl"].append(s.seconds)
            s = measured([sys.executable, "-c", INTO_MEMORY, reg.host, f"/v2/{repo}/blobs/{layer.digest}",
                          str(layer.size)])
            reaped = time.time()
            inside_memory, _, memory_ended = s.stdout.split()
            samples["memory"].append(s.seconds)
            samples["memory_inside"].append(float(inside_memory))
            samples["memory_exit"].append(reaped - float(memory_ended))
            landing.prepare(pages, size)
            samples["write"].append(landing.write_sample(work / "written", size).seconds)
            samples["touch"].append(measured(landing.fresh_memory(size)).seconds)
            s = run_measured([sys.executable, "-c", TABLE_HASH, str(file), algorithm])
            samples["hash"].append(float(s.stdout))
        clean()

    def show(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} s ({', '.join(f'{x:.2f}' for x in xs)})"

    def counts(xs: list[float]) -> str:
        return f"{statistics.median(xs):.1f} ({', '.join(f'{x:.1f}' for x in xs)})"

    pull_load = [p + lf for p, lf in zip(samples["pull"], samples["load_file"], strict=True)]
    floor = [max(c, h) for c, h in zip(samples["curl"], samples["hash"], strict=True)]
    landed = [max(m, h) for m, h in zip(samples["memory"], samples["hash"], strict=True)]
    load, in_call = statistics.median(samples["load"]), statistics.median(samples["load_inside"])
    tensor_mib = count * (size_mib * MiB // count // 4) * 4 / MiB
    peak = max(rss["load"])
    rows += [
        f"| load_tensors, as a process | {show(samples['load'])} | |",
        f"| the same, from the call to the last tensor (inside the process) | {show(samples['load_inside'])} | |",
        f"| the same, before the call: started to the script's first line (the interpreter's start) "
        f"| {show(samples['load_start'])} | |",
        f"| the same, the script's first line to its first connection (the call's imports and set-up: "
        f"nothing on the wire yet) | {show(samples['load_to_wire'])} | |",
        f"| the same, the first connection to the last tensor | {show(samples['load_on_wire'])} | |",
        f"| the same, after the call: the last tensor to the process reaped (its exit: finalization, "
        f"memory freed) | {show(samples['load_exit'])} | |",
        f"| the same, CPU of the process: user / system | {show(samples['load_user'])} "
        f"/ {show(samples['load_sys'])} | |",
        f"| the same, CPU of the registry; blob GETs per GiB | {show(samples['load_registry'])}; "
        f"{counts(samples['load_gets'])} | |",
        *([f"| load_tensors of the baseline ({baseline}), as a process | {show(samples['base'])} "
           f"| from the call {show(samples['base_inside'])} |",
           f"| the baseline's: the interpreter's start; first line to first connection; first connection to "
           f"last tensor; last tensor to reaped | {show(samples['base_start'])}; {show(samples['base_to_wire'])}; "
           f"{show(samples['base_on_wire'])}; {show(samples['base_exit'])} | CPU user / system "
           f"{show(samples['base_user'])} / {show(samples['base_sys'])}; registry CPU "
           f"{show(samples['base_registry'])}; blob GETs per GiB {counts(samples['base_gets'])} |"]
          if baseline is not None else []),
        f"| ocibridge pull + safetensors.numpy.load_file, two processes | {show(pull_load)} "
        f"| pull {show(samples['pull'])}; load_file {show(samples['load_file'])} |",
        f"| curl of the blob to /dev/null | {show(samples['curl'])} | |",
        f"| the blob into fresh memory: one socket, recv_into a numpy.empty (as a process) "
        f"| {show(samples['memory'])} | inside the process, from allocating to the last byte: "
        f"{show(samples['memory_inside'])}; its last byte to reaped (its exit: the same memory freed) "
        f"{show(samples['memory_exit'])} |",
        f"| {landing.FILE_WRITE}: the size into a new file on this file system | {show(samples['write'])} | |",
        f"| {landing.FRESH_MEMORY}: the size in new memory, every page written once | {show(samples['touch'])} | |",
        f"| the table's hash ({algorithm}) of the bytes in 1 MiB chunks, one thread | {show(samples['hash'])} | |",
        f"| the floor: max(curl, {algorithm}) of each round | {show(floor)} | |",
        f"| landing's floor: max(into memory, {algorithm}) of each round | {show(landed)} | |",
        "",
        f"- load_tensors / (pull + load_file): **{load / statistics.median(pull_load):.2f}×** (target ≤ 0.6×)",
        f"- load_tensors / floor: **{load / statistics.median(floor):.2f}×** as a process, "
        f"**{in_call / statistics.median(floor):.2f}×** from the call (target ≤ 1.2×); "
        f"/ landing's floor: **{load / statistics.median(landed):.2f}×** as a process",
        *([f"- the baseline's load_tensors / floor: **{_ratio(samples['base'], floor):.2f}×** as a process, "
           f"**{_ratio(samples['base_inside'], floor):.2f}×** from the call; / landing's floor: "
           f"**{_ratio(samples['base'], landed):.2f}×**; / (pull + load_file): "
           f"**{_ratio(samples['base'], pull_load):.2f}×**"] if baseline is not None else []),
        f"- peak RSS of load_tensors: **{peak:.0f} MiB** for {tensor_mib:.0f} MiB of tensors "
        f"({', '.join(f'{x:.0f}' for x in rss['load'])}); the target, 1.15 × tensors + 64 MiB: "
        f"{1.15 * tensor_mib + 64:.0f} MiB; pull's peak {max(rss['pull']):.0f} MiB, load_file's "
        f"{max(rss['load_file']):.0f} MiB",
        "- against curl to /dev/null, each median (which figure is the machine's floor):",
        *("  " + line for line in landing.ratio_lines({
            landing.CURL_NULL: statistics.median(samples["curl"]),
            landing.FILE_WRITE: statistics.median(samples["write"]),
            landing.FRESH_MEMORY: statistics.median(samples["touch"]),
            "the blob into fresh memory (one socket)": statistics.median(samples["memory"]),
            "load_tensors": load, "pull": statistics.median(samples["pull"]),
            "pull + load_file": statistics.median(pull_load)})),
    ]
    return rows


def _ratio(xs: list[float], ys: list[float]) -> float:
    return statistics.median(xs) / statistics.median(ys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="MiB of tensors (default 1024)")
    parser.add_argument("--tensors", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    landing.pages_argument(parser)
    parser.add_argument("--work", type=Path, default=None, help="a scratch folder (default: a temporary one)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout whose load_tensors runs in the same rounds (its code before a change)")
    args = parser.parse_args()
    import tempfile

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    before = landing.state()
    with tempfile.TemporaryDirectory(prefix="ocibridge-bench-load-", dir=args.work) as tmp:
        rows = run(args.size, args.tensors, Path(tmp), args.repeat, args.pages, args.baseline)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    print(f"### `python -m bench.load_tensors --size {args.size} --tensors {args.tensors} --repeat {args.repeat} "
          f"--pages {args.pages}` (git {commit}, {started}, load {load[0]:.1f})\n")
    print(f"machine before: {before}\nmachine after: {landing.state()}\n")
    print("| measure | median (samples) | parts |\n| --- | --- | --- |")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
