"""serve's web pages at scale (issue 56): a catalog of 2,000 repositories and a model of 1,000
files, in a fresh local registry, against ``ocibridge serve`` run as a process.

    .venv/bin/python -m bench.catalog                      # 2000 repositories, 1000 files, 20 samples
    .venv/bin/python -m bench.catalog --repos 500 --files 200

The repositories are filled fast but for real: one model is pushed with ``ocibridge push`` (a
card, a license, a paramSize), then each other repository gets its blobs by cross-repository
mount (no byte moves) and the same manifest under ``latest``. The 1,000-file model is pushed
by ``ocibridge push`` (one raw layer per file). Times are wall clock per request, from the
client, after one request has warmed serve's caches (the rows of the page, the file list):
the median and the slowest of ``--samples``. Targets: first catalog page < 300 ms warm,
the 1,000-file model's page < 200 ms warm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from .registries import fresh_registry
from .serve import base_env, load, server

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def push(src: Path, ref: str, work: Path, *extra: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ocibridge", "push", str(src), ref, "-q", *extra],
                          env=base_env(work), capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])


def fill(url: str, seed: str, count: int) -> float:
    """``count`` repositories ``orgK/model-N`` holding the seed's manifest, blobs mounted."""
    with httpx.Client(base_url=url, timeout=60) as client:
        manifest = client.get(f"/v2/{seed}/manifests/latest", headers={"Accept": MANIFEST}).content
        doc = json.loads(manifest)
        digests = [doc["config"]["digest"], *(layer["digest"] for layer in doc["layers"])]

        def one(i: int) -> None:
            repo = f"bench/org{i % 40}/model-{i:05d}"
            for digest in digests:
                r = client.post(f"/v2/{repo}/blobs/uploads/", params={"mount": digest, "from": seed})
                if r.status_code != 201:
                    raise RuntimeError(f"mount {digest} into {repo}: {r.status_code}")
            r = client.put(f"/v2/{repo}/manifests/latest", content=manifest, headers={"Content-Type": MANIFEST})
            if r.status_code != 201:
                raise RuntimeError(f"manifest of {repo}: {r.status_code} {r.text[:200]}")

        t = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(count)))
        return time.perf_counter() - t


def sample(url: str, path: str, samples: int) -> tuple[float, float, float]:
    """(cold, median warm, slowest warm) milliseconds of GET ``path``."""
    with httpx.Client(base_url=url, timeout=300) as client:
        t = time.perf_counter()
        r = client.get(path)
        cold = time.perf_counter() - t
        if r.status_code != 200:
            raise RuntimeError(f"{path}: {r.status_code} {r.text[:300]}")
        warm = []
        for _ in range(samples):
            t = time.perf_counter()
            r = client.get(path)
            warm.append(time.perf_counter() - t)
            assert r.status_code == 200
    return cold * 1000, statistics.median(warm) * 1000, max(warm) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=int, default=2000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-catalog-") as tmp:
        work = Path(tmp)
        with fresh_registry(work) as registry:
            seed = work / "seed"
            seed.mkdir()
            (seed / "config.json").write_text('{"model_type": "bert"}')
            (seed / "README.md").write_text("---\nlicense: apache-2.0\n---\n# A model\n\nFor the bench.\n")
            (seed / "model.safetensors").write_bytes(b"\0" * 4096)
            push(seed, f"{registry.host}/bench/seed/model:latest", work, "--license", "apache-2.0",
                 "--param-size", "1M")
            took = fill(registry.url, "bench/seed/model", args.repos - 1)
            big = work / "big"
            (big / "shards").mkdir(parents=True)
            (big / "config.json").write_text('{"model_type": "bert"}')
            for i in range(args.files - 1):
                (big / "shards" / f"part-{i:05d}.bin").write_bytes(i.to_bytes(4, "big") * 16)
            t = time.perf_counter()
            push(big, f"{registry.host}/bench/big/model:latest", work)
            pushed = time.perf_counter() - t
            print(f"filled {args.repos} repositories in {took:.1f} s (mounts); pushed {args.files} files "
                  f"in {pushed:.1f} s; load {load()}")
            with server(work, f"{registry.host}/bench", work / "serve-cache") as s:
                rows = [("first catalog page (/)", "/", 300), ("a search (/models?search=model-01)",
                                                               "/models?search=model-01", 300),
                        (f"a model of {args.files} files", "/big/model", 200),
                        ("its tree", "/big/model/tree/main/shards", 200)]
                print("| page | cold ms | warm median ms | warm slowest ms | target |")
                print("|---|---|---|---|---|")
                for label, path, target in rows:
                    cold, median, slowest = sample(s.url, path, args.samples)
                    print(f"| {label} | {cold:.0f} | {median:.0f} | {slowest:.0f} | < {target} |")
            print(f"load {load()}")


if __name__ == "__main__":
    main()
