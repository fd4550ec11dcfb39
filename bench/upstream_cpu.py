"""Where the proxy's CPU goes on a model's first load (issue 87): its CPU seconds (user, system)
from the request until the client has its files, and from then until the commit landed in the
registry (what the push costs after the reader was answered), with the walls of both and the
load; ``--profile DIR``: a ``perf record`` of the proxy through each first load (until landed),
its top symbols by share printed.

    .venv/bin/python -m bench.upstream_cpu --size 1024 --repeat 3 [--against DIR] [--profile /tmp/prof]

The same setup as :mod:`bench.upstream` (a local registry, an upstream ``ocibridge serve`` holding
the model, a fresh proxy each run, ``snapshot_download`` with ``HF_HUB_DISABLE_XET=1``)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.registries import fresh_registry
from bench.serve import MiB, snapshot_once, write_model
from bench.upstream import TOKEN, landed, start, stop, upload


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def pid_serving(config: Path) -> int:
    """The process whose command line names ``config`` (the bench's registry: ``docker-registry
    serve CONFIG``), to count its CPU beside the proxy's."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(config).encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    raise RuntimeError(f"no process serves {config}")


def top_symbols(data: Path, count: int = 30) -> list[str]:
    """perf's on-CPU samples of the proxy by library and symbol (the kernel's, libcrypto's
    SHA-256, libc's copies, the interpreter), the largest first."""
    said = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "dso,sym", "--percent-limit",
                           "0.7"], capture_output=True, text=True).stdout
    return [line.strip() for line in said.splitlines() if line.strip() and not line.startswith("#")][:count]


def one(work: Path, registry: str, up_url: str, name: str, profile: Path | None,
        code: Path | None = None, registry_pid: int | None = None) -> dict[str, float]:
    proxy, url = start(work, f"{registry}/{name}", name, "--upstream", up_url,
                       "--upstream-token-file", str(work / "token.txt"), code=code)
    spy = None
    try:
        if profile is not None:
            spy = subprocess.Popen(os.environ.get("PROFILER", "perf record -F 999 -o {out}.data -p {pid}").format(
                out=profile / name, pid=proxy.pid).split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        reg = (lambda: sum(cpu_split(registry_pid))) if registry_pid is not None else (lambda: 0.0)
        u0, s0 = cpu_split(proxy.pid)
        r0 = reg()
        t0 = time.perf_counter()
        client = snapshot_once(url, work, "main", plain=True)
        u1, s1 = cpu_split(proxy.pid)
        r1 = reg()
        t1 = time.perf_counter()
        landed(registry, name)
        u2, s2 = cpu_split(proxy.pid)
        r2 = reg()
        t2 = time.perf_counter()
        return {"client": client, "user": u1 - u0, "sys": s1 - s0, "after": t2 - t1, "after_cpu": u2 + s2 - u1 - s1,
                "wall": t1 - t0, "registry": r1 - r0, "registry_after": r2 - r1}
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        stop(proxy)
        shutil.rmtree(work / f"{name}-cache", ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB of weights")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="a folder for perf's profiles (PROFILER: "
                        "another profiler's command, with {out} and {pid})")
    parser.add_argument("--against", type=Path, help="another ocibridge checkout whose proxy alternates with "
                        "this one's in the same runs (the baseline)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-upstream-cpu-"))
    os.environ["HF_TOKEN"] = TOKEN
    (work / "token.txt").write_text(TOKEN + "\n")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    try:
        model = write_model(work / "model", args.size * MiB)
        with fresh_registry(work) as registry:
            up, up_url = start(work, f"{registry.host}/up", "up")
            try:
                upload(up_url, model)
                snapshot_once(up_url, work, "main", plain=True)  # the upstream warm, as in bench.upstream's runs
                codes: dict[str, Path | None] = {"this": None}
                if args.against is not None:
                    codes[f"--against {args.against}"] = args.against
                runs: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
                for n in range(args.repeat):
                    direct = snapshot_once(up_url, work, "main", plain=True)
                    for k, (label, code) in enumerate(codes.items()):
                        got = one(work, registry.host, up_url, f"c{n}x{k}", args.profile, code,
                                  pid_serving(registry.process.config_file))
                        got["direct"] = direct
                        load = Path("/proc/loadavg").read_text().split()[0]
                        print(f"run {n} {label}: direct {direct:.2f} s, first through the proxy {got['client']:.2f} s;"
                              f" the proxy's CPU until the client had its files {got['user'] + got['sys']:.2f} s "
                              f"(user {got['user']:.2f}, sys {got['sys']:.2f}); then {got['after']:.2f} s and "
                              f"{got['after_cpu']:.2f} s of CPU until landed; the registry's CPU "
                              f"{got['registry']:.2f} s until the client had its files, "
                              f"{got['registry_after']:.2f} s after; load {load}",
                              flush=True)
                        runs[label].append(got)
                gib = args.size / 1024
                for label, got_runs in runs.items():
                    med = {k: statistics.median(r[k] for r in got_runs) for k in got_runs[0]}
                    cpu = statistics.median(r["user"] + r["sys"] for r in got_runs)
                    print(f"median, {label}: direct {med['direct']:.2f} s, first {med['client']:.2f} s "
                          f"({med['client'] / med['direct']:.2f}x); the proxy's CPU a GiB until the client had its "
                          f"files {cpu / gib:.2f} s (user {med['user'] / gib:.2f}, sys "
                          f"{med['sys'] / gib:.2f}), after it until landed {med['after_cpu'] / gib:.2f} s in "
                          f"{med['after']:.2f} s; the registry's CPU {med['registry']:.2f} s until the client had "
                          f"its files, {med['registry_after']:.2f} s after", flush=True)
                if args.profile is not None:
                    for data in sorted(args.profile.glob("c0x*.data")):
                        print(f"{data}:\n  " + "\n  ".join(top_symbols(data)))
            finally:
                stop(up)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
