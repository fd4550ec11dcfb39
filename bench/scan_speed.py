"""What ``--upstream-scan refuse`` adds to a proxied model's first load, and what a scan costs per
format (docs/benchmarks.md, "Scanning at the proxy's door").

    .venv/bin/python -m bench.scan_speed                          # 1 GiB model, 5 runs, 256 MiB files
    .venv/bin/python -m bench.scan_speed --size 8 --repeat 1 --format-size 4   # the smoke run

Proxy rows: an upstream ``ocibridge serve`` over one registry holds a safetensors model; each run
starts two proxies, each ``serve --upstream`` over a registry of its own with empty storage (every
load a first load), one with ``--upstream-scan refuse`` and one without, and times a
``snapshot_download`` through each (a client process of its own, bench/timedclient.py), until its
commit landed; which goes first alternates. The ratio of each run's pair, and their median.

Format rows: ``scan_content`` (what every door runs on each file) of one file of each format
(safetensors, GGUF, NumPy ``.npy``, a PyTorch zip with its pickle, ONNX with its weights inline, a
raw pickle holding its bytes in-band: read whole), the median of ``--repeat`` runs, the bytes the
scanner read, and its speed over the file's size."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.registries import fresh_registry
from bench.scan import CountingFile, MiB, gguf, npy, raw_pickle, safetensors, torch_zip
from bench.serve import REPO, base_env
from bench.timedclient import load
from bench.upstream import TOKEN, cpu_seconds, landed, start, stop, upload
from tests.support.attacks import protobuf_field as _field
from tests.support.attacks import protobuf_varint as _varint


def onnx(path: Path, size: int) -> None:
    """A ModelProto (protobuf by hand): one float initializer whose ``raw_data`` holds the bytes."""
    n = (size - 4096) // 4
    head = _field(1, n) + _field(2, 1) + _field(8, b"w")  # dims [n], FLOAT, name
    raw_key = _varint(9 << 3 | 2) + _varint(4 * n)
    tensor_len = len(head) + len(raw_key) + 4 * n
    node = _field(1, b"w") + _field(2, b"y") + _field(4, b"Identity")
    graph_head = _field(1, node) + _field(2, b"g") + _varint(5 << 3 | 2) + _varint(tensor_len) + head + raw_key
    model_head = _field(1, 8) + _field(8, _field(2, 17)) + _field(2, b"bench")
    model_head += _varint(7 << 3 | 2) + _varint(len(graph_head) + 4 * n) + graph_head
    with path.open("wb") as f:
        f.write(model_head)
        _zeros(f, 4 * n)


def _zeros(f: object, n: int) -> None:
    piece = bytes(MiB)
    while n > 0:
        f.write(piece[: min(n, MiB)])  # type: ignore[attr-defined]
        n -= MiB


FORMATS = {"model.safetensors": safetensors, "model.gguf": gguf, "array.npy": npy,
           "pytorch_model.bin": torch_zip, "model.onnx": onnx, "model.pkl": raw_pickle}


def format_rows(work: Path, size: int, repeat: int) -> list[str]:
    from ocibridge.scanning.formats import scan_content

    rows = ["| file (format its content showed) | size | scan (median, min-max) | per GiB | MB/s of the file "
            "| bytes the scanner read | findings |", "|---|---|---|---|---|---|---|"]
    for name, make in FORMATS.items():
        path = work / name
        make(path, size)
        real = path.stat().st_size
        times, read, kind, flagged = [], 0, "", 0
        for _ in range(repeat):
            content = CountingFile(path)
            t = time.perf_counter()
            kind, found = scan_content(name, content)
            times.append(time.perf_counter() - t)
            read, flagged = content.read_bytes, len([f for f in found if f.flags])
            content.close()
        med = statistics.median(times)
        rows.append(f"| {name} ({kind}) | {real / MiB:.0f} MiB | {_ms(times)} | {med * (1 << 30) / real * 1000:.1f} ms "
                    f"| {real / 1e6 / med if med else float('inf'):,.0f} | {read:,} | {flagged} flagging |")
        path.unlink()
    return rows


def _ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:.1f} ms ({min(times) * 1000:.1f}-{max(times) * 1000:.1f})"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def first_load(work: Path, up_url: str, scan: bool) -> tuple[float, float, float]:
    """A fresh proxy over an empty registry: the client's first load, the time until its commit
    landed, and the proxy's CPU seconds until then (less shaken by a loaded machine than wall time)."""
    flags = ["--upstream", up_url, "--upstream-token-file", str(work / "token.txt")]
    flags += ["--upstream-scan", "refuse"] if scan else []
    name = "scan" if scan else "plain"
    with fresh_registry(work) as registry:
        proxy, url = start(work, f"{registry.host}/{name}", name, *flags)
        try:
            t, cpu = time.perf_counter(), cpu_seconds(proxy)
            got = load(url, REPO, "main", work / "hub", {**base_env(work), "HF_HUB_DISABLE_XET": "1"})
            landed(registry.host, name)
            until_landed, cpu = time.perf_counter() - t, cpu_seconds(proxy) - cpu
        finally:
            stop(proxy)
            shutil.rmtree(work / f"{name}-cache", ignore_errors=True)
    return got.wall, until_landed, cpu


def proxy_rows(work: Path, size: int, repeat: int) -> list[str]:
    os.environ["HF_TOKEN"] = TOKEN  # every client's and the proxies' upstream token
    (work / "token.txt").write_text(TOKEN + "\n")
    model = work / "model"
    model.mkdir()
    safetensors(model / "model.safetensors", size)
    (model / "config.json").write_text('{"model_type": "bench"}\n')
    ratios, scanned, plain, cpu_ratios = [], [], [], []
    with fresh_registry(work) as up_registry:
        up, up_url = start(work, f"{up_registry.host}/up", "up")
        try:
            upload(up_url, model)
            load(up_url, REPO, "main", work / "hub", {**base_env(work), "HF_HUB_DISABLE_XET": "1"})  # upstream warm
            for n in range(repeat):
                order = (True, False) if n % 2 == 0 else (False, True)
                got = {s: first_load(work, up_url, s) for s in order}
                scanned.append(got[True][0])
                plain.append(got[False][0])
                ratios.append(got[True][0] / got[False][0])
                cpu_ratios.append(got[True][2] / got[False][2])
                print(f"  run {n}: {'scan first' if order[0] else 'plain first'}; with scan {_one(got[True])}, "
                      f"without {_one(got[False])}, ratio {ratios[-1]:.3f}; load {loadavg()}", flush=True)
        finally:
            stop(up)
    return ["| first load through a fresh proxy | median (min-max) |", "|---|---|",
            f"| {size // MiB} MiB safetensors model, `--upstream-scan refuse` | {_s(scanned)} |",
            f"| the same, without | {_s(plain)} |",
            f"| with ÷ without, median of the runs' ratios | **{statistics.median(ratios):.3f}×** "
            f"({min(ratios):.3f}-{max(ratios):.3f}) |",
            f"| the proxy's CPU seconds until landed, with ÷ without, median of the runs' ratios | "
            f"**{statistics.median(cpu_ratios):.3f}×** ({min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}) |"]


def _one(got: tuple[float, float, float]) -> str:
    return f"{got[0]:.2f} s (landed {got[1]:.2f}, proxy CPU {got[2]:.2f} s)"


def _s(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB of the proxied model (default 1024)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--format-size", type=int, default=256, help="MiB per format's file (default 256)")
    parser.add_argument("--skip-proxy", action="store_true", help="the format rows only")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-scan-speed-"))
    try:
        print(f"load before {loadavg()}", flush=True)
        rows = format_rows(work, args.format_size * MiB, args.repeat)
        print("\n".join(rows), flush=True)
        if not args.skip_proxy:
            print("\n".join(proxy_rows(work, args.size * MiB, args.repeat)), flush=True)
        print(f"load after {loadavg()}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
