"""How often the registry is woken to take one blob, publishing four ways: counts, not times
(steady on a loaded machine, where a fresh VM charges per wakeup what this one hardly does).
Findings: docs/bench-2core-publish-wakeups.md.

    .venv/bin/python -m bench.publish_wakeups                   # 1024 MiB, every way once
    .venv/bin/python -m bench.publish_wakeups --sizes 256 --ways curl lfs --repeat 2
    .venv/bin/python -m bench.publish_wakeups --ways curl curl+hogs paced-1024k@150 paced-64k@150

The ways are those of :mod:`bench.publish`, on one fresh registry: curl's monolithic PUT of the
weights, ``python -m ocibridge push``, ``upload_folder`` through serve over LFS
(``HF_HUB_DISABLE_XET=1``: serve relays the bytes handed in memory) and over Xet (serve relays
a rebuilt file as it is written); and two of its own: ``paced-KIBk@MBPS``, one PUT from Python
a piece of KIB KiB at a time at most MBPS MB/s (a sender slower than the registry, in pieces of
a chosen size), and ``curl+hogs``, curl's PUT while two processes hash the weights (the cores
shared, as a relayed LFS upload shares them with the client and serve).

Each way runs twice. The first time ``perf stat`` counts the registry process's system calls
by kind, its context switches and page faults (every thread, attached by pid), ``perf record``
keeps what each of its ``read`` calls returned (EAGAIN: the socket was empty, the goroutine
parks in the netpoller until woken), and ``/proc/PID/task/*/status`` gives its voluntary and
involuntary context switches; all per GiB of weights. The second time ``strace`` follows the
sender (curl, push, or serve) and keeps the size of each write to the registry's port: how the
bytes were cut on their way in (not timed: strace slows the sender). The registry's access log
says which requests carried them.

Needs ``perf`` and ``strace`` (and the right to attach: root, or ``kernel.perf_event_paranoid``
low enough).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from errno import EAGAIN
from pathlib import Path

from .publish import UPLOAD, client_env, curl_put_cmd, make_model, push_cmd, serving, upload_session
from .registries import BenchRegistry, fresh_registry
from .serve import MiB, base_env, load

GiB = 1024 * MiB
#: what perf stat counts in the registry (the Go runtime parks in epoll_pwait and on futexes,
#: sleeps in nanosleep, preempts with tgkill + a signal)
EVENTS = ("raw_syscalls:sys_enter", "syscalls:sys_enter_read", "syscalls:sys_enter_write",
          "syscalls:sys_enter_futex", "syscalls:sys_enter_epoll_pwait", "syscalls:sys_enter_nanosleep",
          "syscalls:sys_enter_sched_yield", "syscalls:sys_enter_tgkill", "context-switches", "page-faults")
#: sizes a read or write is sorted into (upper bounds, bytes)
BUCKETS = (4096, 16 * 1024, 64 * 1024, 256 * 1024, MiB)
WAYS = ("curl", "push", "lfs", "xet")
#: a way of its own: curl's PUT while two processes hash the weights over and over (the CPU the
#: registry shares with the client and serve while an LFS upload is relayed, on a 2-core machine)
CONTENDED = "curl+hogs"
HOG = """
import hashlib, sys
while True:
    h = hashlib.sha256()
    with open(sys.argv[1], "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
"""
#: a way of its own: one PUT of the weights from Python, a piece of KIB KiB at a time, at most MBPS MB/s
PACED = re.compile(r"paced-(\d+)k@(\d+)")
PACED_PUT = """
import sys, time, httpx
path, location, digest, piece, rate = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) * 1024, int(sys.argv[5])
def body():
    start, sent = time.monotonic(), 0
    with open(path, "rb") as f:
        while data := f.read(piece):
            ahead = sent / (rate * 1e6) - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
            yield data
            sent += len(data)
size = __import__("os").path.getsize(path)
sep = "&" if "?" in location else "?"
httpx.put(f"{location}{sep}digest={digest}", content=body(), headers={"Content-Length": str(size)},
          timeout=600).raise_for_status()
"""
_ACCESS = re.compile(r'"(PATCH|PUT) /v2/[^ ]+/blobs/uploads/')
_METHOD = re.compile(r'"(GET|HEAD|POST|PUT|PATCH|DELETE) /')


def switches(pid: int) -> tuple[int, int]:
    """Voluntary and involuntary context switches of every thread of ``pid`` so far."""
    vol = invol = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol += int(line.split()[1])
    return vol, invol


def user_system(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def buckets(sizes: Sequence[int]) -> str:
    """``sizes`` as counts per bucket, their number and mean."""
    if not sizes:
        return "none"
    counts = [0] * (len(BUCKETS) + 1)
    for n in sizes:
        counts[next((i for i, top in enumerate(BUCKETS) if n < top), len(BUCKETS))] += 1
    names = ["<4K", "<16K", "<64K", "<256K", "<1M", "≥1M"]
    shown = " ".join(f"{name}:{c}" for name, c in zip(names, counts, strict=True) if c)
    return f"{len(sizes)} calls, mean {statistics.mean(sizes) / 1024:.0f} KiB, median " \
           f"{statistics.median(sizes) / 1024:.0f} KiB ({shown})"


@contextlib.contextmanager
def watched(pid: int, work: Path) -> Iterator[dict[str, object]]:
    """perf's counts of :data:`EVENTS` in process ``pid`` (every thread) meanwhile, the sizes its
    reads returned, its context switches and CPU seconds: in the dict yielded, once done."""
    stat, record = work / "perf-stat.txt", work / "perf.data"
    counter = subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(stat), "-e", ",".join(EVENTS),
                                "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recorder = subprocess.Popen(["perf", "record", "-q", "-o", str(record), "-e", "syscalls:sys_exit_read",
                                 "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # both attached
    found: dict[str, object] = {}
    switched, cpu = switches(pid), user_system(pid)
    try:
        yield found
    finally:
        after = switches(pid)
        now = user_system(pid)
        found["cpu"], found["system"] = now[0] + now[1] - cpu[0] - cpu[1], now[1] - cpu[1]
        for perf in (counter, recorder):
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=120)
        found["voluntary"], found["involuntary"] = after[0] - switched[0], after[1] - switched[1]
        for line in stat.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[0].strip().isdigit():
                found[fields[2].split(":")[-1]] = int(fields[0])
        script = subprocess.run(["perf", "script", "-i", str(record), "-F", "trace"],
                                capture_output=True, text=True, check=False).stdout
        found["reads"], found["EAGAIN"] = read_sizes(script)
        record.unlink(missing_ok=True)


def read_sizes(script: str) -> tuple[list[int], int]:
    """The sizes the reads in ``perf script -F trace`` of ``sys_exit_read`` (a hex number a line)
    returned, of those that returned bytes, and how many found nothing to read (EAGAIN: the
    goroutine parks in the netpoller until woken)."""
    returned = [int(m, 16) for m in re.findall(r"^\s*0x([0-9a-f]+)\s*$", script, re.M)]
    return [n for n in returned if 0 < n < 1 << 63], returned.count((1 << 64) - EAGAIN)


def sender_writes(trace: Path, port: int) -> list[int]:
    """The sizes of the writes a strace ``-yy`` log shows going to loopback port ``port``."""
    sent = re.compile(rf"(?:write|writev|sendto|sendmsg)\(\d+<TCP:\[[^\]]*->[^\]]*:{port}\]>.*\)\s+=\s+(\d+)")
    return [int(m) for m in sent.findall(trace.read_text(errors="replace"))]


def strace_cmd(out: Path, *target: str) -> list[str]:
    bpf = [] if target[0] == "-p" else ["--seccomp-bpf"]  # only for a command strace starts
    return ["strace", "-f", "-qq", "-yy", "-s", "0", *bpf, "-e", "trace=write,writev,sendto,sendmsg",
            "-e", "signal=none", "-o", str(out), *target]


def access_requests(reg: BenchRegistry, mark: int) -> str:
    """The blob upload PATCH and PUT requests the registry's access log shows since ``mark``,
    and every request by method."""
    with reg.process.log_file.open("rb") as f:
        f.seek(mark)
        text = f.read().decode(errors="replace")
    found = _ACCESS.findall(text)
    methods = Counter(_METHOD.findall(text))
    every = ", ".join(f"{n} {method}" for method, n in sorted(methods.items()))
    return f"{found.count('PATCH')} PATCH + {found.count('PUT')} PUT to uploads; all: {every}"


@contextlib.contextmanager
def hogging(path: Path, hogs: int = 2) -> Iterator[None]:
    """``hogs`` processes hashing ``path`` over and over meanwhile, as a client and serve hash
    the bytes while an LFS upload is relayed."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG, str(path)]) for _ in range(hogs)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


class Publisher:
    """Runs one way's upload of ``model`` into ``reg`` (a new repository each time), optionally
    with the sender traced into a file."""

    def __init__(self, reg: BenchRegistry, model: Path, work: Path):
        self.reg, self.model, self.work, self.n = reg, model, work, 0

    def __call__(self, way: str, trace: Path | None = None) -> None:
        self.n += 1
        name = f"{re.sub('[^a-z0-9]+', '-', way)}-{self.n}"  # a repository name
        if way == CONTENDED:
            with hogging(self.model / "model.safetensors"):
                self("curl", trace)
            return
        if way in ("curl", "push") or PACED.fullmatch(way):
            if (paced := PACED.fullmatch(way)) is not None:
                location, digest = upload_session(self.reg, self.model / "model.safetensors", f"bench/{name}")
                cmd = [sys.executable, "-c", PACED_PUT, str(self.model / "model.safetensors"), location, digest,
                       paced[1], paced[2]]
            elif way == "curl":
                cmd = curl_put_cmd(self.reg, self.model / "model.safetensors", f"bench/{name}")
            else:
                cmd = push_cmd(self.model, f"{self.reg.host}/bench/{name}:latest")
            env = {**base_env(self.work), "OCIBRIDGE_CACHE": str(self.work / f"cache-{name}")}
            subprocess.run(strace_cmd(trace, *cmd) if trace else cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            shutil.rmtree(self.work / f"cache-{name}", ignore_errors=True)
            return
        home = self.work / f"hf-home-{name}"
        with serving(self.work, f"{self.reg.host}/bench", self.work / f"serve-{name}.log") as (url, proc):
            tracer = subprocess.Popen(strace_cmd(trace, "-p", str(proc.pid))) if trace else None
            if tracer is not None:
                time.sleep(1.0)  # attached to every thread
            try:
                subprocess.run([sys.executable, "-c", UPLOAD, f"acme/{name}", str(self.model)],
                               env=client_env(self.work, url, way, home), check=True, stdout=subprocess.DEVNULL)
            finally:
                if tracer is not None:
                    tracer.send_signal(signal.SIGINT)
                    tracer.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)


#: the columns of perf's and /proc's counts: (heading, key in :func:`watched`'s dict)
COLUMNS = (("reads finding nothing (EAGAIN)", "EAGAIN"), ("syscalls", "sys_enter"), ("read", "sys_enter_read"),
           ("write", "sys_enter_write"), ("futex", "sys_enter_futex"), ("epoll_pwait", "sys_enter_epoll_pwait"),
           ("nanosleep", "sys_enter_nanosleep"), ("tgkill", "sys_enter_tgkill"),
           ("context switches (perf)", "context-switches"), ("voluntary", "voluntary"),
           ("involuntary", "involuntary"), ("page faults", "page-faults"))


def row(way: str, found: dict[str, object], per: float, writes: str, requests: str) -> str:
    """One way's row: the counts in ``found`` times ``per``."""
    counts = [f"{v * per:,.0f}" if isinstance(v := found.get(key), int | float) else "-" for _, key in COLUMNS]
    reads = found["reads"]
    assert isinstance(reads, list)
    cpu, system = found["cpu"], found["system"]
    assert isinstance(cpu, float) and isinstance(system, float)
    return (f"| {way} | {cpu * per:.2f} ({system * per:.2f}) | {' | '.join(counts)} | {buckets(reads)} | {writes} "
            f"| {requests} |")


def measure(size_mib: int, ways: Sequence[str], repeat: int, work: Path, idle: float) -> list[str]:
    model = make_model(work / f"m{size_mib}", size_mib)
    per = GiB / (size_mib * MiB)
    headings = ["way", "registry CPU s (system)", *(h for h, _ in COLUMNS), "registry's reads", "sender's writes to it",
                "requests"]
    lines = [f"#### {size_mib} MiB, per GiB of weights (idle: per second), load {load()}", "",
             f"| {' | '.join(headings)} |", "|---" * len(headings) + "|"]
    with fresh_registry(work) as reg:
        publish = Publisher(reg, model, work)
        pid = reg.process.pid or 0
        if idle:
            with watched(pid, work) as found:
                time.sleep(idle)
            lines.append(row("idle registry", found, 1 / idle, "-", "-"))
        for _ in range(repeat):
            for way in ways:
                mark = reg.process.log_file.stat().st_size
                with watched(pid, work) as found:
                    publish(way)
                requests = access_requests(reg, mark)
                trace = work / f"strace-{way}.txt"
                publish(way, trace)
                writes = buckets(sender_writes(trace, reg.process.port))
                trace.unlink()
                lines.append(row(way, found, per, writes, requests))
                print(lines[-1], file=sys.stderr, flush=True)
    shutil.rmtree(model)
    return lines


def way(name: str) -> str:
    if name in (*WAYS, CONTENDED) or PACED.fullmatch(name):
        return name
    raise argparse.ArgumentTypeError(f"not a way: {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1024], help="weights sizes in MiB")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--ways", nargs="+", type=way, default=list(WAYS),
                   help=f"of {', '.join(WAYS)}, {CONTENDED}, or paced-KIBk@MBPS: one PUT from Python, KIB KiB a piece, "
                        "at most MBPS MB/s")
    p.add_argument("--idle", type=float, default=10.0, help="seconds the idle registry is counted first")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-wakeups-") as tmp:
        work = Path(tmp)
        os.environ["OCIBRIDGE_CACHE"] = str(work / "own-cache")
        for size in args.sizes:
            print(*measure(size, args.ways, args.repeat, work, args.idle), sep="\n", flush=True)


if __name__ == "__main__":
    main()
