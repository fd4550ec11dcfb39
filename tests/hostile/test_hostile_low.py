"""Issue 34, item 9 (low): secrets kept out of ConfigMaps, SIGTERM during a rate-limit wait,
tags with newlines, and pull staging directories swept."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ocibridge.cli import main
from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.core.interrupt import EXIT_INTERRUPTED
from ocibridge.core.stale import GRACE_SECONDS, STAGING_PREFIX, locked_staging
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from ocibridge.transfer.copy import copy
from tests.modelgen import make_model

ROOT = Path(__file__).resolve().parents[2]


# -- (a) an inline password never goes into the ConfigMap --------------------------------------
INLINE_JOBS = {
    "job.toml": ('[registries."reg.example"]\nusername = "bot"\npassword = "hunter2-secret"\n\n'
                 '[[sync]]\nsource = "reg.example/a"\ntarget = "mirror.example/a"\n'),
    "job.yaml": ("registries:\n  mirror.example: {username: bot, password_env: P}\n"
                 "  reg.example: {username: bot, password: hunter2-secret}\n"
                 "sync:\n  - {source: reg.example/a, target: mirror.example/a}\n"),
}


@pytest.mark.parametrize("name", list(INLINE_JOBS))
def test_inline_password_is_refused_for_a_k8s_job(tmp_path, capsys, name):
    job = tmp_path / name
    job.write_text(INLINE_JOBS[name])
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "2", "--env-secret", "s"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing printed: the secret is in no object
    assert captured.err.startswith("ocibridge: error: ") and captured.err.count("\n") == 1
    assert "registries.reg.example.password" in captured.err and "password_env" in captured.err
    assert "hunter2" not in captured.err


def test_password_env_job_emits_without_the_secret(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("P", "hunter2-secret")
    job = tmp_path / "job.yaml"
    job.write_text(INLINE_JOBS["job.yaml"].replace("password: hunter2-secret", "password_env: P"))
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "2", "--env-secret", "s"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and [d["kind"] for d in yaml.safe_load_all(out)] == ["ConfigMap", "Job"]


# -- (b) SIGTERM ends a rate-limit wait at once ---------------------------------------------------
def test_sigterm_during_a_rate_limit_wait_exits_promptly(registry, fault_proxy, tmp_path):
    repo = f"rate/{os.urandom(4).hex()}"
    with open_repository(parse_registry_reference(f"{registry.host}/{repo}:v1")) as store:
        copy(build(read_directory(make_model(tmp_path / "m"))), ARTIFACT_TAG, store, "v1")
    job = tmp_path / "job.toml"
    # one token, then one request every 200 s: the second request waits in the bucket
    job.write_text(f'[[sync]]\nsource = "{fault_proxy.host}/{repo}"\ntarget = "oci:{tmp_path / "dst"}"\n'
                   'rate_limit = { requests_per_second = 0.005, burst = 1 }\n')
    proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "mirror", str(job)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not fault_proxy.requests_matching(None, r"/v2/"):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the mirror sent no request"
            time.sleep(0.05)
        time.sleep(1.0)  # the next request is now waiting for a token
        requests = len(fault_proxy.requests)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == EXIT_INTERRUPTED  # (within the wait's 20 s: a run that went on is killed above)
    assert len(fault_proxy.requests) == requests  # still waiting when stopped: nothing more sent


# -- (c) a tag holding a newline prints as one escaped line --------------------------------------
HOSTILE_TAGS = ["v1\nocibridge: pulled evil into /etc", "ok", "a\rb", "\x1b[2Jclear", "x\u202eevil", "tab\there"]


class _TagServer:
    """A loopback registry whose tag list holds ``tags``."""

    def __init__(self, tags: list[str]) -> None:
        body = json.dumps({"name": "m", "tags": tags}).encode()

        class _Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                payload = b"{}" if self.path == "/v2/" else body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_tag_with_newline_prints_one_escaped_line(capsys):
    server = _TagServer(HOSTILE_TAGS)
    try:
        assert main(["tags", f"{server.host}/m"]) == 0
    finally:
        server.close()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(HOSTILE_TAGS)  # one line per tag, none forged
    assert not any(line.startswith("ocibridge:") for line in lines)
    assert "v1\\nocibridge: pulled evil into /etc" in lines
    assert not any(c in "".join(lines) for c in "\r\x1b\u202e")


# -- (d) pull staging directories of dead pulls are swept ----------------------------------------
def _age(path: Path) -> None:
    old = time.time() - GRACE_SECONDS - 10
    os.utime(path, (old, old))


def test_pull_sweeps_staging_left_by_a_killed_pull(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/store:v1", "-q"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    # a pull killed with -9 while staging: its directory is locked no more
    code = ("import sys, time; from pathlib import Path; from ocibridge.core.stale import locked_staging\n"
            "with locked_staging(Path(sys.argv[1])) as p:\n"
            "    (p / 'model.safetensors').write_bytes(b'x' * 1000); print(p, flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    dead = Path(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _age(dead)
    young = out / f"{STAGING_PREFIX}young"
    young.mkdir()  # just made by a pull about to lock it: within the grace period
    aside = out / f"{TEMP_PREFIX}aside"
    aside.mkdir()  # replaced files moved aside by a dead pull: maybe the only copy, kept
    (aside / "0").write_text("the user's old file")
    _age(aside)
    with locked_staging(out) as live:  # a pull running now
        _age(live)
        assert main(["pull", f"oci:{tmp_path}/store:v1", str(out), "-q", "--overwrite"]) == 0
        assert live.is_dir()
        left = sorted(p.name for p in out.iterdir() if p.name.startswith(STAGING_PREFIX))
    capsys.readouterr()
    assert not dead.exists()
    assert young.is_dir() and (aside / "0").read_text() == "the user's old file"
    assert left == sorted([live.name, young.name])  # the pull's own staging is gone too
