"""The SHA-256 rate docs/security.md quotes for the model cache's check of a reused blob (one
pass, 1 MiB reads): seconds per GiB over a 64 MiB file, the median of ``--rounds``.

    .venv/bin/python -m bench.hash_rate              # 5 rounds
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

MIB = 1 << 20


def seconds_per_gib(path: Path) -> float:
    start = time.perf_counter()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MIB):
            h.update(chunk)
    return (time.perf_counter() - start) * (1024 * MIB) / path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "blob"
        with open(path, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MIB))
        rates = [seconds_per_gib(path) for _ in range(args.rounds)]
    print(json.dumps({"sha256_seconds_per_GiB": round(statistics.median(rates), 2)}))


if __name__ == "__main__":
    main()
