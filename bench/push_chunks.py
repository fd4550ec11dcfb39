"""Where a chunked push spends its time: the same file pushed as PATCH chunks of several sizes,
by a minimal client (the registry's own cost of chunking) and by ocibridge, next to curl's
monolithic PUT (the floor). Variants alternate within each repetition, each into a registry
started empty, so drift from the shared machine hits them alike.

    .venv/bin/python -m bench.push_chunks --size-mib 1024 --repeat 3 --chunks 32 64 128 256 0
    (0: one PATCH with the whole file)

The minimal client sends each chunk with ``sendfile`` on one kept-alive connection, reads the
answer, and follows its Location: what any client must do per chunk, nothing more.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from . import models, tools
from .proc import python_path, run_measured
from .registries import fresh_registry

MiB = models.MiB


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while data := f.read(4 * MiB):
            h.update(data)
    return "sha256:" + h.hexdigest()


def raw_chunked(url: str, repo: str, path: Path, digest: str, chunk: int) -> float:
    """POST, PATCH chunks by sendfile, PUT ?digest=: seconds from the POST to the 201."""
    host = urlsplit(url).netloc
    size = path.stat().st_size
    chunk = chunk or size
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host)
    conn.request("POST", f"/v2/{repo}/blobs/uploads/", body=b"")
    resp = conn.getresponse()
    resp.read()
    location = resp.headers["Location"]
    with path.open("rb") as f:
        offset = 0
        while offset < size:
            n = min(chunk, size - offset)
            target = location if location.startswith("/") else urlsplit(location)._replace(
                scheme="", netloc="").geturl()
            conn.putrequest("PATCH", target, skip_accept_encoding=True)
            conn.putheader("Content-Type", "application/octet-stream")
            conn.putheader("Content-Range", f"{offset}-{offset + n - 1}")
            conn.putheader("Content-Length", str(n))
            conn.endheaders()
            assert conn.sock is not None
            sent = conn.sock.sendfile(f, offset, n)
            assert sent == n, (sent, n)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 202, resp.status
            location = resp.headers["Location"]
            offset += n
    sep = "&" if "?" in location else "?"
    target = urlsplit(location)._replace(scheme="", netloc="").geturl()
    conn.request("PUT", f"{target}{sep}digest={digest}", body=b"")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 201, resp.status
    conn.close()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.push_chunks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--chunks", type=int, nargs="+", default=[32, 64, 128, 256, 0],
                   help="chunk sizes in MiB (0: one PATCH of the whole file)")
    p.add_argument("--no-raw", action="store_true", help="skip the minimal client")
    p.add_argument("--no-ocibridge", action="store_true", help="skip ocibridge")
    p.add_argument("--ocibridge-default", action="store_true",
                   help="also ocibridge without --chunk-size (its own choice)")
    p.add_argument("--workdir")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="ocibridge-chunks-", dir=args.workdir))
    env = {**os.environ, "PYTHONPATH": python_path(str(Path(__file__).resolve().parent.parent)),
           "OCIBRIDGE_CACHE_DIR": str(work / "cache"), "OCIBRIDGE_DIGEST_CACHE": "0"}
    try:
        model = models.single_weight(work / "model", args.size_mib * MiB, seed=3)
        weight = model.root / model.weights[0]
        digest = _digest(weight)
        variants: dict[str, Callable[[], float]] = {}

        def curl() -> float:
            with fresh_registry(work) as reg:
                location = tools.start_upload(reg.url, "b/floor")
                os.sync()
                return run_measured(tools.curl_put([(weight, location, digest)])).seconds

        variants["curl PUT"] = curl
        for c in args.chunks:
            label = f"{c} MiB" if c else "one PATCH"
            if not args.no_raw:
                def raw(c: int = c) -> float:
                    with fresh_registry(work) as reg:
                        os.sync()
                        return raw_chunked(reg.url, "b/raw", weight, digest, c * MiB)
                variants[f"raw {label}"] = raw
            if not args.no_ocibridge:
                def ob(c: int = c) -> float:
                    with fresh_registry(work) as reg:
                        os.sync()
                        size = str((c or args.size_mib) * MiB)
                        cmd = tools.ocibridge("push", str(model.root), f"{reg.host}/b/ob:v1",
                                              "--chunk-size", size)
                        return run_measured(cmd, env=env).seconds
                variants[f"ocibridge {label}"] = ob
        if args.ocibridge_default:
            def ob_default() -> float:
                with fresh_registry(work) as reg:
                    os.sync()
                    cmd = tools.ocibridge("push", str(model.root), f"{reg.host}/b/ob:v1")
                    return run_measured(cmd, env=env).seconds
            variants["ocibridge (default)"] = ob_default

        times: dict[str, list[float]] = {k: [] for k in variants}
        print(f"load average before: {os.getloadavg()}", file=sys.stderr)
        for i in range(args.repeat):
            for name, fn in variants.items():
                t = fn()
                times[name].append(t)
                print(f"[{i}] {name}: {t:.2f} s (load {os.getloadavg()[0]:.1f})", file=sys.stderr,
                      flush=True)
        print(f"load average after: {os.getloadavg()}", file=sys.stderr)
        floor = statistics.median(times["curl PUT"])
        print("| variant | median s | min–max s | median ÷ curl median |")
        print("|---|---|---|---|")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"| {name} | {med:.2f} | {min(ts):.2f}–{max(ts):.2f} | {med / floor:.2f}× |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
