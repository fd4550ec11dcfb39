"""``ocibridge serve --upstream`` (issue 87): a model's first load through a proxy that lacks it,
and its later loads, each paired with a load straight from the upstream taken beside it. On a
fresh local registry: the upstream is an ``ocibridge serve`` over ``REG/up`` holding the model
(uploaded with huggingface_hub, then loaded once so its model cache holds it), each proxy a
fresh ``ocibridge serve REG/pN --upstream``.

    .venv/bin/python -m bench.upstream --size 1024 --repeat 5 --clients 0 --state warm

Every client is a process of its own (``snapshot_download``, ``HF_HUB_DISABLE_XET=1``, an empty Hub
cache, every request timed: bench/timedclient.py). Each compared load starts from the state
``--state`` names (:func:`prepare`). Rows, each sample a pair (direct and proxied, one right
after the other, which goes first alternating), ratios per pair and their median:

- ``--repeat`` fresh proxies: the first load (until its commit landed in the registry), then the
  pair right after it (the second load, in the state the ingest left);
- one proxy that fetched the model once: ``--repeat`` pairs (the loads of a proxy that holds it).

Every load prints where its seconds went (start, metadata requests, the weights' GET, the
client's CPU), the CPU of the server that answered it and the MiB not yet written back when it
began (``--verbose``: every request). ``--against DIR``: in each run a fresh proxy running the
ocibridge checkout at DIR too, its first load and its pair (a baseline in the same runs).
``--clients N``: N clients at once through one fresh proxy; the bytes the proxy received from the
upstream (its audit line's ``bytes_received``) against the model's size say whether each file was
sent once."""

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
from bench.serve import REPO, MiB, base_env, free_port, many_at_once, wait_healthy, write_model
from bench.timedclient import Load, load

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


STATES = ("as-is", "synced", "warm", "dropped")


def prepare(state: str, held: list[Path]) -> None:
    """The named state every compared load starts from (``--state``): ``as-is`` (whatever the
    step before left), ``synced`` (every dirty page written back: no load pays for the writeback
    of what the step before wrote, 2 GiB after a 1 GiB model's ingest), ``warm`` (synced, the page
    cache dropped, then the files of every folder in ``held`` read once: each server's copy of the
    model resident, nothing dirty, the client's pages taken from memory just freed) or ``dropped``
    (synced and dropped: each server reads its copy from the disk)."""
    if state == "as-is":
        return
    os.sync()
    if state in ("warm", "dropped"):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    if state == "warm":
        for folder in held:
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    with f.open("rb") as opened:
                        while opened.read(1 << 22):
                            pass


def dirty_mib() -> int:
    """MiB of the page cache not yet on the disk when a load starts (``Dirty`` + ``Writeback``):
    what the kernel writes back while the load runs, and what throttles its writes past the
    dirty limits."""
    lines = (line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    kib = {k: int(v.split()[0]) for k, v in lines}
    return (kib["Dirty"] + kib["Writeback"]) // 1024


@dataclass
class Sample:
    """One timed load, the CPU seconds the server that answered it spent on it, and the MiB not
    yet written back when it started."""

    load: Load
    server_cpu: float
    dirty: int = 0


@dataclass
class Pair:
    """A load through the proxy and one straight from the upstream, taken one after the other."""

    direct: Sample
    proxy: Sample
    proxy_first: bool
    loadavg: str

    @property
    def ratio(self) -> float:
        return self.proxy.load.wall / self.direct.load.wall

    def lines(self, label: str) -> list[str]:
        order = "proxy then direct" if self.proxy_first else "direct then proxy"
        return [f"  {label}: {self.ratio:.2f}x ({order}; load {self.loadavg})",
                f"    direct {self.direct.load.summary()}; upstream CPU {self.direct.server_cpu:.2f}; "
                f"dirty at start {self.direct.dirty} MiB",
                f"    proxy  {self.proxy.load.summary()}; proxy CPU {self.proxy.server_cpu:.2f}; "
                f"dirty at start {self.proxy.dirty} MiB"]


class Bench:
    """The upstream serve (holding the model) and what each load needs."""

    def __init__(self, work: Path, registry: str, up: subprocess.Popen[bytes], up_url: str, state: str,
                 verbose: bool):
        self.work, self.registry, self.up, self.up_url = work, registry, up, up_url
        self.state, self.verbose = state, verbose

    def one(self, url: str, server: subprocess.Popen[bytes], held: list[Path]) -> Sample:
        prepare(self.state, held)
        before, dirty = cpu_seconds(server), dirty_mib()
        got = load(url, REPO, "main", self.work / "hub", {**base_env(self.work), "HF_HUB_DISABLE_XET": "1"})
        sample = Sample(got, cpu_seconds(server) - before, dirty)
        if self.verbose:
            for r in got.requests:
                print(f"      {json.dumps(r)}", flush=True)
        return sample

    def pair(self, proxy: subprocess.Popen[bytes], proxy_url: str, name: str, proxy_first: bool) -> Pair:
        """The two loads one after the other, each from the same named state."""
        held = [self.work / "up-cache", self.work / f"{name}-cache"]
        if proxy_first:
            p = self.one(proxy_url, proxy, held)
            d = self.one(self.up_url, self.up, held)
        else:
            d = self.one(self.up_url, self.up, held)
            p = self.one(proxy_url, proxy, held)
        return Pair(d, p, proxy_first, " ".join(Path("/proc/loadavg").read_text().split()[:3]))

    def proxy(self, name: str, code: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
        return start(self.work, f"{self.registry}/{name}", name, "--upstream", self.up_url,
                     "--upstream-token-file", str(self.work / "token.txt"), code=code)

    def ingested(self, proxy: subprocess.Popen[bytes], url: str, name: str) -> Sample:
        """The proxy's first load (it lacks the model), until its commit landed in the registry."""
        held = [self.work / "up-cache"]
        prepare(self.state, held)
        before = cpu_seconds(proxy)
        got = load(url, REPO, "main", self.work / "hub", {**base_env(self.work), "HF_HUB_DISABLE_XET": "1"})
        landed(self.registry, name)
        return Sample(got, cpu_seconds(proxy) - before)


def stopped(proc: subprocess.Popen[bytes], work: Path, name: str) -> None:
    stop(proc)
    shutil.rmtree(work / f"{name}-cache", ignore_errors=True)


def ratios(pairs: list[Pair]) -> str:
    r = [round(p.ratio, 2) for p in pairs]
    d = [round(p.direct.load.wall, 2) for p in pairs]
    x = [round(p.proxy.load.wall, 2) for p in pairs]
    return (f"median of the pairs' ratios {statistics.median(r):.2f}x (ratios {r}); proxy {statistics.median(x):.2f} s "
            f"{x}, direct {statistics.median(d):.2f} s {d}")


def upload(url: str, model: Path) -> None:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_folder(repo_id=REPO, folder_path=model)


def received(audit: Path) -> int:
    lines = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
    return sum(int(e.get("bytes_received", 0)) for e in lines if e.get("outcome") == "landed")


def fresh_rows(label: str, firsts: list[Sample], after_first: list[Pair]) -> list[str]:
    """The fresh proxies' rows: each first load against the direct load of its pair; the pairs."""
    first_ratio = [round(f.load.wall / p.direct.load.wall, 2) for f, p in zip(firsts, after_first, strict=True)]
    return [f"{label}: first load through a fresh proxy ÷ the direct load beside it: median "
            f"{statistics.median(first_ratio):.2f}x {first_ratio}; proxy CPU until landed "
            f"{[round(f.server_cpu, 2) for f in firsts]}",
            f"{label}: second load right after the first landed, paired: {ratios(after_first)}"]


def run(size_mib: int, work: Path, repeat: int, clients: int, state: str = "as-is",
        verbose: bool = False, against: Path | None = None) -> list[str]:
    os.environ["HF_TOKEN"] = TOKEN  # every client's (base_env passes it on), the proxies' upstream token too
    (work / "token.txt").write_text(TOKEN + "\n")
    model = write_model(work / "model", size_mib * MiB)
    size = sum(p.stat().st_size for p in model.iterdir())
    rows: list[str] = []
    with fresh_registry(work) as registry:
        up, up_url = start(work, f"{registry.host}/up", "up")
        try:
            upload(up_url, model)
            bench = Bench(work, registry.host, up, up_url, state, verbose)
            bench.one(up_url, up, [])  # the upstream's own cache filled: every direct load after is warm
            print(f"{size_mib} MiB, state {state!r} before every load; uptime: {uptime()}", flush=True)
            checkouts: list[Path | None] = [None] if against is None else [None, against]
            firsts: dict[Path | None, list[Sample]] = {c: [] for c in checkouts}
            after_first: dict[Path | None, list[Pair]] = {c: [] for c in checkouts}
            for n in range(repeat):
                for code in checkouts:  # a fresh proxy of each checkout in every run (--against: the baseline)
                    name = f"p{n}{'' if code is None else 'b'}"
                    proxy, url = bench.proxy(name, code)
                    try:
                        firsts[code].append(bench.ingested(proxy, url, name))
                        print(f"  fresh proxy {name}: first load {firsts[code][-1].load.summary()}; proxy CPU until "
                              f"landed {firsts[code][-1].server_cpu:.2f}", flush=True)
                        after_first[code].append(bench.pair(proxy, url, name, proxy_first=n % 2 == 1))
                        print("\n".join(after_first[code][-1].lines("second load, right after the first landed")),
                              flush=True)
                    finally:
                        stopped(proxy, work, name)
            held: list[Pair] = []
            proxy, url = bench.proxy("held")
            try:
                bench.ingested(proxy, url, "held")
                for n in range(repeat):
                    held.append(bench.pair(proxy, url, "held", proxy_first=n % 2 == 1))
                    print("\n".join(held[-1].lines(f"held pair {n}")), flush=True)
            finally:
                stopped(proxy, work, "held")
            for code in checkouts:
                shown = "this checkout" if code is None else f"--against {code}"
                rows.extend(fresh_rows(f"{size_mib} MiB, {state}, {shown}", firsts[code], after_first[code]))
            rows.append(f"{size_mib} MiB, {state}: loads from a proxy that held the model for a while, paired: "
                        f"{ratios(held)}; uptime {uptime()}")
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


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="MiB of weights")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--state", choices=STATES, default="as-is", help="the state every compared load starts "
                        "from (see prepare); warm and dropped drop the page cache: root only")
    parser.add_argument("--flush", action="store_true", help="the same as --state synced")
    parser.add_argument("--against", type=Path, help="another ocibridge checkout: in each run a fresh proxy of it "
                        "too, its first load and its pair (the baseline in the same runs)")
    parser.add_argument("--verbose", action="store_true", help="every request of every load, as JSON")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-upstream-"))
    try:
        state = "synced" if args.flush else args.state
        for line in run(args.size, work, args.repeat, args.clients, state, args.verbose, args.against):
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
