"""Running the CLI in a fresh interpreter that counts the registry clients it makes and closes,
with ``ResourceWarning`` as an error: shared by the tests that check clients are closed and that
references are parsed once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

#: the start of a probe: ``made`` (ids of clients made) and ``closed`` (ids closed) count them
CLIENT_COUNTER = """
import gc, sys
from ocibridge.stores.registry import client
made, closed = [], set()
init, close = client.RegistryClient.__init__, client.RegistryClient.close
def counting_init(self, *a, **k):
    made.append(id(self)); init(self, *a, **k)
def counting_close(self):
    closed.add(id(self)); close(self)
client.RegistryClient.__init__ = counting_init
client.RegistryClient.close = counting_close
"""


def run_probe(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO_ROOT), "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def small_model(parent: Path) -> Path:
    """A two-file model directory under ``parent``."""
    model = parent / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 50_000)
    (model / "config.json").write_text("{}")
    return model
