"""serve's CPU for one commit (issue 60): a commit of a large file through ``ocibridge serve``
with ``OCIBRIDGE_DIGEST_CACHE=0`` builds its artifact from what the upload proved, so it reads
the staged file at most once; its CPU time (target: ≤ 1.2× one SHA-256 over the file).

    .venv/bin/python -m bench.commit_cpu                  # 256 MiB, --repeat 3
    .venv/bin/python -m bench.commit_cpu --size 1024 --repeat 2
    .venv/bin/python -m bench.commit_cpu --layout                 # serve over oci:DIR, no relay

(run from a checkout: serve is started from it; for the figure before a change, copy this file
into an export of the older commit, ``git archive``, and run it there)

The file (random bytes, a safetensors header) and a config.json are uploaded over LFS (batch,
then one PUT each, as huggingface_hub with ``HF_HUB_DISABLE_XET=1`` does; the large one goes on
to the registry as it arrives: the relay) into a serve over a fresh local registry (``--layout``:
an OCI layout, where nothing is relayed, so the commit's copy reads the file once); then the
commit is POSTed and serve's CPU seconds (user + system, ``/proc/PID/stat``) are read before
and after it: nothing else runs in serve meanwhile. The reference is this process's CPU for one
SHA-256 over the same file, read from the page cache in 1 MiB pieces (best of three). Each
sample is a new file into a new repository (nothing known from the one before); medians are
shown with every sample and ``/proc/loadavg``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from .publish import serving
from .registries import fresh_registry
from .serve import MiB, cpu_of, load

TOKEN = {"authorization": "Bearer bench-token"}


def weights(path: Path, size_mib: int) -> str:
    """A safetensors-like file of ``size_mib`` MiB of random bytes; its SHA-256."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [size_mib * MiB], "data_offsets": [0, size_mib * MiB]}})
    data = header.encode() + b" " * (-len(header) % 8)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for piece in (len(data).to_bytes(8, "little") + data, *(os.urandom(MiB) for _ in range(size_mib))):
            f.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def sha256_cpu(path: Path) -> float:
    """CPU seconds of one SHA-256 over ``path`` (read in 1 MiB pieces), best of three."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while piece := f.read(MiB):
                digest.update(piece)
        best = min(best, time.process_time() - start)
    return best


def upload(url: str, repo: str, files: dict[str, Path]) -> list[dict[str, object]]:
    """Each file PUT over LFS into serve's staging; the commit's lfsFile lines."""
    lines: list[dict[str, object]] = []
    for name, path in files.items():
        data = path.read_bytes()
        oid, size = hashlib.sha256(data).hexdigest(), len(data)
        batch = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": size}]}
        answer = httpx.post(f"{url}/{repo}.git/info/lfs/objects/batch", json=batch, headers=TOKEN).json()
        actions = answer["objects"][0].get("actions")  # none: serve holds it (mounted at the commit)
        if actions is not None:
            httpx.put(actions["upload"]["href"], content=data, timeout=600).raise_for_status()
        lines.append({"key": "lfsFile", "value": {"path": name, "algo": "sha256", "oid": oid, "size": size}})
    return lines


def commit_cpu(url: str, pid: int, repo: str, lines: list[dict[str, object]]) -> tuple[float, float]:
    """serve's CPU seconds and the wall seconds of the commit."""
    body = b"".join(json.dumps(line).encode() + b"\n"
                    for line in ({"key": "header", "value": {"summary": "bench"}}, *lines))
    before, start = cpu_of(pid), time.perf_counter()
    answer = httpx.post(f"{url}/api/models/{repo}/commit/main", content=body, timeout=600,
                        headers={**TOKEN, "content-type": "application/x-ndjson"})
    wall, used = time.perf_counter() - start, cpu_of(pid) - before
    answer.raise_for_status()
    return used, wall


@contextlib.contextmanager
def source(work: Path, layout: bool) -> Iterator[str]:
    """Where serve publishes: a fresh registry, or a fresh OCI layout."""
    if not layout:
        with fresh_registry(work) as reg:
            yield f"{reg.host}/bench"
        return
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(work / "layout", create=True).close()
    yield f"oci:{work / 'layout'}"


def run(size_mib: int, repeat: int, work: Path, layout: bool) -> str:
    config = work / "config.json"
    cpu: list[float] = []
    wall: list[float] = []
    hashed: list[float] = []
    with source(work, layout) as where, serving(work, where) as (url, proc):
        for n in range(repeat):
            big = work / "model.safetensors"
            weights(big, size_mib)  # new files each time: no blob of an earlier sample helps
            config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "sample": n}))
            repo = f"acme/commit{n}"
            httpx.post(f"{url}/api/repos/create", json={"name": repo}, headers=TOKEN).raise_for_status()
            lines = upload(url, repo, {"config.json": config, "model.safetensors": big})
            used, took = commit_cpu(url, proc.pid, repo, lines)
            cpu.append(used)
            wall.append(took)
            hashed.append(sha256_cpu(big))
    ratio = statistics.median(cpu) / statistics.median(hashed)
    samples = ", ".join(f"{c:.2f}" for c in cpu)
    into = "an OCI layout" if layout else "a registry"
    return (f"| commit of {size_mib} MiB through serve into {into} (LFS, OCIBRIDGE_DIGEST_CACHE=0) | serve CPU "
            f"{statistics.median(cpu):.2f} s [{samples}], wall {statistics.median(wall):.2f} s | one SHA-256 "
            f"{statistics.median(hashed):.2f} s | {ratio:.2f}× | load {load()} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=256, help="the large file's size in MiB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--layout", action="store_true", help="serve over an OCI layout instead of a registry")
    args = p.parse_args()
    os.environ["OCIBRIDGE_DIGEST_CACHE"] = "0"  # serve inherits it (bench.serve.base_env)
    with tempfile.TemporaryDirectory(prefix="bench-commit-") as tmp:
        os.environ["OCIBRIDGE_CACHE"] = str(Path(tmp) / "own-cache")
        print(run(args.size, args.repeat, Path(tmp), args.layout), flush=True)


if __name__ == "__main__":
    main()
