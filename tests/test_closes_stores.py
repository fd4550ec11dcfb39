"""Every registry client an API call opens is closed when it returns: a copy between two
registries (and a push, a pull, an inspect) leaves no connection pool and no socket behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PROBE = """
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
from ocibridge.cli import main
code = main({args!r})
gc.collect()
print("CLIENTS", len(made), len(closed & set(made)), "EXIT", code)
"""


def _run(args: list[str], cwd: Path) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c",
                           PROBE.format(args=args)], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO_ROOT), "HOME": str(cwd), "PATH": "/usr/bin:/bin"})
    return done.stdout, done.stderr


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 50_000)
    (model / "config.json").write_text("{}")
    return model


def test_every_command_closes_the_clients_it_opens(registry, unique_repo, model_dir, tmp_path):
    src, dst = f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-copy:v1"
    for args in (["push", "-q", str(model_dir), src],
                 ["copy", "-q", src, dst],
                 ["pull", "-q", dst, str(tmp_path / "out")],
                 ["inspect", dst],
                 ["tags", f"{registry.host}/{unique_repo}"]):
        out, err = _run(args, tmp_path)
        assert "EXIT 0" in out, (args, out, err)
        made, closed = map(int, out.split("CLIENTS", 1)[1].split()[:2])
        assert made >= 1 and closed == made, (args, out)
        assert "ResourceWarning" not in err, (args, err)
