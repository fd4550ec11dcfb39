"""bench/vm/fresh_guest.sh, the fresh KVM guest for bench.fresh_vm: what can be checked without KVM.
Its scripts parse, its help names its options, and a host lacking QEMU or given a wrong argument
gets one line saying what to do, not a guest half started."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

VM = Path(__file__).resolve().parents[2] / "bench" / "vm"
HOST = VM / "fresh_guest.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(HOST), *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("script", ["fresh_guest.sh", "guest_init.sh"])
def test_the_bash_scripts_parse(script: str) -> None:
    done = subprocess.run(["bash", "-n", str(VM / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_initramfs_init_parses_as_a_posix_shell() -> None:
    shell = shutil.which("busybox") or shutil.which("dash") or "sh"
    argv = [shell, "sh", "-n"] if shell.endswith("busybox") else [shell, "-n"]
    done = subprocess.run([*argv, str(VM / "initramfs_init.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_help_names_every_option() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    for option in ("--cpus", "--mem", "--disk", "--disk-dir", "--again-after", "--out", "--kernel", "--timeout",
                   "--accel", "--write"):
        assert option in done.stdout


def test_bench_fresh_vm_own_write_is_refused_with_why() -> None:
    done = run("--", "--size", "64", "--write")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "fresh_guest.sh: --write goes before --: bench.fresh_vm's own would write into the guest's memory"]


@pytest.mark.parametrize(("args", "line"), [
    (["--again-after", "soon"], "fresh_guest.sh: --again-after soon: minutes, a number"),
    (["--timeout", "1.5"], "fresh_guest.sh: --timeout 1.5: whole minutes"),
])
def test_a_wrong_figure_is_refused_before_anything_starts(args: list[str], line: str) -> None:
    done = run(*args, "--", "--size", "64")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [line]


def test_an_unknown_argument_is_one_line_and_exit_2() -> None:
    done = run("--nonsense")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["fresh_guest.sh: unknown argument --nonsense (see --help)"]


def test_no_qemu_says_what_to_install(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname",):  # what the script needs before it looks for QEMU
        found = shutil.which(tool)
        assert found is not None
        os.symlink(found, bin_dir / tool)
    done = run("--", "--size", "64", env={**os.environ, "PATH": str(bin_dir)})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "fresh_guest.sh: no qemu-system-x86_64: apt-get install qemu-system-x86"]
