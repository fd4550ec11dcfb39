"""`./scripts/test` says what it needs and stops at once without it (issue 42): root (apt-get,
the private containerd) and, for what it must install, the network. Run for real, as an
unprivileged user and in a network namespace of its own: it stops before installing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test"


def run(prefix: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """The script run as a copy in a folder anyone may read (a checkout under a 0700 folder, as
    ``mktemp -d`` makes, is no place another user can run it from)."""
    with tempfile.TemporaryDirectory() as where:
        os.chmod(where, 0o755)
        copy = Path(where) / "scripts" / "test"
        copy.parent.mkdir(mode=0o755)
        shutil.copy(SCRIPT, copy)
        os.chmod(copy, 0o755)
        started = time.monotonic()
        done = subprocess.run([*prefix, "bash", str(copy)], capture_output=True, text=True, timeout=60,
                              env=env, stdin=subprocess.DEVNULL, cwd=where)
        return done.returncode, done.stderr, time.monotonic() - started


def test_without_root_it_says_so_and_stops():
    assert os.geteuid() == 0, "the suite runs as root (scripts/test checks it)"
    code, err, took = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert code == 1 and took < 10
    assert err.startswith("scripts/test: needs root: ") and "containerd" in err and "apt-get" in err


def test_without_the_network_it_names_what_it_could_not_install(tmp_path):
    """A host missing docker-registry (a PATH without it) and no network (a namespace of its own)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bash", "id", "dirname", "grep", "sort", "timeout", "cat"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    env = {"PATH": str(tools), "HOME": str(tmp_path)}
    code, err, took = run([shutil.which("unshare") or "unshare", "-n"], env=env)
    assert code == 1 and took < 30, err
    assert err.startswith("scripts/test: needs the network to install ") and "docker-registry" in err, err
    assert "cannot be reached" in err
