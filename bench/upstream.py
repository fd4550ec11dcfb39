"""``ocibridge serve --upstream`` (issue 87): a model's first load through a proxy that lacks it,
against the same client's load straight from the upstream; a second load through the proxy against
the same. On a fresh local registry: the upstream is an ``ocibridge serve`` over ``REG/up`` holding
the model (uploaded with huggingface_hub), each proxy a fresh ``ocibridge serve REG/pN --upstream``.

    .venv/bin/python -m bench.upstream --size 256 --repeat 5 --clients 8

Every client is a process of its own (``snapshot_download``, ``HF_HUB_DISABLE_XET=1``, an empty Hub
cache). Direct and proxied loads alternate ``--repeat`` times; medians with every sample, the
proxy's CPU seconds for each load (the first's until its commit landed in the registry: the second
load starts then), and ``/proc/loadavg``. ``--against DIR``: each run also
loads through a proxy running the ocibridge checkout at DIR (a baseline in the same runs).
``--clients N``: N clients at once through one fresh proxy; the bytes the proxy
received from the upstream (its audit line's ``bytes_received``) against the model's size say
whether each file was sent once."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.registries import fresh_registry
from bench.serve import REPO, MiB, base_env, free_port, many_at_once, snapshot_once, wait_healthy, write_model

TOKEN = "bench-token"


def start(work: Path, source: str, name: str, *flags: str,
          code: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``ocibridge serve`` over ``source`` (``code``: the ocibridge checkout it runs, by default this one)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (work / f"{name}-tokens.txt").write_text(f"{TOKEN} write\n")
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(work / f"{name}-cache"), "HF_HUB_DISABLE_XET": "1",
           **({"PYTHONPATH": str(code)} if code is not None else {})}
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", source, "--plain-http", "--listen",
                             f"127.0.0.1:{port}", "--no-access-log", "--token-file", str(work / f"{name}-tokens.txt"),
                             *flags], env=env, cwd=code,  # (python -m looks in the working folder first)
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_healthy(proc, url)
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.communicate(timeout=60)


def cpu_seconds(proc: subprocess.Popen[bytes]) -> float:
    """The CPU time (user + system) ``proc`` has used so far."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def landed(registry: str, name: str, timeout: float = 300) -> None:
    """Until the proxy's prefix holds the fetched commit (its upstream tag) and main names it (its
    default tag, ``latest``, moved just after the commit landed: before it, a read of main is
    still the fetch's)."""
    import time

    import httpx

    until = time.monotonic() + timeout
    while True:
        answer = httpx.get(f"http://{registry}/v2/{name}/{REPO}/tags/list")
        tags = (answer.json().get("tags") or []) if answer.status_code == 200 else []
        if "latest" in tags and any(t.startswith("ocibridge-upstream-") for t in tags):
            return
        if time.monotonic() > until:
            raise RuntimeError(f"{name}: the commit never landed")
        time.sleep(0.05)


@dataclass
class Loads:
    """One proxy's two loads (s) and the CPU (s) it spent on each: the first's until the commit landed."""

    first: float
    second: float
    first_cpu: float
    second_cpu: float


def settle(flush: bool) -> None:
    """With ``--flush``: every dirty page written back before a timed load (``sync``), so that no
    load pays for the writeback of what the step before it wrote (the ingest lands the model in
    the Hub cache and the registry just before the second load: 2 GiB for a 1 GiB model)."""
    if flush:
        os.sync()


def proxied_loads(work: Path, registry: str, up_url: str, name: str, code: Path | None,
                  flush: bool = False) -> Loads:
    """A fresh proxy's first load; once its commit landed in the registry, its second."""
    proxy, url = start(work, f"{registry}/{name}", name, "--upstream", up_url,
                       "--upstream-token-file", str(work / "token.txt"), code=code)
    try:
        settle(flush)
        started = cpu_seconds(proxy)
        first = snapshot_once(url, work, "main", plain=True)
        landed(registry, name)
        settle(flush)
        between = cpu_seconds(proxy)
        second = snapshot_once(url, work, "main", plain=True)
        return Loads(first, second, between - started, cpu_seconds(proxy) - between)
    finally:
        stop(proxy)
        shutil.rmtree(work / f"{name}-cache", ignore_errors=True)


def row(label: str, direct: list[float], loads: list[Loads]) -> str:
    first, second = [x.first for x in loads], [x.second for x in loads]
    cpu1, cpu2 = [round(x.first_cpu, 2) for x in loads], [round(x.second_cpu, 2) for x in loads]
    d, f, s, c1, c2 = (statistics.median(x) for x in (direct, first, second, cpu1, cpu2))
    return (f"{label}: direct {d:.2f} s, first through the proxy {f:.2f} s ({f / d:.2f}x), second (once the "
            f"commit landed) {s:.2f} s ({s / d:.2f}x of direct from the upstream, which holds it); the proxy's "
            f"CPU: first load until landed {c1:.2f} s, second load {c2:.2f} s; samples direct {direct}, "
            f"first {first}, second {second}, CPU first {cpu1}, second {cpu2}")


def upload(url: str, model: Path) -> None:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_folder(repo_id=REPO, folder_path=model)


def received(audit: Path) -> int:
    lines = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
    return sum(int(e.get("bytes_received", 0)) for e in lines if e.get("outcome") == "landed")


def run(size_mib: int, work: Path, repeat: int, clients: int, against: Path | None = None,
        flush: bool = False) -> list[str]:
    os.environ["HF_TOKEN"] = TOKEN  # every client's (base_env passes it on), the proxies' upstream token too
    (work / "token.txt").write_text(TOKEN + "\n")
    model = write_model(work / "model", size_mib * MiB)
    size = sum(p.stat().st_size for p in model.iterdir())
    rows: list[str] = []
    with fresh_registry(work) as registry:
        up, up_url = start(work, f"{registry.host}/up", "up")
        try:
            upload(up_url, model)
            direct: list[float] = []
            runs: dict[str, list[Loads]] = {"this": []}
            if against is not None:
                runs[str(against)] = []
            for n in range(repeat):
                settle(flush)
                direct.append(snapshot_once(up_url, work, "main", plain=True))
                for label, loads in runs.items():
                    code = None if label == "this" else Path(label)
                    loads.append(proxied_loads(work, registry.host, up_url, f"p{n}{'b' if code else ''}", code, flush))
            load = Path("/proc/loadavg").read_text().split()[:3]
            for label, loads in runs.items():
                shown = "this checkout" if label == "this" else f"--against {label}"
                rows.append(row(f"{size_mib} MiB, {repeat} alternating runs{', flushed' if flush else ''}, {shown}",
                                direct, loads)
                            + f"; load {load}")
            if clients:
                audit = work / "many-audit.jsonl"
                proxy, url = start(work, f"{registry.host}/many", "many", "--upstream", up_url, "--upstream-token-file",
                                   str(work / "token.txt"), "--audit-log", str(audit))
                try:
                    took = many_at_once(url, work, "main", clients)
                finally:
                    stop(proxy)
                got = received(audit)
                rows.append(f"{clients} clients at once through one fresh proxy: {took:.2f} s; the proxy received "
                            f"{got} bytes from the upstream for a {size}-byte model ({got / size:.2f}x); "
                            f"load {Path('/proc/loadavg').read_text().split()[:3]}")
        finally:
            stop(up)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="MiB of weights")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--against", type=Path, help="another ocibridge checkout whose proxies alternate with "
                        "this one's in the same runs (the baseline)")
    parser.add_argument("--flush", action="store_true", help="sync before each timed load: no load pays for "
                        "the writeback of what the step before it wrote")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-upstream-"))
    try:
        for line in run(args.size, work, args.repeat, args.clients, args.against, args.flush):
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
