"""The FUSE delivery floor: what a ``cat`` through ``ocibridge mount`` cannot go below on this
machine, with no registry, no fill and no verification in it.

``ocibridge mount``'s own machinery (``lazymount``: the binding, its options and threads, the
raised read-ahead, the kept reply buffers, ``ModelFS.read_buf``) serves a directory of local
files, every read answered by descriptor as the mount answers verified bytes of a filled layer
file (``replies.file_reply``: libfuse reads them itself, in C). The files' pages are read once
before (the fill's bytes are in the page cache as it answers them); each mount is fresh, so the
kernel's copy of the file under the mount starts empty, as a cold mount's does, and is let go
behind a whole read as the mount's is (``lazymount.kernelcopy``).

    python -m bench.fusefloor SRC_DIR MOUNT_DIR     # serves SRC_DIR at MOUNT_DIR until unmounted

``Floor(src, where).cat(name)``: a fresh mount, the seconds of a ``cat`` of one file, the unmount;
``cat(name, beside=pull)``: the seconds until the cat and a pull run at the same time both ended,
the fill's work and delivery's with nothing coupling them: on two cores they share the CPUs, as
the mount's fill and answers do.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ocibridge.lazymount.fuseloop import MountSession
from ocibridge.lazymount.mounttable import unmount_directory
from ocibridge.lazymount.ops import ModelFS
from ocibridge.lazymount.tree import LazyFile, MountTree

MOUNTED = "mounted"


class NoLazyFiles:
    """The reads of lazy files: a floor's tree has none (every file is local)."""

    def read_file(self, file: LazyFile, start: int, end: int) -> bytes:
        raise AssertionError("a floor mount has no lazy file")

    def read_into(self, file: LazyFile, start: int, end: int, into: memoryview) -> None:
        raise AssertionError("a floor mount has no lazy file")

    def stable_fd(self, file: LazyFile, start: int, end: int) -> int | None:
        raise AssertionError("a floor mount has no lazy file")


def serve(src: Path, where: Path) -> None:
    """Serve ``src``'s files at ``where`` until unmounted (say ``MOUNTED`` once it answers)."""
    tree = MountTree()
    tree.add_unpacked(src)
    session = MountSession(ModelFS(tree, NoLazyFiles(), lambda line: print(line, file=sys.stderr)), where)
    session.start()
    print(MOUNTED, flush=True)
    session.wait()


class Floor:
    """``src`` served by a process of its own (as the mount is) at ``where``, one mount a sample."""

    def __init__(self, src: Path, where: Path, env: dict[str, str] | None = None):
        self.src, self.where, self.env = src, where, env

    def cat(self, name: str, beside: Callable[[], None] | None = None) -> float:
        """Seconds of ``cat where/name > /dev/null`` through a fresh mount (the source read first);
        with ``beside``: run at the same time, on another thread, the seconds until both ended."""
        subprocess.run(["cat", str(self.src / name)], stdout=subprocess.DEVNULL, check=True)
        self.where.mkdir(exist_ok=True)
        server = subprocess.Popen([sys.executable, "-m", "bench.fusefloor", str(self.src), str(self.where)],
                                  stdout=subprocess.PIPE, text=True, env=self.env,
                                  cwd=Path(__file__).resolve().parents[1])
        try:
            assert server.stdout is not None
            if server.stdout.readline().strip() != MOUNTED:
                raise SystemExit(f"the floor's mount did not start (exit {server.wait()})")
            with ThreadPoolExecutor(1) as other:
                t = time.perf_counter()
                running = other.submit(beside) if beside is not None else None
                subprocess.run(["cat", str(self.where / name)], stdout=subprocess.DEVNULL, check=True)
                if running is not None:
                    running.result()
                return time.perf_counter() - t
        finally:
            if server.poll() is None:
                unmount_directory(self.where)
            server.wait()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m bench.fusefloor SRC_DIR MOUNT_DIR")
    serve(Path(args[0]), Path(args[1]))


if __name__ == "__main__":
    main()
