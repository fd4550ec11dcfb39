"""``snapshot_download`` in a process of its own, every request it sends timed (issue 87).

Run as ``python -m bench.timedclient REPO REVISION``: it prints the snapshot's folder on stdout
and, on stderr, one JSON line per response (method, path, status, when it was sent and when its
head came, seconds from send to the body's end, the headers that choose the client's code path:
ETag, X-Linked-Etag/-Size, X-Xet-Hash, Content-Length, Location) and a last line with the whole
call's seconds. huggingface_hub's own client is kept (its request hook, redirects); two event
hooks are added to it, so the requests are the ones a plain ``snapshot_download`` sends.

:func:`load` runs it with an empty Hub cache and returns a :class:`Load`: the wall, the client's
CPU (user and system, from the kernel's accounting of the child) and the requests."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the response headers printed for each request: the ones huggingface_hub branches on
SHOWN = ("content-length", "etag", "x-linked-etag", "x-linked-size", "x-xet-hash", "location")


@dataclass
class Load:
    """One client's ``snapshot_download``: seconds, its CPU seconds, its requests (JSON dicts)."""

    wall: float
    user: float
    system: float
    total: float  # the snapshot_download call's own seconds (the client's count)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def biggest(self) -> dict[str, Any]:
        """The GET with the most bytes (the weights)."""
        gets = [r for r in self.requests if r["method"] == "GET"]
        return max(gets, key=lambda r: int(r["headers"].get("content-length", 0)))

    def summary(self) -> str:
        """Where the seconds went: the client's start (interpreter, imports) until its first
        request, the metadata requests until the weights' GET was sent, the GET, the rest."""
        first = min(r["sent"] for r in self.requests)
        big = self.biggest()
        done = big["sent"] + big["seconds"]
        return (f"{self.wall:.2f} s: start {first:.2f}, metadata {big['sent'] - first:.3f} "
                f"({len(self.requests) - 1} requests), weights' GET {big['seconds']:.2f} "
                f"(head after {big['head'] - big['sent']:.3f}), after it {self.total - done:.2f}; "
                f"client CPU user {self.user:.2f} system {self.system:.2f}")


def load(url: str, repo: str, revision: str, hub: Path, env: dict[str, str]) -> Load:
    """One timed ``snapshot_download`` from ``url`` into the empty Hub cache ``hub`` (removed after)."""
    home = Path(str(hub) + "-home")
    for d in (hub, home):
        shutil.rmtree(d, ignore_errors=True)
    env = {**env, "HF_ENDPOINT": url, "HF_HUB_CACHE": str(hub), "HF_HOME": str(home)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench.timedclient", repo, revision], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for d in (hub, home):
        shutil.rmtree(d, ignore_errors=True)
    if done.returncode:
        raise RuntimeError(f"snapshot_download from {url}: exit {done.returncode}: {done.stderr[-2000:]}")
    lines = [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]
    total = next(float(x["total"]) for x in lines if "total" in x)
    return Load(wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, total,
                [x for x in lines if "method" in x])


def main(repo: str, revision: str) -> None:
    import huggingface_hub
    from huggingface_hub.utils import _http

    start = time.perf_counter()
    heads: list[tuple[Any, float]] = []

    def client() -> Any:
        c = _http.default_client_factory()  # huggingface_hub's own client (its factory is not exported)
        c.event_hooks["request"].append(lambda request: request.extensions.update(sent=time.perf_counter()))
        c.event_hooks["response"].append(lambda response: heads.append((response, time.perf_counter())))
        return c

    huggingface_hub.set_client_factory(client)
    folder = huggingface_hub.snapshot_download(repo, revision=revision)
    end = time.perf_counter()
    for response, head in heads:
        sent = response.request.extensions["sent"]
        print(json.dumps({"method": response.request.method, "path": response.request.url.path,
                          "status": response.status_code, "sent": round(sent - start, 4),
                          "head": round(head - start, 4), "seconds": round(response.elapsed.total_seconds(), 4),
                          "headers": {k: v for k, v in response.headers.items() if k.lower() in SHOWN}}),
              file=sys.stderr)
    print(json.dumps({"total": round(end - start, 4)}), file=sys.stderr)
    print(folder)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
