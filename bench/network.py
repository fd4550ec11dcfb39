"""Transfers over a shaped network, and kill -9 then rerun (issue 14).

A network namespace holds a real docker-registry; a veth pair joins it to this host. In the
namespace, in front of the registry, bench/shaper.py adds 20 ms each way (a 40 ms round trip)
and caps each TCP connection at ``--rate`` (a per-connection cap, as CDNs and object stores
behave). The kernel this was written on has no ``sch_netem`` and no ``sch_fq`` (``tc qdisc add
… netem`` answers "Specified qdisc kind is unknown"), so the shaping is done in userspace.
A 1 GiB blob is then pulled by one curl stream, by ``curl --parallel`` over
the ranges ocibridge asks, and by ocibridge (to a layout, verified). Then ocibridge is killed
(SIGKILL) half-way through a 1 GiB pull and a 1 GiB push, and the same command run again; the
bytes are counted on the registry's side of the link (veth counters). The push is killed twice:
straight to the registry, and with bench/bufferproxy.py (request bodies forwarded whole, as
nginx does by default) between the link and the registry, on a second shaped port.

Needs root, iproute2 (``ip``), curl and docker-registry. One command:

    sudo .venv/bin/python -m bench.network            # writes a section of docs/benchmarks.md

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ocibridge.stores.ranged import RangedPlan

NS = "obbench"
HOST_IF, NS_IF = "obb-h", "obb-r"
HOST_IP, NS_IP = "10.77.0.1", "10.77.0.2"
PORT = 5000  # the shaper, on the veth
UPSTREAM_PORT = 5001  # the registry, on the namespace's loopback
BUFFERED_PORT = 5010  # a second shaper, on the veth, before
PROXY_PORT = 5002  # bench/bufferproxy.py on the namespace's loopback, before the registry
REPO_ROOT = Path(__file__).resolve().parent.parent
DOC = REPO_ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench.network: begin -->", "<!-- bench.network: end -->"
MiB = 1024 * 1024
PUSH_CHUNK = 32 * MiB  # the push chunks of the kill rows


def sh(*cmd: str, check: bool = True) -> str:
    return subprocess.run(cmd, check=check, capture_output=True, text=True).stdout


@contextmanager
def linked_namespace() -> Iterator[None]:
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", HOST_IF, check=False)
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
        sh("ip", "link", "set", NS_IF, "netns", NS)
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
        sh("ip", "link", "set", HOST_IF, "up")
        ns = ("ip", "netns", "exec", NS)
        sh(*ns, "ip", "addr", "add", f"{NS_IP}/24", "dev", NS_IF)
        sh(*ns, "ip", "link", "set", NS_IF, "up")
        sh(*ns, "ip", "link", "set", "lo", "up")
        yield
    finally:
        sh("ip", "link", "del", HOST_IF, check=False)
        sh("ip", "netns", "del", NS, check=False)


@contextmanager
def registry_in_namespace(workdir: Path, rate: str, one_way_delay_ms: float) -> Iterator[None]:
    storage = workdir / "storage"
    storage.mkdir(parents=True)
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True},
                    "maintenance": {"uploadpurging": {"enabled": False}}},
        "http": {"addr": f"127.0.0.1:{UPSTREAM_PORT}", "secret": os.urandom(8).hex()},
    }
    (workdir / "config.yml").write_text(json.dumps(config))
    log = open(workdir / "registry.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["ip", "netns", "exec", NS, "docker-registry", "serve",
                             str(workdir / "config.yml")], stdout=log, stderr=log)
    def shaper(port: int, upstream: int) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(REPO_ROOT / "bench" / "shaper.py"),
                                 "--listen", f"{NS_IP}:{port}", "--upstream", f"127.0.0.1:{upstream}",
                                 "--rate", rate, "--delay-ms", str(one_way_delay_ms)])

    shapers = [shaper(PORT, UPSTREAM_PORT), shaper(BUFFERED_PORT, PROXY_PORT)]
    proxy = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(REPO_ROOT / "bench" / "bufferproxy.py"),
                              "--listen", f"127.0.0.1:{PROXY_PORT}", "--upstream", f"127.0.0.1:{UPSTREAM_PORT}"])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if all(subprocess.run(["curl", "-sf", "-o", "/dev/null", f"http://{NS_IP}:{port}/v2/"]).returncode == 0
                   for port in (PORT, BUFFERED_PORT)):
                break
            time.sleep(0.2)
        else:
            raise SystemExit("the registry in the namespace did not start")
        yield
    finally:
        for p in (*shapers, proxy, proc):
            p.terminate()
            p.wait(timeout=10)
        log.close()


def request_rtt(url: str) -> float:
    """The time curl needs for a small GET on a fresh connection, minus nothing: connect + request."""
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_connect} %{time_total}", url],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[1]) - float(out[0])


def counter(name: str) -> int:
    """Bytes the host side of the veth received (= the registry sent) or sent."""
    return int(Path(f"/sys/class/net/{HOST_IF}/statistics/{name}").read_text())


def timed(cmd: Sequence[str], **kw) -> float:
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.monotonic() - start


def ocibridge(*args: str) -> list[str]:
    return [sys.executable, "-m", "ocibridge", *args]


def make_model(root: Path, size: int) -> str:
    root.mkdir(parents=True)
    hasher = hashlib.sha256()
    with open(root / "weights.bin", "wb") as f:
        left = size
        while left:
            block = os.urandom(min(16 * MiB, left))
            f.write(block)
            hasher.update(block)
            left -= len(block)
    return "sha256:" + hasher.hexdigest()


def ranges(size: int, part: int) -> list[tuple[int, int]]:
    return [(s, min(s + part, size) - 1) for s in range(0, size, part)]


def kill_at(cmd: list[str], counter_name: str, at: int, env: dict[str, str]) -> tuple[int, int]:
    """Run ``cmd``, SIGKILL it once ``at`` bytes crossed the link; bytes before the kill,
    then bytes of the same command run again to the end."""
    start = counter(counter_name)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while counter(counter_name) - start < at:
        if proc.poll() is not None:
            raise SystemExit(f"{cmd} ended before half-way")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = counter(counter_name) - start
    again = counter(counter_name)
    subprocess.run(cmd, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
    return first, counter(counter_name) - again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rate", default="20M", help="per-connection cap, bytes per second")
    parser.add_argument("--delay-ms", type=float, default=20, help="added each way (RTT: twice)")
    parser.add_argument("--parts", type=int, default=RangedPlan().parts_in_flight,
                        help="curl --parallel-max")
    parser.add_argument("--part-size-mib", type=int, default=32)
    parser.add_argument("--no-doc", action="store_true", help="print only, do not edit the doc")
    parser.add_argument("--kills-only", action="store_true",
                        help="only the kill -9 and rerun measurements (implies --no-doc)")
    parser.add_argument("--pulls-only", action="store_true",
                        help="only the pull throughput rows (implies --no-doc)")
    opts = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (ip netns, tc)")
    size = opts.size_mib * MiB
    work = Path(tempfile.mkdtemp(prefix="ocibridge-netbench-"))
    rows: list[tuple[str, str]] = []
    figures: dict[str, float] = {}
    try:
        model = work / "model"
        digest = make_model(model, size)
        env = dict(os.environ, OCIBRIDGE_CACHE_DIR=str(work / "cache"))
        with linked_namespace(), registry_in_namespace(work / "registry", opts.rate, opts.delay_ms):
            registry = f"{NS_IP}:{PORT}"
            # seeded from inside the namespace (its loopback is not shaped)
            seed = ocibridge("push", str(model), f"127.0.0.1:{UPSTREAM_PORT}/bench/big:v1", "-q")
            subprocess.run(["ip", "netns", "exec", NS, *seed], cwd=REPO_ROOT, check=True,
                           stdout=subprocess.DEVNULL, env=env)
            url = f"http://{registry}/v2/bench/big/blobs/{digest}"
            rtt = request_rtt(f"http://{registry}/v2/")
            if not opts.kills_only:
                out = work / "out"
                out.mkdir()
                figures["curl"] = timed(["curl", "-sf", "-o", str(out / "single"), url])
                (out / "single").unlink()
                parts = ranges(size, opts.part_size_mib * MiB)
                cmd = ["curl", "-sf", "--parallel", "--parallel-max", str(opts.parts)]
                for i, (a, b) in enumerate(parts):
                    cmd += ["-r", f"{a}-{b}", "-o", str(out / f"part{i}"), url]
                figures["curl --parallel"] = timed(cmd)
                shutil.rmtree(out)
                ceiling = RangedPlan().parts_in_flight
                for label, extra in ((f"ocibridge (default: parts by the rate, up to {ceiling})", []),
                                     (f"ocibridge --parts {ceiling} (fixed)", ["--parts", str(ceiling)]),
                                     ("ocibridge --parts 1 (one stream)", ["--parts", "1"])):
                    layout = work / "layout"
                    figures[label] = timed(ocibridge("copy", "--plain-http", "-q", f"{registry}/bench/big:v1",
                                                     f"oci:{layout}:v1", "--part-size", f"{opts.part_size_mib}M",
                                                     *extra), cwd=REPO_ROOT, env=env)
                    shutil.rmtree(layout)
                base = figures["curl"]
                for label, seconds in figures.items():
                    rate = size / seconds / MiB
                    rows.append((label, f"| {label} | {seconds:.2f} | {rate:.1f} | {base / seconds:.2f}× |"))

            if opts.pulls_only:
                for _, row in rows:
                    print(row)
                return
            # kill -9 half-way, then the same command again
            layout = work / "layout-kill"
            pull_cmd = ocibridge("copy", "--plain-http", "-q", f"{registry}/bench/big:v1", f"oci:{layout}:v1")
            pull_first, pull_again = kill_at(pull_cmd, "rx_bytes", size // 2, env)
            # 32 MiB chunks, as when these rows were measured (since then chunks are sized by
            # time unless --chunk-size is given: docs/transfers.md)
            push_cmd = ocibridge("push", "--plain-http", "-q", str(model), f"{registry}/bench/pushed:v1",
                                 "--chunk-size", str(PUSH_CHUNK))
            push_first, push_again = kill_at(push_cmd, "tx_bytes", size // 2, env)
            # Half of 1 GiB is a chunk boundary: the kill comes while the chunk's last bytes are
            # on their way and its answer is not yet read. Half a chunk later the chunk in
            # flight is still leaving ocibridge.
            buffered = []
            for i, at in enumerate((size // 2, size // 2 + PUSH_CHUNK // 2)):
                buffered_cmd = ocibridge("push", "--plain-http", "-q", str(model),
                                         f"{NS_IP}:{BUFFERED_PORT}/bench/pushed-buffered{i}:v1",
                                         "--chunk-size", str(PUSH_CHUNK))
                buffered.append((at, *kill_at(buffered_cmd, "tx_bytes", at, env)))
        load = os.getloadavg()
        lines = [
            BEGIN,
            "## Shaped network: parallel ranged pulls, kill -9 and rerun (issue 14)",
            "",
            "- command: `sudo .venv/bin/python -m bench.network` (bench/network.py); one sample each",
            f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs; "
            f"load average after: {load[0]:.1f}",
            f"- network: netns + veth; in the namespace bench/shaper.py before the registry: "
            f"+{opts.delay_ms:g} ms each way, {opts.rate}B/s per connection (no sch_netem/sch_fq in "
            f"this kernel); `GET /v2/` round trip as curl sees it: {rtt * 1000:.0f} ms",
            f"- blob: {opts.size_mib} MiB, random; ocibridge pulls into a layout (verified before it is "
            f"visible), parts of {opts.part_size_mib} MiB; curl writes unverified files",
            "",
            "| client | seconds | MiB/s | × one curl stream |",
            "|---|---|---|---|",
            *[row for _, row in rows],
            "",
            "kill -9 once half the blob crossed the link, then the same command again; bytes counted "
            "on the registry's side of the veth (headers and TCP/IP overhead included):",
            "",
            "| transfer | before the kill | the rerun | rerun ÷ blob size |",
            "|---|---|---|---|",
            f"| pull {opts.size_mib} MiB | {pull_first / MiB:.0f} MiB | {pull_again / MiB:.0f} MiB | "
            f"{pull_again / size:.0%} |",
            f"| push {opts.size_mib} MiB | {push_first / MiB:.0f} MiB | {push_again / MiB:.0f} MiB | "
            f"{push_again / size:.0%} |",
            *[f"| push {opts.size_mib} MiB, request-buffering proxy before the registry, killed at "
              f"{at / MiB:.0f} MiB | {first / MiB:.0f} MiB | {again / MiB:.0f} MiB | {again / size:.0%} |"
              for at, first, again in buffered],
            END,
        ]
        text = "\n".join(lines) + "\n"
        print(text)
        if not (opts.no_doc or opts.kills_only):
            doc = DOC.read_text()
            if BEGIN in doc:
                doc = doc[: doc.index(BEGIN)] + text.rstrip("\n") + doc[doc.index(END) + len(END):]
            else:
                doc = doc.rstrip("\n") + "\n\n" + text
            DOC.write_text(doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
