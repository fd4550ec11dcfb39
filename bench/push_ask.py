"""Ask before sending (issue 32): what the two ways of asking the registry about a file of
unknown digest cost, on one large file against a real registry.

1. hash first, then HEAD, then send (the file read twice, the second read from page cache):
   ``ocibridge push`` of this checkout.
2. hash beside the upload, cancel when the digest turns out present: the upload of the old
   push (hash while sending, ``RegistryStore.ingest_blob``) with a second thread hashing the
   same file at once; what it costs on a first push is that upload's time, and what it sends of
   a blob the registry holds is what had gone out when the hash was done.

Usage: ``python -m bench.push_ask [SIZE_MIB] [REPEAT] [BASELINE_CHECKOUT]``; with a baseline
checkout (the code before issue 32, e.g. /work/main), its ``ocibridge push`` is timed too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.registries import fresh_registry

MiB = 1024 * 1024


def _push(model: Path, ref: str, env: dict[str, str], checkout: Path | None = None) -> tuple[float, int]:
    env = dict(env)
    if checkout is not None:  # run from it: ``-m`` puts the working directory first on the path
        env["PYTHONPATH"] = str(checkout)
    os.sync()
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(model), ref, "--json", "-q"],
                          env=env, capture_output=True, text=True, check=True,
                          cwd=checkout or Path(__file__).resolve().parent.parent)
    return time.monotonic() - start, int(json.loads(done.stdout)["bytesCopied"])


def _hash_beside_upload(path: Path, host: str, repo: str) -> tuple[float, int, float]:
    """Option 2 emulated: the streaming upload with a hash of the same file beside it; its
    time, the bytes sent when the hash finished, and the hash's time."""
    from ocibridge.stores.registry import open_repository

    with open_repository(host=host, repository=repo, plain_http=True) as store:
        sent_at_hash: list[int] = []
        hashed: list[float] = []

        def hash_ahead() -> None:
            t0 = time.monotonic()
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while data := f.read(MiB):
                    h.update(data)
            hashed.append(time.monotonic() - t0)
            sent_at_hash.append(store.client.stats.bytes_uploaded)

        os.sync()
        start = time.monotonic()
        hasher = threading.Thread(target=hash_ahead)
        hasher.start()
        with open(path, "rb") as f:
            store.ingest_blob(f, reopen=lambda: open(path, "rb"), source_path=path)  # noqa: SIM115 - the upload closes what it reopens
        hasher.join()
        return time.monotonic() - start, sent_at_hash[0], hashed[0]


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    baseline = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    work = Path(tempfile.mkdtemp(prefix="push-ask-"))
    env = {**os.environ, "OCIBRIDGE_DIGEST_CACHE": "0", "OCIBRIDGE_CACHE_DIR": str(work / "cache")}
    model = work / "src" / "model"
    model.mkdir(parents=True)
    with open(model / "weights.bin", "wb") as f:
        for _ in range(size):
            f.write(os.urandom(MiB))
    rows: dict[str, list[tuple[float, int]]] = {}
    try:
        for i in range(repeat):
            with fresh_registry(work) as reg:
                rows.setdefault("1: hash, HEAD, send (first push)", []).append(
                    _push(model, f"{reg.host}/a/m:v1", env))
                copy = work / f"copy{i}" / "model"
                shutil.copytree(model, copy)
                rows.setdefault("1: fresh copy (blob present)", []).append(
                    _push(copy, f"{reg.host}/a/m:v2", env))
                shutil.rmtree(copy.parent)
                t, sent, hash_s = _hash_beside_upload(model / "weights.bin", reg.host, "b/m")
                rows.setdefault("2: upload + hash beside it (first push)", []).append((t, size * MiB))
                rows.setdefault("2: fresh copy: sent before the hash was done", []).append((hash_s, sent))
                if baseline is not None:
                    rows.setdefault("before issue 32: ingest unasked (first push)", []).append(
                        _push(model, f"{reg.host}/c/m:v1", env, baseline))
                    copy = work / f"copyb{i}" / "model"
                    shutil.copytree(model, copy)
                    rows.setdefault("before issue 32: fresh copy", []).append(
                        _push(copy, f"{reg.host}/c/m:v2", env, baseline))
                    shutil.rmtree(copy.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"| {size} MiB, {repeat} runs | median s | min–max s | bytes sent (median) |")
    print("|---|---|---|---|")
    for name, samples in rows.items():
        times = [t for t, _ in samples]
        sent = statistics.median(b for _, b in samples)
        print(f"| {name} | {statistics.median(times):.2f} | {min(times):.2f}–{max(times):.2f} | "
              f"{sent / MiB:.0f} MiB |")


if __name__ == "__main__":
    main()
