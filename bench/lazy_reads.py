"""Lazy, verified reads against a full pull (issue 29), on a fresh local registry.

    .venv/bin/python -m bench.lazy_reads                  # 1 GiB and 4 GiB safetensors files
    .venv/bin/python -m bench.lazy_reads --sizes 256      # MiB; a quick run

Rows: time to the first tensor (open_tensors + one small tensor) against ``pull`` of the model,
with the bytes each moved; and a whole-file sequential read through the ocibridge:// filesystem
against ``pull`` (target ≤ 1.3×).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
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


def run(size_mib: int, work: Path) -> list[str]:
    import fsspec

    from ocibridge.api.lazy_ops import open_tensors, push_with_chunks
    from ocibridge.api.model_ops import pull

    rows = []
    with fresh_registry(work) as reg:
        src = work / f"m{size_mib}"
        write_model(src, size_mib * MiB)
        ref = f"{reg.host}/bench/lazy{size_mib}:v1"
        push_with_chunks(str(src), ref)

        t = time.perf_counter()
        tensors = open_tensors(ref, "model.safetensors")
        tensors.get_bytes("b.small")
        first = time.perf_counter() - t
        moved = tensors.blob.bytes_fetched
        tensors.blob.close()

        out = work / f"pulled{size_mib}"
        t = time.perf_counter()
        pull(ref, str(out))
        full = time.perf_counter() - t
        shutil.rmtree(out)

        def sequential(cache: bool) -> float:
            fs = fsspec.filesystem("ocibridge", skip_instance_cache=True, cache=cache)
            t = time.perf_counter()
            with fs.open(f"{ref}/model.safetensors", "rb") as f:
                while f.read(16 * MiB):
                    pass
            took = time.perf_counter() - t
            for model in list(fs._models.values()):
                model.close()
            return took

        shutil.rmtree(work / "cache" / "chunks", ignore_errors=True)
        seq_off = sequential(cache=False)
        seq = sequential(cache=True)  # cold: every chunk fetched, and written to the model cache
        warm = sequential(cache=True)  # every chunk from the model cache
        shutil.rmtree(work / "cache" / "chunks", ignore_errors=True)
        rows.append(f"| {size_mib} MiB | first tensor | {first:.2f} s ({moved / MiB:.1f} MiB moved) "
                    f"| pull {full:.2f} s | {first / full:.3f}× |")
        rows.append(f"| {size_mib} MiB | sequential read via fsspec, no block cache | {seq_off:.2f} s "
                    f"| pull {full:.2f} s | {seq_off / full:.2f}× |")
        rows.append(f"| {size_mib} MiB | sequential read via fsspec, block cache cold | {seq:.2f} s "
                    f"| pull {full:.2f} s | {seq / full:.2f}× |")
        rows.append(f"| {size_mib} MiB | sequential read via fsspec, block cache warm | {warm:.2f} s "
                    f"| pull {full:.2f} s | {warm / full:.2f}× |")
        shutil.rmtree(src)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lazy_reads", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=int, default=[1024, 4096], help="file sizes in MiB")
    args = p.parse_args(argv)
    print("| file | measure | ocibridge lazy | against | ratio |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="lazybench-") as tmp:
        os.environ["OCIBRIDGE_CACHE"] = str(Path(tmp) / "cache")  # never the user's model cache
        for size in args.sizes:
            for row in run(size, Path(tmp)):
                print(row, flush=True)
    print("load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
