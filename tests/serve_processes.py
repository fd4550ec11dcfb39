"""``ocibridge serve`` as a process with its own cache and port, to start, stop, kill -9 and start
again on the same cache and port: the writer and readers of one registry (issue 61)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from serving import stop, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent
#: a bare token reads; the others write (access.py's lines)
TOKENS = "reader-token\nwriter-token write * ci-bot\nacme-token write acme/\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeProcess:
    """One serve: ``args`` (its sources and flags), its own cache (``home/cache``), its port;
    ``env``: more of its environment (the writer lease's times: tests/serve/test_serve_writer_lease.py)."""

    home: Path
    args: tuple[str, ...]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def staging(self) -> Path:
        return self.cache / "serve" / "staging"

    @property
    def log(self) -> Path:
        return self.home / "serve.log"

    def start(self) -> ServeProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "tokens.txt").write_text(TOKENS)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(self.cache), **self.env}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ocibridge", "serve", *self.args, "--no-access-log",
                 "--token-file", str(self.home / "tokens.txt"), "--listen", f"127.0.0.1:{self.port}"],
                env=env, stdout=out, stderr=subprocess.STDOUT)
        wait_until_healthy(self.proc, self.url, self.log)
        return self

    def kill(self) -> None:
        """``kill -9``: no request finishes, no cleanup runs."""
        assert self.proc is not None and self.proc.poll() is None, "serve is not running"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc)


@contextlib.contextmanager
def running(home: Path, *args: str) -> Iterator[ServeProcess]:
    served = ServeProcess(home, args).start()
    try:
        yield served
    finally:
        served.stop()
