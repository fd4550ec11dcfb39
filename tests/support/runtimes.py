"""Real container runtimes for the image-volume tests: a private containerd and a podman with its
own storage, both pulling from the plain-HTTP test registry on loopback.

Neither touches the machine's own runtime state: containerd gets its own root, state, socket and
config under a temporary directory (no CRI plugin; overlayfs snapshotter, native where overlay is
not available), podman its own --root/--runroot (overlay driver, vfs where overlay is not
available). A runtime that cannot start raises RuntimeUnavailable with the reason; the fixtures
turn that into a test failure, never a skip.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

INSTALL_HINT = "install it with `apt-get install -y containerd podman` (./scripts/test does)"
TIMEOUT = 120
#: podman sets the container's rlimits; a sandbox that may not raise them (even to the values
#: this process has) refuses the defaults: "error setting rlimit type 7: operation not permitted".
#: Lower ones are always allowed.
RUN_FLAGS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


class RuntimeUnavailable(RuntimeError):
    """The runtime binary is missing or the daemon did not start."""


class RuntimeRefused(RuntimeError):
    """The runtime refused to pull or unpack an image (its own error text)."""


#: (type, mode with special bits, uid, gid, symlink target or sha256 of a file's content)
Node = tuple[str, int, int, int, str | None]


def snapshot(root: Path) -> dict[str, Node]:
    """Every path under ``root`` (not ``root`` itself) as the tests compare it: never follows links."""
    out: dict[str, Node] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", 0o777, st.st_uid, st.st_gid, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, st.st_uid, st.st_gid, None)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, st.st_uid, st.st_gid, hashlib.sha256(path.read_bytes()).hexdigest())
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("fifo", mode, st.st_uid, st.st_gid, None)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                kind = "chardev" if stat.S_ISCHR(st.st_mode) else "blockdev"
                out[rel] = (kind, mode, st.st_uid, st.st_gid, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
            else:
                out[rel] = ("other", mode, st.st_uid, st.st_gid, None)
    return out


def _run(args: list[str], what: str, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except FileNotFoundError:
        raise RuntimeUnavailable(f"{args[0]} is not on PATH; {INSTALL_HINT}") from None
    except subprocess.TimeoutExpired:
        raise RuntimeRefused(f"{what}: timed out after {TIMEOUT} s") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["(no output)"]
        raise RuntimeRefused(f"{what}: {lines[-1]}")
    return proc.stdout


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test process dies, however it dies (Linux prctl)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Containerd:
    """A containerd daemon of our own; ``ctr`` talks to it through its private socket."""

    NAMESPACE = "ocibridge-tests"

    def __init__(self, workdir: Path, startup_timeout: float = 20.0) -> None:
        for binary in ("containerd", "ctr"):
            if shutil.which(binary) is None:
                raise RuntimeUnavailable(f"{binary} is not on PATH; {INSTALL_HINT}")
        self.workdir = Path(workdir)
        # a unix socket path must stay under 108 bytes: a short directory of its own
        self._sockdir = Path(tempfile.mkdtemp(prefix="ocb-ctrd-"))
        self.address = str(self._sockdir / "containerd.sock")
        self.config = self.workdir / "config.toml"
        self.log_file = self.workdir / "containerd.log"
        self.config.write_text(
            "version = 2\n"
            f'root = "{self.workdir / "root"}"\n'
            f'state = "{self._sockdir / "state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{self.address}"\n'
            f'[ttrpc]\n  address = "{self.address}.ttrpc"\n'
        )
        with open(self.log_file, "wb") as log:
            self._proc = subprocess.Popen(
                ["containerd", "--config", str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        self._wait(startup_timeout)
        self.snapshotter = self._choose_snapshotter()
        self.version = self.ctr("version").split("Server:")[-1].split("Version:")[1].split()[0]

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_file.read_text(errors="replace").strip().splitlines()[-3:]
                raise RuntimeUnavailable(f"containerd exited with {self._proc.returncode}: {' | '.join(tail)}")
            if os.path.exists(self.address):
                try:
                    self.ctr("version")
                    return
                except RuntimeRefused:
                    pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeUnavailable(f"containerd did not answer on {self.address} within {timeout} s")

    def _choose_snapshotter(self) -> str:
        """overlayfs as on a node; native where overlay cannot be mounted here."""
        for line in self.ctr("plugins", "ls").splitlines():
            cols = line.split()
            if len(cols) >= 4 and cols[0] == "io.containerd.snapshotter.v1" and cols[1] == "overlayfs":
                return "overlayfs" if cols[-1] == "ok" else "native"
        return "native"

    def ctr(self, *args: str) -> str:
        return _run(["ctr", "--address", self.address, "--namespace", self.NAMESPACE, *args],
                    f"ctr {args[0]} {args[1] if len(args) > 1 else ''}".strip())

    def pull(self, reference: str, platform: str = "linux/amd64") -> None:
        """Pull and unpack (plain HTTP: the test registry is on loopback)."""
        self.ctr("image", "pull", "--plain-http", "--snapshotter", self.snapshotter,
                 "--platform", platform, reference)

    @contextmanager
    def mounted(self, reference: str, target: Path, platform: str = "linux/amd64") -> Iterator[Path]:
        """The unpacked image, read-only at ``target``; unmounted (snapshot removed) afterwards."""
        target.mkdir(parents=True, exist_ok=True)
        self.ctr("image", "mount", "--snapshotter", self.snapshotter, "--platform", platform,
                 reference, str(target))
        try:
            yield target
        finally:
            self.ctr("image", "unmount", "--rm", str(target))

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._sockdir, ignore_errors=True)


class Podman:
    """podman with a storage root of its own: the same containers/image and containers/storage
    code CRI-O pulls and unpacks images with."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("podman") is None:
            raise RuntimeUnavailable(f"podman is not on PATH; {INSTALL_HINT}")
        self.workdir = Path(workdir)
        self.driver = "overlay"
        try:
            self.version = self.podman("version", "--format", "{{.Client.Version}}").strip()
            self.podman("info", "--format", "{{.Store.GraphDriverName}}")
        except RuntimeRefused as e:
            self.driver = "vfs"
            try:
                self.podman("info", "--format", "{{.Store.GraphDriverName}}")
            except RuntimeRefused as e2:
                raise RuntimeUnavailable(f"podman cannot start: overlay: {e}; vfs: {e2}") from None

    def podman(self, *args: str) -> str:
        base = ["podman", "--root", str(self.workdir / self.driver / "root"),
                "--runroot", str(self.workdir / self.driver / "run"), "--storage-driver", self.driver,
                "--cgroup-manager", "cgroupfs", "--events-backend", "none"]
        what = f"podman {args[2]} ({args[1]})" if args[0] == "--runtime" and len(args) > 2 else f"podman {args[0]}"
        return _run([*base, *args], what)

    @functools.cached_property
    def runtime(self) -> str:
        """The OCI runtime that runs containers on this host (crun, else runc: support/ociruntime.py),
        chosen by one real run of each candidate, once per session."""
        from support import ociruntime

        rootfs = ociruntime.probe_rootfs(self.workdir)

        def probe(runtime: str) -> str | None:
            try:
                self.podman("--runtime", runtime, "run", *self._run_flags(), "--rootfs", str(rootfs), "/bin/true")
            except RuntimeRefused as e:
                return str(e)
            return None

        try:
            return ociruntime.choose(ociruntime.candidates(ociruntime.cgroup_layout()), probe)
        except RuntimeError as e:
            raise RuntimeUnavailable(f"podman: {e}") from None

    @staticmethod
    def _run_flags() -> tuple[str, ...]:
        return ("--rm", "--network=none", *RUN_FLAGS)

    def run(self, image: str, *command: str) -> str:
        """``podman run --rm --network=none IMAGE COMMAND…`` with the runtime that works here."""
        return self.podman("--runtime", self.runtime, "run", *self._run_flags(), image, *command)

    def pull(self, reference: str, platform: str = "linux/amd64") -> None:
        self.podman("pull", "-q", "--tls-verify=false", "--platform", platform, reference)

    @contextmanager
    def mounted(self, reference: str) -> Iterator[Path]:
        path = Path(self.podman("image", "mount", reference).strip())
        try:
            yield path
        finally:
            self.podman("image", "unmount", reference)

    def stop(self) -> None:
        """Nothing runs between commands; the storage goes with the temporary directory."""
        with suppress(RuntimeRefused):
            self.podman("image", "unmount", "--all")
