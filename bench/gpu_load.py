"""A whole model onto a GPU (issue 89): ``load_tensors(REF, framework="torch", device="cuda")``
against the file-based ways there, on a fresh local registry.

    python -m bench.gpu_load                                # 1536 MiB, 3 rounds, CUDA
    python -m bench.gpu_load --device cpu --size 64         # the same flow, no GPU: a quick check

bench/gpu/run.sh runs it on the GPU machine (no internet: wheels and the registry binary come in
the checkout's .whl folder). The model is generated, seeded: bf16 and f32 matrices of 32 MiB in
turn plus a small f32 vector per layer, pushed with its chunk table. Each round runs, alternating
so that a slow stretch hits every row alike, each row as a process of its own that has imported
torch and ocibridge and made its CUDA context before its clock starts (so the times are the
loads, not the start-up), and stops its clock after ``torch.cuda.synchronize()``:

- ``load_tensors``: ``ocibridge.load_tensors(REF, framework="torch", device=DEVICE)``;
- ``load_tensors + .to``: the same into host memory (no device), then each tensor ``.to(DEVICE)``;
- ``load_file + .to``: ``safetensors.torch.load_file(FILE)``, then each tensor ``.to(DEVICE)``;
- ``load_file(device=)``: ``safetensors.torch.load_file(FILE, device=DEVICE)``;
- ``pull + load_file + .to``: ``ocibridge.pull(REF, DIR)`` (the API, in the process), then as
  the second row from the pulled file (its page cache warm, as after any pull).

FILE is the generated file (in the page cache: the file rows read no disk). Before the rounds, a
check process loads the model both ways and compares every tensor (``torch.equal``: values,
dtype, shape, device). Medians of the rounds, every sample shown, GiB/s of the tensors' bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
GiB = 1024 * MiB
#: each large tensor's bytes (a 4096 × 4096 bf16 matrix, a 4096 × 2048 f32 one)
MATRIX = 32 * MiB
#: the seed of the generated model's bytes
SEED = 89
ROWS = ("load_tensors", "load_tensors_host_to", "load_file_to", "load_file_device", "pull_load_file_to")
TITLES = {
    "load_tensors": "load_tensors(REF, framework='torch', device=D)",
    "load_tensors_host_to": "load_tensors(REF, framework='torch') + .to(D)",
    "load_file_to": "safetensors.torch.load_file(FILE) + .to(D)",
    "load_file_device": "safetensors.torch.load_file(FILE, device=D)",
    "pull_load_file_to": "ocibridge.pull(REF, DIR) + load_file + .to(D)",
}

SHORT = {"load_tensors_host_to": "(load_tensors + .to)", "load_file_to": "(load_file + .to)",
         "load_file_device": "load_file(device=D)", "pull_load_file_to": "(pull + load_file + .to)"}


# -- the model ---------------------------------------------------------------------------------
def write_model(directory: Path, size: int, seed: int = SEED) -> Path:
    """A safetensors file of about ``size`` bytes: per layer a bf16 matrix, an f32 matrix (32 MiB
    each) and a 4096-float f32 vector; random bits with the exponent's top bit cleared, so no
    value is Inf or NaN (``torch.equal`` would call NaN unequal to itself)."""
    import numpy

    layers = max(1, size // (2 * MATRIX))
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    at = 0
    plan: list[tuple[str, int]] = []
    for i in range(layers):
        for name, dtype, shape in ((f"layers.{i}.attn.weight", "BF16", [4096, MATRIX // 8192]),
                                   (f"layers.{i}.mlp.weight", "F32", [4096, MATRIX // 16384]),
                                   (f"layers.{i}.norm.weight", "F32", [4096])):
            nbytes = (2 if dtype == "BF16" else 4) * shape[0] * (shape[1] if len(shape) > 1 else 1)
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + nbytes]}
            plan.append((dtype, nbytes))
            at += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    directory.mkdir(parents=True)
    path = directory / "model.safetensors"
    rng = numpy.random.default_rng(seed)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for dtype, nbytes in plan:
            if dtype == "BF16":
                bits = numpy.frombuffer(rng.bytes(nbytes), dtype="<u2") & numpy.uint16(0xBFFF)
            else:
                bits = numpy.frombuffer(rng.bytes(nbytes), dtype="<u4") & numpy.uint32(0xBFFFFFFF)
            f.write(bits.tobytes())
    (directory / "config.json").write_text('{"model_type": "bench"}')
    return path


def tensors_in(path: Path) -> int:
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return len([k for k in json.loads(f.read(length)) if k != "__metadata__"])


# -- a registry ----------------------------------------------------------------------------------
@contextlib.contextmanager
def registry(work: Path) -> Iterator[str]:
    """``docker-registry`` (from PATH) on a free loopback port, storage under ``work``: its host."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise SystemExit("gpu_load: docker-registry is not on PATH (bench/gpu/run.sh puts .whl's there)")
    import yaml

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.yml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(work / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
    }))
    with (work / "registry.log").open("ab") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v2/")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = (work / "registry.log").read_text()
                    raise SystemExit(f"gpu_load: the registry did not start: {said}") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- one row, in a process of its own --------------------------------------------------------------
def worker(row: str, ref: str, file: str, device: str, pulled: str) -> dict[str, object]:
    """Run ``row`` once, its clock started after the imports and the device's context."""
    import resource

    import torch
    from safetensors.torch import load_file

    import ocibridge
    from ocibridge.api.model_ops import pull

    if device.startswith("cuda"):
        torch.empty(1, device=device)
        torch.cuda.synchronize()

    def done() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    out: dict[str, object] = {}
    t = time.perf_counter()
    if row == "load_tensors":
        tensors = ocibridge.load_tensors(ref, framework="torch", device=device)
    elif row == "load_tensors_host_to":
        tensors = {k: v.to(device) for k, v in ocibridge.load_tensors(ref, framework="torch").items()}
    elif row == "load_file_to":
        tensors = {k: v.to(device) for k, v in load_file(file).items()}
    elif row == "load_file_device":
        tensors = load_file(file, device=device)
    elif row == "pull_load_file_to":
        pull(ref, pulled)
        out["pull"] = time.perf_counter() - t
        tensors = {k: v.to(device) for k, v in load_file(str(Path(pulled) / "model.safetensors")).items()}
    elif row == "check":  # (iter_tensors with no bound is load_tensors: it says what staging took)
        with ocibridge.iter_tensors(ref, framework="torch", device=device, max_bytes=None) as stream:
            got = dict(stream)
        pinned_mib = pinned() if device.startswith("cuda") else {}
        return {**check(got, load_file(file, device=device)), "staging_mib": stream.staging_bytes / MiB,
                "pinned": pinned_mib}
    else:
        raise SystemExit(f"gpu_load: no row {row!r}")
    done()
    out["seconds"] = time.perf_counter() - t
    out["bytes"] = sum(v.numel() * v.element_size() for v in tensors.values())
    out["tensors"] = len(tensors)
    out["devices"] = sorted({str(v.device) for v in tensors.values()})
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if device.startswith("cuda"):
        out["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / MiB
        out["pinned"] = pinned()
    return out


def pinned() -> dict[str, float]:
    """torch's pinned host allocator, in MiB: its peaks (what the staging rings took, on CUDA)."""
    import torch

    try:
        stats = torch.cuda.host_memory_stats()
    except Exception as e:  # noqa: BLE001  # (a torch without it: said, not fatal)
        return {"error": str(e)}  # type: ignore[dict-item]
    return {k: v / MiB for k, v in stats.items() if "bytes" in k and "peak" in k}


def check(got: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, object]:
    """Every tensor of ``want`` in ``got``, equal (values, dtype, shape) and on the same device."""
    import torch

    wrong = [name for name, w in want.items()
             if not (isinstance(g := got.get(name), torch.Tensor) and isinstance(w, torch.Tensor)
                     and g.dtype == w.dtype and g.device == w.device and torch.equal(g, w))]
    dtypes = sorted({str(w.dtype) for w in want.values() if isinstance(w, torch.Tensor)})
    return {"tensors": len(want), "equal": len(want) - len(wrong), "wrong": wrong[:5],
            "extra": sorted(set(got) - set(want))[:5], "dtypes": dtypes,
            "devices": sorted({str(g.device) for g in got.values() if isinstance(g, torch.Tensor)})}


def run_worker(row: str, ref: str, file: Path, device: str, pulled: Path, env: dict[str, str]) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_load", "--worker", row, "--ref", ref, "--file", str(file),
                           "--device", device, "--pulled", str(pulled)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:  # said, and the other rows go on
        print(f"gpu_load: the {row} process failed ({proc.returncode}):\n{proc.stderr[-4000:]}", flush=True)
        return {"error": (proc.stderr.strip().splitlines() or ["(no output)"])[-1]}
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- the rounds, and what they say ------------------------------------------------------------------
def run(args: argparse.Namespace, work: Path) -> dict[str, object]:
    from ocibridge.api.model_ops import push

    started = time.monotonic()
    with registry(work / "registry") as host:
        t = time.perf_counter()
        file = write_model(work / "model", args.size * MiB)
        made = time.perf_counter() - t
        ref = f"{host}/bench/gpu{args.size}:v1"
        t = time.perf_counter()
        pushed = push(str(work / "model"), ref)
        pushing = time.perf_counter() - t
        assert "chunks" in pushed.extra, "the bench model must have its chunk table"
        cache, pulled = work / "cache", work / "pulled"
        env = {**os.environ, "OCIBRIDGE_CACHE": str(cache)}

        def clean() -> None:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(pulled, ignore_errors=True)

        checked: dict[str, Any] = run_worker("check", ref, file, args.device, pulled, env)
        checked.setdefault("equal", 0), checked.setdefault("tensors", "?"), checked.setdefault("wrong", [])
        checked.setdefault("dtypes", []), checked.setdefault("devices", [])
        print(f"check: {checked['equal']} of {checked['tensors']} tensors equal ({', '.join(checked['dtypes'])}"
              f", on {', '.join(checked['devices'])})", flush=True)
        samples: dict[str, list[dict[str, object]]] = {row: [] for row in ROWS}
        for row in ROWS:  # warm-up: the page cache, the registry's own
            clean()
            run_worker(row, ref, file, args.device, pulled, env)
        rounds_started = time.monotonic()
        for i in range(args.repeat):
            order = ROWS if i % 2 == 0 else tuple(reversed(ROWS))
            for row in order:
                clean()
                samples[row].append(run_worker(row, ref, file, args.device, pulled, env))
            took = (time.monotonic() - rounds_started) / (i + 1)
            print(f"round {i + 1}: " + ", ".join(f"{row} {samples[row][-1].get('seconds', -1):.2f} s" for row in ROWS),
                  flush=True)
            if i + 1 < args.repeat and time.monotonic() - started + took > args.deadline:
                print(f"(stopping after {i + 1} rounds: the next would pass --deadline {args.deadline} s)", flush=True)
                break
        clean()
    return {"size_mib": args.size, "tensors": tensors_in(file), "device": args.device, "ref": ref,
            "file_bytes": file.stat().st_size, "generate_s": made, "push_s": pushing, "check": checked,
            "samples": samples}


def report(result: dict[str, object], header: str) -> str:
    everything: dict[str, list[dict[str, Any]]] = result["samples"]  # type: ignore[assignment]
    failed = {row: [s["error"] for s in got if "error" in s] for row, got in everything.items()}
    samples = {row: [s for s in got if "error" not in s] for row, got in everything.items()}
    nbytes = next((s["bytes"] for got in samples.values() for s in got), 0)

    def show(xs: list[float], unit: str = "s") -> str:
        return f"{statistics.median(xs):.2f} {unit} ({', '.join(f'{x:.2f}' for x in xs)})"

    lines = [header, "", "| row | median (samples) | GiB/s, median (samples) "
                         "| peaks: host RSS, CUDA allocated; pinned host |", "| --- | --- | --- | --- |"]
    medians = {}
    for row in ROWS:
        if not samples[row]:
            lines.append(f"| {TITLES[row]} | failed: {failed[row][0]} | | |")
            continue
        secs = [s["seconds"] for s in samples[row]]
        medians[row] = statistics.median(secs)
        rates = [nbytes / GiB / x for x in secs]
        peaks = f"{max(s['rss_mib'] for s in samples[row]):.0f} MiB"
        if "cuda_peak_mib" in samples[row][0]:
            peaks += f", {max(s['cuda_peak_mib'] for s in samples[row]):.0f} MiB"
            held = [s["pinned"].get("allocated_bytes.peak") for s in samples[row] if "pinned" in s]
            if held and None not in held:
                peaks += f"; pinned {max(held):.0f} MiB"
        extra = f"; pull {show([s['pull'] for s in samples[row]])}" if row == "pull_load_file_to" else ""
        if failed[row]:
            extra += f"; {len(failed[row])} failed: {failed[row][0]}"
        lines.append(f"| {TITLES[row]} | {show(secs)}{extra} | {show(rates, 'GiB/s')} | {peaks} |")
    checked: dict[str, Any] = result["check"]  # type: ignore[assignment]
    lines += ["",
              f"- {nbytes / MiB:.0f} MiB of tensors ({result['tensors']} tensors), generated in "
              f"{result['generate_s']:.1f} s, pushed in {result['push_s']:.1f} s",
              f"- check: **{checked['equal']} of {checked['tensors']}** tensors equal (torch.equal; "
              f"{', '.join(checked['dtypes'])}), wrong: {checked['wrong'] or 'none'}; host memory of the "
              f"staging rings (pinned for CUDA): {checked.get('staging_mib', 0):.0f} MiB; torch's pinned "
              f"allocator: {checked.get('pinned') or '-'}",
              "- load_tensors(device=D) / " + "; / ".join(
                  f"{SHORT[row]}: **{medians['load_tensors'] / medians[row]:.2f}×**"
                  for row in ROWS[1:] if "load_tensors" in medians and row in medians)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=1536, help="MiB of tensors (default 1536)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=1e9, help="no round starts that would end after this (s)")
    parser.add_argument("--out", type=Path, default=None, help="a folder for gpu_load.json and gpu_load.md")
    parser.add_argument("--work", type=Path, default=None, help="a scratch folder (default: a temporary one)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ref", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--pulled", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.ref, args.file, args.device, args.pulled)))
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="ocibridge-bench-gpu-", dir=args.work) as tmp:
        result = run(args, Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    import torch

    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    header = (f"### `python -m bench.gpu_load --device {args.device} --size {args.size} --repeat {args.repeat}` "
              f"(git {commit or '?'}, {started}, {where}, torch {torch.__version__}, load {os.getloadavg()[0]:.1f})")
    text = report(result, header)
    result["header"] = header
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_load.json").write_text(json.dumps(result, indent=1))
        (args.out / "gpu_load.md").write_text(text + "\n")
    print(text)
    checked: dict[str, object] = result["check"]  # type: ignore[assignment]
    if checked["wrong"] or checked["equal"] != checked["tensors"]:
        raise SystemExit("gpu_load: tensors loaded by load_tensors differ from load_file's")


if __name__ == "__main__":
    main()
