"""``ocibridge serve`` against ``ocibridge pull`` (issue 40), on a fresh local registry.

    .venv/bin/python -m bench.serve                                   # 1 GiB (--repeat 2), then 4 GiB once
    .venv/bin/python -m bench.serve --sizes 1024 --repeat 2 --big 4096 --clients 16
    .venv/bin/python -m bench.serve --sizes 1024 --repeat 5 --big --clients 16 --before ../base  # issue 91's rows

The model is one safetensors-like file of random bytes and a config.json. Every client is a
process of its own, as a user runs it: ``snapshot_download`` with ``HF_ENDPOINT`` at serve and an
empty Hub cache, against ``python -m ocibridge pull REF DIR`` with empty caches (target ≤ 1.15×).
The weights go over Xet (hf_xet, huggingface_hub's default where it is installed); the same
download with ``HF_HUB_DISABLE_XET=1`` (the plain resolve route) is measured too (``--no-plain``:
not).

- cold: serve started afresh with an empty model cache (it fetches from the registry while it
  streams to the client);
- warm: serve's model cache holds the blob, the client's Hub cache is empty;
- peak RSS: ``VmHWM`` of the server process (``/proc/PID/status``) after a cold download, at
  each size (flat from 1 to 4 GiB: bytes move a chunk at a time);
- 16 clients: that many ``snapshot_download`` processes at once against a cold server (one
  registry fetch shared), their total throughput against one ``pull``'s;
- CPU: seconds of CPU (user + system, medians) of the client process, of serve and of the
  registry in each sample, against pull's: on two shared cores, the sum is what bounds the ratio;
  and serve's CPU per GiB read, cold and warm, over Xet and plain, against issue 91's targets;
- the clients: serve's CPU for all of them against one cold reader's, the same per GiB read
  (issue 91's row is of "serve CPU per GiB read": N readers read N times the model), and the
  blobs serve fetched from the registry (its /metrics: each once, the model's two files);
- the same readers one after another (a fresh serve: one cold, then the rest warm), serve's CPU
  summed: what issue 91's "fetch once, then cost serve only the sends" allows, so concurrent ÷
  one after another is the overhead of concurrency (target ≤ 1.3×); with the registry's fetches
  and serve's peak RSS of each pass, and the machine's floor beside them: one cold reader's serve
  CPU plus a ``sendfile`` of the file to a loopback reader for each other reader (its least CPU
  over the rounds, one a round: bench/cpu_floor.py's piece; under load a sample costs more);
- ``--before DIR``: the serve of another checkout (a worktree of the commit before a change)
  alternates with this one's in every round, and its rows are shown beside (a shared machine's
  slow stretches then hit both alike: compare ratios, not figures from other runs).

pull and the serve runs alternate ``--repeat`` times; medians are shown with every sample, and
``/proc/loadavg`` with each row (the machine may be shared: figures under load are said so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from .cpu_floor import sendfile_cpu
from .proc import python_path
from .registries import fresh_registry

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
REPO = "bench/serve"
SNAPSHOT = ("import sys; from huggingface_hub import snapshot_download; "
            "print(snapshot_download(sys.argv[1], revision=sys.argv[2]))")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far (the clients, the pulls)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class Cpu:
    """CPU seconds used meanwhile by the children waited for and by processes named by pid."""

    def __init__(self, **pids: int):
        self.pids = pids
        self.start = {"client": children_cpu(), **{k: cpu_of(p) for k, p in pids.items()}}

    def used(self) -> dict[str, float]:
        now = {"client": children_cpu(), **{k: cpu_of(p) for k, p in self.pids.items()}}
        return {k: now[k] - self.start[k] for k in now}


def write_model(directory: Path, size: int) -> Path:
    """``model.safetensors`` of ``size`` bytes (an 8-byte header length, a JSON header, random
    bytes) and ``config.json``."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    header = json.dumps({"w": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}).encode()
    header += b" " * (-len(header) % 8)
    with (directory / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        left = size - 8 - len(header)
        while left > 0:
            n = min(left, 64 * MiB)
            f.write(os.urandom(n))
            left -= n
    return directory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(work: Path, root: Path = ROOT) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": python_path(str(root)), "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_ENABLE_HF_TRANSFER": "0",
            "DOCKER_CONFIG": str(work / "docker")}


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path | None = None) -> None:
    """Until ``url/healthz`` answers 200 (60 s at most); serve's error when it exits first (its
    stderr, or ``log`` where it writes there)."""
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(proc.communicate()[1].decode() if log is None else log.read_text())
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz").status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError("serve did not start")
        time.sleep(0.1)


class Server:
    """``ocibridge serve`` as a process of its own, with a model cache of its own."""

    def __init__(self, work: Path, source: str, cache: Path, root: Path = ROOT):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**base_env(work, root), "OCIBRIDGE_CACHE": str(cache), "OCIBRIDGE_CACHE_DIR": str(cache) + "-dir"}
        # run in ``root``: ``python -m`` puts the working directory ahead of PYTHONPATH, so a serve
        # started from another checkout would import that checkout's ocibridge (--before's too)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ocibridge", "serve", source, "--listen", f"127.0.0.1:{self.port}",
             "--no-access-log"], env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_healthy(self.proc, self.url)

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def fetches(self) -> int:
        """Blobs serve fetched from the registry so far (its /metrics)."""
        for line in httpx.get(f"{self.url}/metrics").text.splitlines():
            if line.startswith("ocibridge_serve_blob_fetches_total "):
                return int(float(line.split()[1]))
        raise RuntimeError("no ocibridge_serve_blob_fetches_total in /metrics")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=60)


@contextlib.contextmanager
def server(work: Path, source: str, cache: Path, root: Path = ROOT) -> Iterator[Server]:
    shutil.rmtree(cache, ignore_errors=True)
    s = Server(work, source, cache, root)
    try:
        yield s
    finally:
        s.stop()


def snapshot_cmd(url: str, work: Path, hub: Path, tag: str, plain: bool = False) -> tuple[list[str], dict[str, str]]:
    env = {**base_env(work), "HF_ENDPOINT": url, "HF_HUB_CACHE": str(hub), "HF_HOME": str(hub) + "-home",
           "HF_HUB_DISABLE_XET": "1" if plain else "0"}
    return [sys.executable, "-c", SNAPSHOT, REPO, tag], env


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"{cmd[:4]} exit {done.returncode}: {done.stderr[-2000:]}")
    return took


def snapshot_once(url: str, work: Path, tag: str, plain: bool = False) -> float:
    hub = work / "hub"
    shutil.rmtree(hub, ignore_errors=True)
    took = timed(*snapshot_cmd(url, work, hub, tag, plain))
    shutil.rmtree(hub, ignore_errors=True)
    shutil.rmtree(str(hub) + "-home", ignore_errors=True)
    return took


def pull_once(ref: str, work: Path) -> float:
    """Seconds of ``ocibridge pull``; what it wrote stays for :func:`copy_pulled`."""
    out, caches = work / "pulled", work / "pull-caches"
    for d in (out, caches):
        shutil.rmtree(d, ignore_errors=True)
    env = {**base_env(work), "OCIBRIDGE_CACHE": str(caches / "models"), "OCIBRIDGE_CACHE_DIR": str(caches)}
    return timed([sys.executable, "-m", "ocibridge", "pull", ref, str(out), "-q"], env)


def copy_pulled(work: Path) -> float:
    """Seconds of ``cp`` of the file pull wrote (then both removed): a cold download through
    serve on the same machine writes the file twice (serve's model cache, the client's Hub cache)."""
    out = work / "pulled"
    copied = timed(["cp", str(out / "model.safetensors"), str(work / "copy.bin")], dict(os.environ))
    (work / "copy.bin").unlink()
    for d in (out, work / "pull-caches"):
        shutil.rmtree(d, ignore_errors=True)
    return copied


def many_at_once(url: str, work: Path, tag: str, clients: int) -> float:
    """Wall time of ``clients`` snapshot_download processes started together."""
    procs = []
    t = time.perf_counter()
    for n in range(clients):
        cmd, env = snapshot_cmd(url, work, work / f"hub{n}", tag)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    failed = [p.communicate()[1].decode()[-1000:] for p in procs if p.wait() != 0]
    took = time.perf_counter() - t
    for n in range(clients):
        shutil.rmtree(work / f"hub{n}", ignore_errors=True)
        shutil.rmtree(str(work / f"hub{n}") + "-home", ignore_errors=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {clients} clients failed: {failed[0]}")
    return took


def one_after_another(url: str, work: Path, tag: str, clients: int) -> float:
    """Wall time of ``clients`` snapshot_downloads one after another (the first cold, the rest
    warm): what concurrency is weighed against, serve fetching once and then only sending."""
    t = time.perf_counter()
    for _ in range(clients):
        snapshot_once(url, work, tag)
    return time.perf_counter() - t


@dataclass(frozen=True)
class Readers:
    """What a pass of readers cost a serve started afresh (empty model cache)."""

    wall: float
    cpu: dict[str, float]
    peak_rss_mib: float
    fetches: int
    load: str


def readers(work: Path, source: str, cache: Path, root: Path, registry_pid: int,
            read: Callable[[str], float]) -> Readers:
    """``read(serve's url)`` against a fresh serve: its wall time, the CPU serve and the registry
    used meanwhile, serve's peak RSS and the blobs it fetched from the registry."""
    with server(work, source, cache, root) as s:
        at = load()
        meter = Cpu(serve=s.proc.pid, registry=registry_pid)
        wall = read(s.url)
        used = meter.used()
        return Readers(wall, used, s.peak_rss_mib(), s.fetches(), at)


def _each(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def _cpu(samples: list[dict[str, float]]) -> str:
    """``client 1.40 + serve 0.30 + registry 0.00``: the median of each process's samples."""
    return " + ".join(f"{k} {statistics.median(s[k] for s in samples):.2f}" for k in samples[0])


ROWS = (("cold", "snapshot_download via serve, Xet, cold (empty model cache)"),
        ("warm", "snapshot_download via serve, Xet, warm (model cache filled, Hub cache empty)"),
        ("cold-plain", "the same, HF_HUB_DISABLE_XET=1 (plain resolve route), cold"),
        ("warm-plain", "the same, HF_HUB_DISABLE_XET=1, warm"))


#: issue 91's targets: serve's CPU seconds per GiB read
TARGETS = {"cold": 1.2, "warm": 0.25, "cold-plain": 1.2, "warm-plain": 0.25}
#: issue 91's target: serve's CPU for the concurrent cold readers against one cold reader's
MANY_TARGET = 1.3


def _serve_cpu(samples: list[dict[str, float]]) -> float:
    return statistics.median(s["serve"] for s in samples)


def run(size_mib: int, work: Path, repeat: int, clients: int, plain: bool = True,
        before: Path | None = None) -> list[str]:
    """The rows at one size; with ``before`` (another checkout), its serve alternates with this
    one's in every round, and each serve row is shown for both, with the ratio."""
    from ocibridge.api.model_ops import push

    trees = [("", ROOT)] + ([("before: ", before)] if before is not None else [])
    rows = []
    with fresh_registry(work) as reg:
        src = write_model(work / f"m{size_mib}", size_mib * MiB)
        tag = f"v{size_mib}"
        ref = f"{reg.host}/{REPO}:{tag}"
        push(str(src), ref)
        sent = work / f"send{size_mib}.bin"  # the file the send floor sends (page-cached: just written)
        (src / "model.safetensors").rename(sent)
        shutil.rmtree(src)
        sends: list[float] = []
        source = reg.host
        cache = work / "serve-cache"
        kinds = [("cold", "warm"), ("cold-plain", "warm-plain")] if plain else [("cold", "warm")]
        keys = ["pull", *(label + k for label, _ in trees for pair in kinds for k in pair)]
        samples: dict[str, list[float]] = {k: [] for k in keys}
        copies: list[float] = []
        loads: dict[str, list[str]] = {k: [] for k in keys}
        rss: dict[str, list[float]] = {label: [] for label, _ in trees}
        cpu: dict[str, list[dict[str, float]]] = {k: [] for k in keys}
        registry_pid = reg.process.pid
        assert registry_pid is not None
        for _ in range(repeat):  # alternating, so that a slow stretch of the machine hits all alike
            loads["pull"].append(load())
            meter = Cpu(registry=registry_pid)
            samples["pull"].append(pull_once(ref, work))
            cpu["pull"].append(meter.used())
            copies.append(copy_pulled(work))
            if clients:
                sends.append(sendfile_cpu(sent))
            for label, root in trees:
                for pair in kinds:
                    with server(work, source, cache, root) as s:
                        for kind in pair:
                            key = label + kind
                            loads[key].append(load())
                            meter = Cpu(serve=s.proc.pid, registry=registry_pid)
                            samples[key].append(snapshot_once(s.url, work, tag, plain=kind.endswith("plain")))
                            cpu[key].append(meter.used())
                            if kind == "cold":
                                rss[label].append(s.peak_rss_mib())
        full = statistics.median(samples["pull"])
        pulls = f"pull {full:.2f} s ({_each(samples['pull'])})"
        gib = size_mib / 1024
        for label, _ in trees:
            for kind, what in ROWS:
                key = label + kind
                if key not in samples:
                    continue
                took = statistics.median(samples[key])
                rows.append(f"| {size_mib} MiB | {label}{what} | {took:.2f} s ({_each(samples[key])}) | {pulls} "
                            f"| {took / full:.2f}× | {'; '.join(loads[key])} |")
        floor = full + statistics.median(copies)
        took = statistics.median(samples["cold"])
        rows.append(f"| {size_mib} MiB | Xet cold against pull + one more write of the file (cp of the pulled "
                    f"file: {_each(copies)} s) | {took:.2f} s | {floor:.2f} s | {took / floor:.2f}× | {load()} |")
        for label, _ in trees:
            for cold, warm in kinds:
                way = "plain" if "plain" in cold else "Xet"
                rows.append(f"| {size_mib} MiB | {label}CPU seconds (medians), {way}: "
                            f"{_cpu(cpu[label + cold])} cold, {_cpu(cpu[label + warm])} warm | | "
                            f"pull {_cpu(cpu['pull'])} | | {loads[label + warm][-1]} |")
        for kind, _ in ROWS:  # issue 91's rows: serve's CPU per GiB read, against its target (and before)
            if kind not in samples:
                continue
            per = _serve_cpu(cpu[kind]) / gib
            each = _each([c["serve"] / gib for c in cpu[kind]])
            was = ""
            if before is not None:
                old = _serve_cpu(cpu["before: " + kind]) / gib
                was = f"before {old:.2f} s ({_each([c['serve'] / gib for c in cpu['before: ' + kind]])})"
                ratio = f"{per / old:.2f}× before"
            else:
                ratio = f"{per / TARGETS[kind]:.2f}× target"
            rows.append(f"| {size_mib} MiB | serve CPU per GiB read, {kind} (target ≤ {TARGETS[kind]} s) | "
                        f"**{per:.2f} s** ({each}) | {was} | {ratio} | {loads[kind][-1]} |")
        for label, _ in trees:
            rows.append(f"| {size_mib} MiB | {label}serve's peak RSS (VmHWM) after a cold download | "
                        f"{max(rss[label]):.0f} MiB ({_each(rss[label])}) | | | {loads[label + 'cold'][-1]} |")
        if clients:
            rows += _readers_rows(size_mib, work, source, cache, trees, registry_pid, tag, clients,
                                  one=size_mib / full, single={label: _serve_cpu(cpu[label + "cold"])
                                                               for label, _ in trees}, sends=sends)
        sent.unlink()
    return rows


def _readers_rows(size_mib: int, work: Path, source: str, cache: Path, trees: list[tuple[str, Path]],
                  registry_pid: int, tag: str, clients: int, one: float, single: dict[str, float],
                  sends: list[float]) -> list[str]:
    """The concurrent readers' rows: ``clients`` cold readers at once against one cold reader, and
    against the same readers one after another (one cold, the rest warm), each on a fresh serve,
    beside the machine's floor for the latter (one cold read, then a sendfile a reader)."""
    rows = []
    send = min(sends)  # a floor: the least a send cost (under load a sample takes more)
    for label, root in trees:
        many = readers(work, source, cache, root, registry_pid, lambda url: many_at_once(url, work, tag, clients))
        seq = readers(work, source, cache, root, registry_pid,
                      lambda url: one_after_another(url, work, tag, clients))
        total = clients * size_mib / many.wall
        rows.append(f"| {size_mib} MiB | {label}{clients} snapshot_downloads at once via serve (cold), total "
                    f"throughput | {total:.0f} MiB/s ({many.wall:.2f} s for all; peak RSS {many.peak_rss_mib:.0f} "
                    f"MiB) | one pull {one:.0f} MiB/s | {total / one:.2f}× | {many.load} |")
        rows.append(f"| {size_mib} MiB | {label}{clients} cold readers: serve CPU {many.cpu['serve']:.2f} s "
                    f"against one cold reader's {single[label]:.2f} s (target ≤ {MANY_TARGET}×); registry CPU "
                    f"{many.cpu['registry']:.2f} s; blobs fetched from the registry {many.fetches} (the model's 2 "
                    f"files) | **{many.cpu['serve'] / single[label]:.2f}×** | | | {many.load} |")
        gib = size_mib / 1024
        per_gib, one_per_gib = many.cpu["serve"] / (clients * gib), single[label] / gib
        rows.append(f"| {size_mib} MiB | {label}{clients} cold readers: serve CPU per GiB read (the row's unit: "
                    f"{clients} × {gib:g} GiB read) against one cold reader's per GiB (target ≤ {MANY_TARGET}×) | "
                    f"{per_gib:.2f} s | {one_per_gib:.2f} s | **{per_gib / one_per_gib:.2f}×** | {many.load} |")
        rows.append(f"| {size_mib} MiB | {label}{clients} cold readers at once against {clients} one after another "
                    f"(one cold, {clients - 1} warm; {seq.wall:.1f} s): serve CPU (target ≤ {MANY_TARGET}×); "
                    f"registry CPU {many.cpu['registry']:.2f} / {seq.cpu['registry']:.2f} s; blobs fetched "
                    f"{many.fetches} / {seq.fetches}; peak RSS {many.peak_rss_mib:.0f} / {seq.peak_rss_mib:.0f} "
                    f"MiB | {many.cpu['serve']:.2f} s | {seq.cpu['serve']:.2f} s one after another "
                    f"| **{many.cpu['serve'] / seq.cpu['serve']:.2f}×** | {many.load}; {seq.load} |")
        floor = single[label] + (clients - 1) * send
        rows.append(f"| {size_mib} MiB | {label}the floor under them: one cold reader's serve CPU {single[label]:.2f} "
                    f"s + {clients - 1} sends of the file by sendfile to a loopback reader, {send:.2f} s each "
                    f"(the least of {_each(sends)}) | {floor:.2f} s | at once {many.cpu['serve']:.2f} s, one after "
                    f"another {seq.cpu['serve']:.2f} s | {many.cpu['serve'] / floor:.2f}×, "
                    f"{seq.cpu['serve'] / floor:.2f}× | {seq.load} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=int, default=[1024], help="model sizes in MiB (default 1024)")
    p.add_argument("--repeat", type=int, default=2, help="alternating samples at --sizes (medians shown)")
    p.add_argument("--big", type=int, nargs="*", default=[4096],
                   help="sizes in MiB measured once, without the clients (default 4096: the RSS at 4 GiB)")
    p.add_argument("--clients", type=int, default=16, help="concurrent clients at --sizes (0: none)")
    p.add_argument("--no-plain", action="store_true", help="measure Xet downloads only (not HF_HUB_DISABLE_XET=1)")
    p.add_argument("--before", type=Path, help="another checkout (a worktree of the commit before): its serve "
                   "alternates with this one's in every round, each row shown for both")
    args = p.parse_args(argv)
    print(f"load average at the start: {load()}; {os.cpu_count()} cores")
    print("| model | measure | serve | against | ratio | load (1, 5, 15 min) |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="servebench-") as tmp:
        work = Path(tmp)
        os.environ["OCIBRIDGE_CACHE"] = str(work / "own-cache")  # never the user's model cache
        for size in args.sizes:
            for row in run(size, work, args.repeat, args.clients, not args.no_plain, args.before):
                print(row, flush=True)
        for size in args.big:
            for row in run(size, work, 1, 0, False):
                print(row, flush=True)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
