"""Publishing through ``ocibridge serve`` against ``ocibridge push`` (issue 55), on a fresh local
registry, over Xet (hf_xet, huggingface_hub's default where it is installed) and over LFS
(``HF_HUB_DISABLE_XET=1``).

    .venv/bin/python -m bench.publish                      # 1024 MiB, --repeat 2, Xet and LFS
    .venv/bin/python -m bench.publish --sizes 1024 4096 --repeat 1 --protocols xet

The model is one safetensors-like file of random bytes and a config.json. Each sample is a
process of its own, as a user runs it: ``HfApi().upload_folder`` into a new repository through
a serve started afresh (empty staging and model cache; over Xet, hf_xet's own cache empty too,
so nothing is deduplicated against an earlier sample), against ``python -m ocibridge push DIR
REF`` into a new repository (target ≤ 1.3×). serve's peak RSS (``VmHWM``) after the upload is
shown at each size (flat: bytes move a piece at a time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from .registries import fresh_registry
from .serve import MiB, base_env, free_port, load, timed

UPLOAD = ("import sys; from huggingface_hub import HfApi; api = HfApi(); api.create_repo(sys.argv[1]); "
          "api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2])")


@contextlib.contextmanager
def serving(work: Path, source: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """serve with a write token, its caches (staging included) empty."""
    cache = work / "serve-cache"
    shutil.rmtree(cache, ignore_errors=True)
    (work / "tokens.txt").write_text("bench-token write\n")
    port = free_port()
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(cache), "OCIBRIDGE_CACHE_DIR": str(cache) + "-dir"}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", source, "--listen", f"127.0.0.1:{port}",
                             "--no-access-log", "--token-file", str(work / "tokens.txt")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(proc.communicate()[1].decode())
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def make_model(root: Path, size_mib: int) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    header = json.dumps({"w": {"dtype": "U8", "shape": [size_mib * MiB], "data_offsets": [0, size_mib * MiB]}})
    data = header.encode() + b" " * (-len(header) % 8)
    with open(root / "model.safetensors", "wb") as f:
        f.write(len(data).to_bytes(8, "little") + data)
        for _ in range(size_mib):
            f.write(os.urandom(MiB))
    return root


def run(size_mib: int, work: Path, repeat: int, protocols: list[str]) -> list[str]:
    model = make_model(work / f"m{size_mib}", size_mib)
    push_s: list[float] = []
    publish_s: dict[str, list[float]] = {p: [] for p in protocols}
    rss: dict[str, list[float]] = {p: [] for p in protocols}
    with fresh_registry(work) as reg:
        for n in range(repeat):
            env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / f"push-cache{n}")}
            push_s.append(timed([sys.executable, "-m", "ocibridge", "push", str(model),
                                 f"{reg.host}/bench/push{size_mib}-{n}:latest", "-q"], env))
            for protocol in protocols:
                home = work / f"hf-home-{protocol}-{n}"  # hf_xet's cache in it: nothing known from before
                with serving(work, f"{reg.host}/bench") as (url, proc):
                    env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token", "HF_HOME": str(home)}
                    if protocol == "lfs":
                        env["HF_HUB_DISABLE_XET"] = "1"
                    publish_s[protocol].append(timed([sys.executable, "-c", UPLOAD,
                                                      f"acme/{protocol}{size_mib}-{n}", str(model)], env))
                    rss[protocol].append(peak_rss_mib(proc.pid))
                shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(model)
    push_m = statistics.median(push_s)
    rows = []
    for protocol in protocols:
        pub_m = statistics.median(publish_s[protocol])
        shown = ", ".join(f"{s:.1f}" for s in publish_s[protocol]), ", ".join(f"{s:.1f}" for s in push_s)
        label = "LFS" if protocol == "lfs" else "Xet"
        rows.append(f"| {size_mib} MiB | upload_folder through serve ({label}) "
                    f"{pub_m:.1f} s [{shown[0]}] | push {push_m:.1f} s [{shown[1]}] | {pub_m / push_m:.2f}× | "
                    f"serve peak RSS {max(rss[protocol]):.0f} MiB | load {load()} |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1024], help="weights sizes in MiB")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--protocols", nargs="+", choices=["xet", "lfs"], default=["xet", "lfs"],
                   help="how huggingface_hub uploads: hf_xet (its default) or LFS (HF_HUB_DISABLE_XET=1)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        work = Path(tmp)
        os.environ["OCIBRIDGE_CACHE"] = str(work / "own-cache")
        for size in args.sizes:
            for row in run(size, work, args.repeat, args.protocols):
                print(row, flush=True)


if __name__ == "__main__":
    main()
