"""Publishing through ``ocibridge serve`` against ``ocibridge push`` (issue 55), on a fresh local
registry, over Xet (hf_xet, huggingface_hub's default where it is installed) and over LFS
(``HF_HUB_DISABLE_XET=1``).

    .venv/bin/python -m bench.publish                      # 1024 MiB, --repeat 2, Xet and LFS
    .venv/bin/python -m bench.publish --sizes 1024 4096 --repeat 1 --protocols xet
    .venv/bin/python -m bench.publish --dedupe 256          # one tensor of ten changed, over Xet

The model is one safetensors-like file of random bytes and a config.json. Each sample is a
process of its own, as a user runs it: ``HfApi().upload_folder`` into a new repository through
a serve started afresh (empty staging and model cache; over Xet, hf_xet's own cache empty too,
so nothing is deduplicated against an earlier sample), against ``python -m ocibridge push DIR
REF`` into a new repository (target ≤ 1.3×). serve's peak RSS (``VmHWM``) after the upload is
shown at each size (flat: bytes move a piece at a time).

``--dedupe SIZE`` (only changed chunks travel up): a safetensors file of ten tensors is uploaded
over Xet (hf_xet, as huggingface_hub runs by default), then again with one tensor drawn anew,
each time from a fresh HF_HOME (the fine-tune's machine has no local shard cache); the row is
the bytes serve received in xorb POSTs the second time (its log line per xorb) as a fraction of
the file (target ≤ 20 %), and whether the registry's layer is then the new file's SHA-256.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from .registries import fresh_registry
from .serve import MiB, base_env, free_port, load, timed, wait_healthy

UPLOAD = ("import sys; from huggingface_hub import HfApi; api = HfApi(); api.create_repo(sys.argv[1]); "
          "api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2])")


@contextlib.contextmanager
def serving(work: Path, source: str, log: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """serve with a write token, its caches (staging included) empty (its log into ``log``)."""
    cache = work / "serve-cache"
    shutil.rmtree(cache, ignore_errors=True)
    (work / "tokens.txt").write_text("bench-token write\n")
    port = free_port()
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(cache), "OCIBRIDGE_CACHE_DIR": str(cache) + "-dir"}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", source, "--listen", f"127.0.0.1:{port}",
                             "--no-access-log", "--token-file", str(work / "tokens.txt")],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE if log is None else log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log)
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


TENSORS = 10
XET_UPLOAD = ("import sys; from huggingface_hub import HfApi; api = HfApi(); "
              "api.create_repo(sys.argv[1], exist_ok=True); "
              "api.upload_file(path_or_fileobj=sys.argv[2], path_in_repo='model.safetensors', repo_id=sys.argv[1])")


def ten_tensors(path: Path, size_mib: int, fresh: int | None = None) -> str:
    """A safetensors file of ten U8 tensors of random bytes (seeded: the same file twice), tensor
    ``fresh`` drawn anew; its SHA-256."""
    import random

    each = size_mib * MiB // TENSORS
    header = json.dumps({f"layer{i}.weight": {"dtype": "U8", "shape": [each],
                                              "data_offsets": [i * each, (i + 1) * each]}
                         for i in range(TENSORS)}).encode()
    header += b" " * (-len(header) % 8)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for piece in (len(header).to_bytes(8, "little"), header):
            f.write(piece)
            digest.update(piece)
        for i in range(TENSORS):
            rng = random.Random(1000 + i if i != fresh else 2000 + i)
            for _ in range(each // MiB):
                piece = rng.randbytes(MiB)
                f.write(piece)
                digest.update(piece)
            piece = rng.randbytes(each % MiB)
            f.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def xorb_bytes(log: str) -> int:
    """What serve says it received in xorb POSTs (its log line per xorb)."""
    return sum(int(n) for n in re.findall(r"xorb (?:received|held already), (\d+) bytes", log))


def run_dedupe(size_mib: int, work: Path) -> list[str]:
    first, second = work / "v1.safetensors", work / "v2.safetensors"
    ten_tensors(first, size_mib)
    new_sha = ten_tensors(second, size_mib, fresh=4)
    log = work / "serve.log"
    with fresh_registry(work) as reg, serving(work, f"{reg.host}/bench", log) as (url, proc):
        took = []
        for n, path in enumerate((first, second)):
            mark = len(log.read_text())
            env = {**base_env(work), "HF_ENDPOINT": url, "HF_TOKEN": "bench-token", "HF_HOME": str(work / f"hf{n}")}
            env.pop("HF_HUB_DISABLE_XET", None)
            took.append(timed([sys.executable, "-c", XET_UPLOAD, "acme/ft", str(path)], env))
            sent = xorb_bytes(log.read_text()[mark:])
        manifest = httpx.get(f"http://{reg.host}/v2/bench/acme/ft/manifests/latest",
                             headers={"Accept": "application/vnd.oci.image.manifest.v1+json"}).json()
        held = f"sha256:{new_sha}" in [layer["digest"] for layer in manifest["layers"]]
        rss = peak_rss_mib(proc.pid)
    size = second.stat().st_size
    return [f"| {size_mib} MiB, one tensor of ten changed (Xet) | second upload sent {sent / MiB:.1f} MiB = "
            f"{100 * sent / size:.1f} % of the file | upload {took[0]:.1f} s, then {took[1]:.1f} s | registry layer "
            f"is the new SHA-256: {'yes' if held else 'NO'} | serve peak RSS {rss:.0f} MiB | load {load()} |"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1024], help="weights sizes in MiB")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--dedupe", type=int, metavar="SIZE", help="the one-tensor-changed row at SIZE MiB, only")
    p.add_argument("--protocols", nargs="+", choices=["xet", "lfs"], default=["xet", "lfs"],
                   help="how huggingface_hub uploads: hf_xet (its default) or LFS (HF_HUB_DISABLE_XET=1)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        work = Path(tmp)
        os.environ["OCIBRIDGE_CACHE"] = str(work / "own-cache")
        if args.dedupe:
            print(*run_dedupe(args.dedupe, work), flush=True)
            return
        for size in args.sizes:
            for row in run(size, work, args.repeat, args.protocols):
                print(row, flush=True)


if __name__ == "__main__":
    main()
