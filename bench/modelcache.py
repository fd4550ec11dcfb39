"""``ocibridge path`` against a registry (issue 28): what answering from the model cache costs,
and what a second version that shares most files fetches.

    .venv/bin/python -m bench.modelcache --files 1000 --repeat 5

A model of N small files (raw layers, one per file) is pushed to a fresh local registry, then:
``path`` cold (everything fetched), ``path`` warm (the cache holds it: one manifest HEAD),
and ``path --offline`` (no request), as a command and as an API call, beside ``stat`` of the
same files (the least any "is it here" check costs), the interpreter's own start-up and one
``HEAD`` by curl (what the registry itself takes to answer); then a second version with 1 %
of its files changed, fetched through a counting proxy: the bytes of blob bodies it received.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.faultproxy import FaultProxy
from tests.support.registry import RegistryProcess

FILE_BYTES = 16 * 1024


def make_model(root: Path, files: int, version: int, changed: int) -> None:
    for i in range(files):
        path = root / "shards" / f"part{i:05}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        tag = version if i < changed else 0
        path.write_bytes((f"{i}:{tag}:".encode() * FILE_BYTES)[:FILE_BYTES])
    (root / "config.json").write_text('{"model_type": "bench"}')


def cli(*args: str, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ocibridge", *args], env=env, check=True,
                          capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout.strip()


def median_of(repeat: int, run: object) -> float:
    return statistics.median(run() for _ in range(repeat))  # type: ignore[operator]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.modelcache", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-modelcache-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "OCIBRIDGE_CACHE": str(work / "cache"), "OCIBRIDGE_CACHE_DIR": str(work / "pulls")}
        with RegistryProcess(work / "registry", log_level="warn") as registry:
            proxy = FaultProxy(registry)
            try:
                changed = max(1, args.files // 100)
                for version in (1, 2):
                    make_model(work / f"v{version}", args.files, version, changed)
                    cli("push", str(work / f"v{version}"), f"{registry.host}/bench/m:v{version}", "-q",
                        "--no-auto-group", env=env)
                cold, where = cli("path", f"{proxy.host}/bench/m:v1", env=env)
                fetched_v1 = sum(r.response_bytes for r in proxy.requests_matching("GET", r"/blobs/sha256:"))
                files = [str(f) for f in Path(where).rglob("*") if f.is_file()]
                cli("path", f"{registry.host}/bench/m:v1", env=env)  # this name's record: the warm runs read it
                warm = median_of(args.repeat, lambda: cli("path", f"{registry.host}/bench/m:v1", env=env)[0])
                warm_offline = median_of(args.repeat, lambda: cli(
                    "path", "--offline", f"{registry.host}/bench/m:v1", env=env)[0])
                stat = median_of(args.repeat, lambda: _timed(["stat", "--format=%s", *files]))
                python = median_of(args.repeat, lambda: _timed([sys.executable, "-c", "pass"]))
                head = median_of(args.repeat, lambda: _timed([
                    "curl", "-sfI", "-H", "Accept: application/vnd.oci.image.manifest.v1+json",
                    f"http://{registry.host}/v2/bench/m/manifests/v1"]))
                os.environ.update(OCIBRIDGE_CACHE=env["OCIBRIDGE_CACHE"])
                import ocibridge

                api = median_of(args.repeat, lambda: _timed_call(lambda: ocibridge.path(
                    f"{registry.host}/bench/m:v1")))
                offline = median_of(args.repeat, lambda: _timed_call(lambda: ocibridge.path(
                    f"{registry.host}/bench/m:v1", offline=True)))
                proxy.clear()
                _, _ = cli("path", f"{proxy.host}/bench/m:v2", env=env)
                fetched_v2 = sum(r.response_bytes for r in proxy.requests_matching("GET", r"/blobs/sha256:"))
            finally:
                proxy.stop()
    total = args.files * FILE_BYTES
    print(f"| model | {args.files} files, {total / 2**20:.1f} MiB, {args.files + 1} raw layers |")
    print("|---|---|")
    print(f"| `path` cold (all fetched, command) | {cold:.2f} s, {fetched_v1 / 2**20:.1f} MiB of blobs |")
    print(f"| `path` warm (command, median of {args.repeat}) | {warm:.3f} s |")
    print(f"| `path --offline` warm (command, median of {args.repeat}) | {warm_offline:.3f} s |")
    print(f"| `path` warm (API call) | {api * 1000:.1f} ms |")
    print(f"| `path --offline` (API call) | {offline * 1000:.1f} ms |")
    print(f"| `stat` of the {len(files)} files (command) | {stat:.3f} s |")
    print(f"| the floor: `python -c pass` (command) | {python:.3f} s |")
    print(f"| the registry's part: one manifest `HEAD` by `curl` (command) | {head:.3f} s |")
    print(f"| second version, {changed} files changed: blob bytes fetched | {fetched_v2 / 2**10:.0f} KiB "
          f"({fetched_v2 / max(fetched_v1, 1):.1%} of the first) |")
    return 0


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def _timed_call(call: object) -> float:
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
