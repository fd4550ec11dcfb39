"""The floors of a publish through serve, measured rather than summed (issue 108): the work nobody
can skip, done at once on the same cores, as the mount's floor is pull and a FUSE delivery at once.

    .venv/bin/python -m bench.floor_at_once               # 1024 MiB, 3 runs each, on a fresh registry

Over Xet (:func:`xet`), three processes: hf_xet uploads the weights to a sink that takes each xorb
and shard and keeps nothing (the client's own work: chunking, hashing, compressing, sending); from
the sink's first xorb on, curl PUTs the weights into the registry (the registry's work, no faster
than its own speed, and not held back by the client as serve's relay is) and one process does
serve's least work on them (``bench.publish.LEAST_WORK``: the SHA-256, the chunk table, the BLAKE3
check, one write). The floor is hf_xet's first xorb at serve in the real publish plus the time from
the sink's first xorb until all three are done; the sink's own receive is the one receive serve
must do. Over LFS (:func:`lfs`) the client hashes the file before its first byte moves; then its
send of the bytes (curl to the sink: serve's receive), curl's PUT into the registry and serve's
least work (the SHA-256, the chunk table) run at once: the floor is the client's time before its
first byte plus theirs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .registries import AtUrl, fresh_registry
from .serve import base_env

#: hf_xet's upload as huggingface_hub starts it, to a CAS URL and a token that never expires
CLIENT = ("import sys, hf_xet; hf_xet.upload_files([sys.argv[1]], sys.argv[2], ('bench-token', 4102444800), "
          "None, None, 'model')")
#: seconds hf_xet has to send its first xorb
FIRST_XORB_WAIT = 300.0
#: bytes read from a request body at a time
PIECE = 1 << 20


class _Sink(BaseHTTPRequestHandler):
    """The CAS routes hf_xet uses, answered as serve answers them, the bodies read and dropped."""

    protocol_version = "HTTP/1.1"
    server: _SinkServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return

    def _drain(self) -> None:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                self._skip(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
        else:
            self._skip(int(self.headers.get("content-length", 0)))

    def _skip(self, size: int) -> None:
        while size > 0:
            got = self.rfile.read(min(size, PIECE))
            if not got:
                raise ConnectionError("the body ended early")
            size -= len(got)

    def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(404, b'{"error":"not held"}')  # global dedupe: nothing is held

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        self._drain()  # an LFS upload's body (lfs(): the client's send, serve's receive)
        self._answer(200, b"{}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if "/v1/xorbs/" in self.path:
            self.server.first_xorb()
            self._drain()
            self._answer(200, b'{"was_inserted":true}')
        elif "/v2/shards" in self.path:
            self._drain()
            self._answer(200, b'{"type":"result"}\n', "application/x-ndjson")
        elif "/shards" in self.path:
            self._drain()
            self._answer(200, b'{"result":1}')
        else:  # a xorb grant: none, the xorb comes to /v1/xorbs/
            self._drain()
            self._answer(404, b'{"error":"no grants"}')


class _SinkServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Sink)
        self.started = threading.Event()
        self.at: float | None = None

    def first_xorb(self) -> None:
        if self.at is None:
            self.at = time.monotonic()
            self.started.set()


@contextmanager
def sink() -> Iterator[_SinkServer]:
    server = _SinkServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Together:
    """One run of the three at once: from the sink's first xorb until all were done, and each's end."""

    after_first_xorb: float
    client_done: float
    registry_done: float
    least_done: float


def xet(reg: AtUrl, weights: Path, repo: str, work: Path) -> Together:
    """hf_xet to the sink; curl's PUT and serve's least work from its first xorb on."""
    from .publish import curl_put_cmd

    put = curl_put_cmd(reg, weights, repo)  # the session and the file's digest made before anything runs
    out = work / "xet-floor-least.out"
    env = base_env(work)
    env["HF_HOME"] = str(work / "xet-floor-home")  # hf_xet's cache: nothing known from before
    with sink() as server:
        client = subprocess.Popen([sys.executable, "-c", CLIENT, str(weights), f"http://127.0.0.1:{server.server_port}"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + FIRST_XORB_WAIT
        while not server.started.wait(0.05):
            if client.poll() is not None or time.monotonic() > deadline:
                client.kill()
                said = client.communicate()[1].decode(errors="replace").strip().splitlines()
                raise RuntimeError(f"hf_xet sent no xorb (exit {client.returncode}): {said[-1] if said else ''}")
        assert server.at is not None
        registry = subprocess.Popen(put)
        ends = _ended({"client": client, "registry": registry, "least": _least_work(weights, out, "xet", env)},
                      server.at)
    out.unlink(missing_ok=True)
    return Together(max(ends.values()), ends["client"], ends["registry"], ends["least"])


def lfs(reg: AtUrl, weights: Path, repo: str, work: Path) -> float:
    """The client's send of the weights to a sink (serve's receive of them), curl's PUT of them into
    the registry and serve's least work over LFS, begun together: seconds until all three ended."""
    from . import tools
    from .publish import curl_put_cmd

    put = curl_put_cmd(reg, weights, repo)
    out = work / "lfs-floor-least.out"
    with sink() as server:
        # curl's PUT as the registry's, to the sink (which takes the body and reads no digest)
        send = tools.curl_put([(weights, f"http://127.0.0.1:{server.server_port}/lfs/upload", "sha256:-")])
        start = time.monotonic()
        procs = {"client": subprocess.Popen(send), "registry": subprocess.Popen(put),
                 "least": _least_work(weights, out, "lfs", base_env(work))}
        ends = _ended(procs, start)
    out.unlink(missing_ok=True)
    return max(ends.values())


def _least_work(weights: Path, out: Path, protocol: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """serve's least work on ``weights`` over ``protocol`` (``bench.publish.LEAST_WORK``), started."""
    from .publish import LEAST_WORK

    return subprocess.Popen([sys.executable, "-c", LEAST_WORK, str(weights), str(out), protocol], env=env)


def _ended(procs: dict[str, subprocess.Popen[bytes]], since: float) -> dict[str, float]:
    """When each of ``procs`` ended, in seconds from ``since`` (each waited for on a thread of its own)."""
    ends: dict[str, float] = {}

    def wait(name: str, proc: subprocess.Popen[bytes]) -> None:
        proc.wait()
        ends[name] = time.monotonic() - since

    waiters = [threading.Thread(target=wait, args=item) for item in procs.items()]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    failed = [f"{name} (exit {proc.returncode})" for name, proc in procs.items() if proc.returncode != 0]
    if failed:
        raise RuntimeError(f"the floor's {', '.join(failed)} failed")
    return ends


def main() -> None:
    from .publish import make_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024, help="weights size in MiB")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-floor-at-once-") as tmp:
        work = Path(tmp)
        weights = make_model(work / "m", args.size) / "model.safetensors"
        with fresh_registry(work) as reg:
            runs = []
            for n in range(args.repeat):
                runs.append((xet(reg, weights, f"bench/xet-{n}", work), lfs(reg, weights, f"bench/lfs-{n}", work)))
    for over_xet, over_lfs in runs:
        print(f"Xet, from the first xorb: all done {over_xet.after_first_xorb:.2f} s "
              f"(hf_xet {over_xet.client_done:.2f}, the registry {over_xet.registry_done:.2f}, "
              f"serve's least work {over_xet.least_done:.2f}); "
              f"LFS, from the first byte: {over_lfs:.2f} s")
    print(f"medians: Xet {statistics.median(x.after_first_xorb for x, _ in runs):.2f} s, "
          f"LFS {statistics.median(y for _, y in runs):.2f} s")


if __name__ == "__main__":
    main()
