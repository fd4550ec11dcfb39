"""`./scripts/test` says what it needs and stops at once without it (issue 42): root (apt-get,
the private containerd) and, for what it must install, the network. Run for real, as an
unprivileged user and in a network namespace of its own: it stops before installing anything.
``--no-root``, asked for explicitly, is the lighter entry point: no apt, the containerd tests left
out by name (tests/conftest.py), nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test"


def run(prefix: list[str], env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> tuple[int, str]:
    """The script run as a copy in a folder anyone may read (a checkout under a 0700 folder, as
    ``mktemp -d`` makes, is no place another user can run it from)."""
    with tempfile.TemporaryDirectory() as where:
        os.chmod(where, 0o755)
        copy = Path(where) / "scripts" / "test"
        copy.parent.mkdir(mode=0o755)
        shutil.copy(SCRIPT, copy)
        os.chmod(copy, 0o755)
        done = subprocess.run([*prefix, "bash", str(copy), *args], capture_output=True, text=True, timeout=60,
                              env=env, stdin=subprocess.DEVNULL, cwd=where)
        return done.returncode, done.stderr


NOBODY = [shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_without_root_it_says_so_and_stops():
    assert os.geteuid() == 0, "the suite runs as root (scripts/test checks it)"
    code, err = run(NOBODY)
    assert code == 1
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
    code, err = run([shutil.which("unshare") or "unshare", "-n"], env=env)
    assert code == 1, err
    assert err.startswith("scripts/test: needs the network to install ") and "docker-registry" in err, err
    assert "cannot be reached" in err


def test_no_root_asked_for_installs_nothing_and_names_what_is_missing():
    """Without root and with ``--no-root``: no "needs root", no apt-get; a missing package (here
    docker-registry, kept off PATH) is named with the command that installs it, and containerd,
    whose tests it leaves out, is not asked for."""
    with tempfile.TemporaryDirectory() as where:  # a folder nobody may read
        os.chmod(where, 0o755)
        tools = Path(where) / "bin"
        tools.mkdir(mode=0o755)
        for name in ("bash", "id", "dirname", "grep", "sort", "timeout", "cat"):
            found = shutil.which(name)
            assert found, name
            (tools / name).symlink_to(found)
        code, err = run(NOBODY, env={"PATH": str(tools), "HOME": where}, args=("--no-root",))
    assert code == 1, err
    lines = err.splitlines()
    assert lines[0] == ("scripts/test --no-root: no apt-get; the tests that start a private containerd "
                        "(root only) are left out"), err
    assert lines[1].startswith("scripts/test: --no-root installs nothing, and these are missing: "
                               "sudo apt-get install docker-registry "), err
    assert "containerd" not in lines[1] and len(lines) == 2, err


def test_no_root_leaves_out_the_containerd_tests_by_name_and_nothing_else():
    """What ``--no-root`` sets: the tests whose fixtures start containerd are deselected (counted
    in pytest's summary, said in its header); the registry and podman tests stay."""
    files = ["tests/k8s/test_k8s_runtimes.py", "tests/kinds/test_bundle_airgap.py"]
    root = SCRIPT.parents[1]

    def collected(**extra: str) -> tuple[set[str], str]:
        env = {**os.environ, **extra}
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                               *files], capture_output=True, text=True, timeout=300, env=env, cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
        return {line for line in done.stdout.splitlines() if "::" in line}, done.stdout

    everything, _ = collected()
    light, said = collected(OCIBRIDGE_TEST_NO_ROOT="1")
    left_out = everything - light
    assert left_out and light < everything
    assert all(line.startswith("tests/k8s/test_k8s_runtimes.py::") for line in left_out), left_out
    assert any(line.startswith("tests/kinds/test_bundle_airgap.py::") for line in light)  # a registry test kept
    assert f"({len(left_out)} deselected)" in said, said
