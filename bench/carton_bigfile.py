"""Benchmark: a carton with one big zstd model file → ModelPack in an OCI layout, and back.

Measures wall time and peak RSS (ru_maxrss of a fresh child process per step) of
  * baseline: decompress the zstd entry and sha256 it (the least any converter must do),
  * push:     read_carton → build → copy into a layout (each byte decompressed once and hashed
              once, against MANIFEST, on a thread of its own while the layout store writes;
              the zip CRC-32 is skipped since the sha256 is checked),
  * pull:     export_carton from the layout back to a .carton (zstd level 3, as Carton writes).

Usage: python bench/carton_bigfile.py [SIZE_MIB] [WORKDIR]   (default 1024 MiB, a temp dir)
The model file is pseudo-random with runs of zeros, so zstd compresses it about 2:1.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEP = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
step, work = sys.argv[2], sys.argv[3]
from pathlib import Path
work = Path(work)
t = time.perf_counter()
if step == "baseline":
    from ocibridge.kinds.carton.zipread import EntryReader, scan_entries
    entry = next(e for e in scan_entries(work / "big.carton") if e.path == "model/weights.bin")
    h = hashlib.sha256()
    with EntryReader(work / "big.carton", entry, sha256_checked_by_caller=True) as r:  # no CRC
        while data := r.read(1 << 20):
            h.update(data)
elif step == "push":
    from ocibridge.transfer.copy import copy
    from ocibridge.kinds.carton import read_carton
    from ocibridge.model.builder import build
    from ocibridge.stores.layout import LayoutStore
    copy(build(read_carton(work / "big.carton")), "artifact", LayoutStore(work / "layout", create=True), "v1")
elif step == "pull":
    from ocibridge.kinds.carton import export_carton
    from ocibridge.stores.layout import LayoutStore
    store = LayoutStore(work / "layout")
    export_carton(store, store.resolve("v1"), work / "back.carton")
elapsed = time.perf_counter() - t
print(json.dumps({"step": step, "seconds": round(elapsed, 2),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def make_big_carton(path: Path, size: int) -> str:
    """Written with the project's own streaming zip writer, exactly as Carton lays one out."""
    from ocibridge.kinds.carton import format_manifest
    from ocibridge.kinds.carton.zipwrite import ZipWriter

    toml = b'spec_version = 1\nmodel_name = "big"\n\n[runner]\nrunner_name = "torchscript"\n' \
           b'required_framework_version = ">=2.0.0"\nrunner_compat_version = 1\n'
    index = b"tensor = []\n"
    h = hashlib.sha256()

    def chunks():
        written = 0
        while written < size:
            block = os.urandom(1 << 19) + bytes(1 << 19)  # half noise, half zeros: ~2:1 under zstd
            piece = block[: min(len(block), size - written)]
            h.update(piece)
            written += len(piece)
            yield piece

    with open(path, "wb") as out:
        zw = ZipWriter(out)
        zw.add("carton.toml", iter([toml]))
        zw.add("tensor_data/index.toml", iter([index]))
        zw.add("model/weights.bin", chunks(), size_hint=size)
        manifest = format_manifest({"carton.toml": hashlib.sha256(toml).hexdigest(),
                                    "model/weights.bin": h.hexdigest(),
                                    "tensor_data/index.toml": hashlib.sha256(index).hexdigest()})
        zw.add("MANIFEST", iter([manifest]), method=0)
        zw.close()
    return hashlib.sha256(manifest).hexdigest()


def run_step(step: str, work: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", STEP, str(ROOT), step, str(work)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    size = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 1 << 30
    work = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="carton-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        model_hash = make_big_carton(work / "big.carton", size)
        print(f"carton: {size >> 20} MiB model file, {(work / 'big.carton').stat().st_size >> 20} MiB on disk, "
              f"made in {time.perf_counter() - t:.1f} s; model hash {model_hash}")
        results = [run_step(step, work) for step in ("baseline", "push", "pull")]
        for r in results:
            print(f"{r['step']:>9}: {r['seconds']:7.2f} s   peak RSS {r['peak_rss_mib']:7.1f} MiB")
        from ocibridge.kinds.carton import read_carton

        back = read_carton(work / "back.carton", eager_verify_bytes=0)
        assert back.annotations["io.carton.model.hash"] == model_hash, "model hash changed"
        print("round trip: same model hash")
        print(json.dumps({"size_mib": size >> 20, "results": results, "self_maxrss_mib":
                          round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    finally:
        if len(sys.argv) <= 2:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
