"""No forwarding loop between replicas (issue 85): a standby whose ``--peer`` led back to itself
sent a write to itself without end (descriptors 19 -> 14,000, 433 MiB growing). A peer or
writer that is this serve is refused at start with one line (replicas/selfpeer.py); a peer
address that reaches a standby in a way no start check sees (a load balancer in front of the
standbys) costs one hop: a forwarded write is never forwarded again (replicas/forward.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from serve_processes import ServeProcess, free_port
from support.faultproxy import FaultProxy

ROOT = Path(__file__).resolve().parents[2]
FAST = {"OCIBRIDGE_SERVE_LEASE_EXPIRY": "4", "OCIBRIDGE_SERVE_LEASE_RENEW": "1", "OCIBRIDGE_SERVE_LEASE_SETTLE": "0.2"}
WRITE = {"Authorization": "Bearer writer-token"}


@pytest.mark.parametrize("flags", [
    ["--peer", "http://localhost:{port}"],  # an alias of the address it listens at
    ["--public-url", "http://models.example", "--peer", "http://models.example/"],
    ["--writer", "http://127.0.0.1:{port}"],  # a reader whose writer is itself
], ids=["peer-alias", "peer-public-url", "writer-itself"])
def test_a_peer_or_writer_that_is_this_serve_is_refused_at_start(tmp_path, flags):
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "local", "--listen", f"127.0.0.1:{port}",
                           *(flag.format(port=port) for flag in flags)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_STORE": str(tmp_path / "store")},
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "that is this serve's own address" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def _descriptors(served: ServeProcess) -> int:
    assert served.proc is not None
    return len(os.listdir(f"/proc/{served.proc.pid}/fd"))


def test_standbys_whose_peer_leads_back_to_a_standby_answer_one_503_not_a_loop(registry, tmp_path):
    """The holder advertises a load balancer's address (its ``--public-url``) that leads to a
    standby, and both standbys name that address as their peer: a write to one is sent there,
    reaches the other standby, and is answered 503 at once, not sent round again."""
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    first = ServeProcess(tmp_path / "first", (prefix,), env=FAST)
    with FaultProxy(first.url) as balancer:
        holder = ServeProcess(tmp_path / "holder", (prefix, "--public-url", balancer.url), env=FAST)
        second = ServeProcess(tmp_path / "second", (prefix, "--peer", balancer.url), env=FAST)
        first.args = (prefix, "--peer", balancer.url)
        try:
            holder.start()
            first.start()
            second.start()
            before = _descriptors(first)
            answer = httpx.post(f"{second.url}/api/models/acme/loop/preupload/main", headers=WRITE, timeout=20,
                                json={"files": [{"path": "x.txt", "size": 1, "sample": ""}]})
            assert answer.status_code == 503, answer.text
            assert "sends no write on twice" in answer.text
            assert len(balancer.requests) == 1  # one hop, through the balancer to the first standby
            time.sleep(0.5)
            assert _descriptors(first) < before + 20
            assert "not sent on to" in first.log.read_text()
        finally:
            for served in (second, first, holder):
                served.stop()
