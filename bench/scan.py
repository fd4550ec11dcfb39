"""What scanning costs, per format (docs/benchmarks.md, "Scanning").

    .venv/bin/python -m bench.scan                 # 1 GiB files
    .venv/bin/python -m bench.scan --size 256      # MiB; a quick run

Local rows: ``scan_directory`` of one file of each format (safetensors, GGUF, NumPy .npy, a
PyTorch zip checkpoint, a raw pickle), the median of ``--repeat`` runs and the bytes the scanner
read. Registry row: the 1 GiB safetensors model pushed to a fresh registry (push binds a chunk
table), then ``scan REF`` (nothing attached) against ``pull`` of the same model into a directory
(what a first load moves), alternated ``--repeat`` times, medians, with the bytes each moved.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from .registries import fresh_registry

MiB = 1024 * 1024


class CountingFile:
    """A file read by ranges, counting the bytes asked for."""

    def __init__(self, path: Path):
        from ocibridge.scanning.content import LocalFile

        self.inner = LocalFile(path)
        self.size = self.inner.size
        self.read_bytes = 0

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        data = self.inner.read(start, end)
        self.read_bytes += len(data)
        return data

    def close(self) -> None:
        self.inner.close()


def safetensors(path: Path, size: int) -> None:
    n = (size - 4096) // 4
    header = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    header += b" " * (-len(header) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        _fill(f, 4 * n)


def gguf(path: Path, size: int) -> None:
    n = (size - 4096) // 4
    name = b"w"
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)  # version 3, one tensor, no key/value
    head += struct.pack("<Q", len(name)) + name + struct.pack("<I", 1) + struct.pack("<Q", n)
    head += struct.pack("<IQ", 0, 0)  # F32, offset 0
    head += b"\0" * (-len(head) % 32)
    with path.open("wb") as f:
        f.write(head)
        _fill(f, 4 * n)


def npy(path: Path, size: int) -> None:
    import numpy as np

    np.save(path, np.zeros((size - 4096) // 4, dtype=np.float32))


def torch_zip(path: Path, size: int) -> None:
    import torch

    torch.save({"w": torch.zeros((size - 4096) // 4, dtype=torch.float32)}, path)


def raw_pickle(path: Path, size: int) -> None:
    """A protocol 5 pickle holding the bytes in-band (what a legacy checkpoint or a joblib dump is)."""
    with path.open("wb") as f:
        pickle.dump({"w": bytes(size - 4096)}, f, protocol=5)


FORMATS = {"model.safetensors": safetensors, "model.gguf": gguf, "array.npy": npy, "pytorch_model.bin": torch_zip,
           "model.pkl": raw_pickle}


def _fill(f: object, n: int) -> None:
    piece = os.urandom(MiB)
    while n > 0:
        f.write(piece[: min(n, MiB)])  # type: ignore[attr-defined]
        n -= MiB


def local_rows(work: Path, size: int, repeat: int) -> list[str]:
    from ocibridge.scanning.formats import scan_content

    rows = ["| file | size | scan (median, min-max) | bytes read by the scanner | findings |", "|---|---|---|---|---|"]
    for name, make in FORMATS.items():
        path = work / name
        make(path, size)
        times, read, found = [], 0, []
        for _ in range(repeat):
            content = CountingFile(path)
            start = time.perf_counter()
            kind, found = scan_content(name, content)
            times.append(time.perf_counter() - start)
            read = content.read_bytes
            content.close()
        rows.append(f"| {name} ({kind}) | {path.stat().st_size / MiB:.0f} MiB | {_ms(times)} | "
                    f"{read:,} | {len([f for f in found if f.flags])} flagging |")
        path.unlink()
    return rows


def registry_rows(work: Path, size: int, repeat: int) -> list[str]:
    from ocibridge.api.model_ops import pull, push
    from ocibridge.api.scan_ops import scan

    model = work / "model"
    model.mkdir()
    safetensors(model / "model.safetensors", size)
    (model / "config.json").write_text('{"model_type": "bench"}\n')
    with fresh_registry(work) as registry:
        ref = f"{registry.host}/bench/scan:v1"
        push(str(model), ref)
        pulls, scans = [], []
        for i in range(repeat):
            out = work / f"out-{i}"
            start = time.perf_counter()
            pull(ref, str(out))
            pulls.append(time.perf_counter() - start)
            shutil.rmtree(out)
            start = time.perf_counter()
            result = scan(ref, attach=False)
            scans.append(time.perf_counter() - start)
            assert result.report.verdict == "clean"
        ratio = statistics.median(scans) / statistics.median(pulls)
    return ["| on the registry | time (median, min-max) |", "|---|---|",
            f"| pull {size // MiB} MiB safetensors model into a directory | {_ms(pulls)} |",
            f"| scan REF (header check by range, nothing attached) | {_ms(scans)} |",
            f"| scan / pull | **{ratio:.3f}×** |"]


def _ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:.1f} ms ({min(times) * 1000:.1f}-{max(times) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB per file (default 1024)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        work = Path(tmp)
        local = local_rows(work, args.size * MiB, args.repeat)
        remote = registry_rows(work, args.size * MiB, args.repeat)
    print("\n".join([*local, "", *remote]))


if __name__ == "__main__":
    main()
