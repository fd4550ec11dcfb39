"""``ocibridge.mount``: a registry model as a read-only directory, read lazily and verified
(docs/mount.md).

The model is opened as ``open_model`` opens it (policy, ``verify`` keys, credentials: as for
pull), with the model cache for everything it reads (chunks, and blobs read whole), so a later
mount or ``path`` of the same model fetches nothing again. :func:`mount` serves it from a
thread of this process; :func:`mount_detached` runs ``ocibridge mount … --foreground`` as a
process of its own (what ``ocibridge mount`` does without ``--foreground``); :func:`unmount`
ends either.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ocibridge.api.lazy_ops import LazyModel, open_model
from ocibridge.api.options import TransferOptions
from ocibridge.api.policy import Verification
from ocibridge.errors import OcibridgeError
from ocibridge.kinds.locate import Locator
from ocibridge.lazymount.build import Scratch, build_tree
from ocibridge.lazymount.ops import ModelFS
from ocibridge.lazymount.session import MountSession, fuse_binding
from ocibridge.lazymount.table import is_mounted, unmount_directory
from ocibridge.lazymount.tree import LazyFile
from ocibridge.lazyread.model import Warn, warn_stderr

#: how often a detached mount's parent looks whether the directory is mounted yet
_POLL_SECONDS = 0.02


class _ModelReads:
    """The lazy files' bytes, from the model's shared verified readers."""

    def __init__(self, model: LazyModel):
        self.model = model

    def read_file(self, file: LazyFile, start: int, end: int) -> bytes:
        return self.model.open(file.key).read(start, end)


class Mounted:
    """A model mounted at ``directory`` by this process (``digest``: the manifest it shows).
    ``unmount()`` (or leaving a ``with``) ends it; ``wait()`` waits for an unmount from
    elsewhere (``ocibridge umount``), or Ctrl-C."""

    def __init__(self, model: LazyModel, session: MountSession, scratch: Scratch):
        self.model = model
        self.directory = session.directory
        self.digest = model.descriptor.digest
        self._session = session
        self._scratch = scratch

    @property
    def bytes_fetched(self) -> int:
        """Bytes of the model's files received from the registry by this mount so far."""
        return self.model.bytes_fetched

    def wait(self) -> None:
        self._session.wait()
        self._close()

    def unmount(self) -> None:
        self._session.unmount()
        self._close()

    def _close(self) -> None:
        self.model.close()
        self._scratch.remove()

    def __enter__(self) -> Mounted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()


def mount(ref: str | Locator, directory: str | os.PathLike[str], *, transfer: TransferOptions | None = None,
          verify: Verification | None = None, allow_other: bool = False, warn: Warn | None = warn_stderr) -> Mounted:
    """Mount model ``ref`` read-only at ``directory`` (an empty directory) and return once it
    answers: the files as ``pull`` writes them, each read fetching only the chunks it needs,
    every byte verified before a program sees it (else EIO, and ``warn`` names the file).
    ``verify``, ``transfer``: as for pull. ``allow_other``: other users may read it (FUSE's
    ``allow_other``). The FUSE loop runs on a thread of this process."""
    fuse_binding()  # before the registry is asked: without the binding nothing can be mounted
    where = Path(directory)
    if is_mounted(where):
        raise OcibridgeError(f"{where} is a mount point already (ocibridge umount {where})")
    model = open_model(ref, transfer=transfer, verify=verify, warn=warn, keep_blobs=True)
    scratch = Scratch()
    try:
        report = warn or warn_stderr
        ops = ModelFS(build_tree(model, scratch), _ModelReads(model), lambda line: report(f"mount: {line}"))
        session = MountSession(ops, where, allow_other=allow_other)
        session.start()
        _stderr_handed_back()
    except BaseException:
        model.close()
        scratch.remove()
        raise
    return Mounted(model, session, scratch)


#: the environment variable naming the descriptor of the detached mount's own stderr (its
#: stderr is a pipe to the command that started it until the mount is there)
STDERR_FD_ENV = "OCIBRIDGE_MOUNT_STDERR_FD"
_ERROR = "ocibridge: error: "


def mount_detached(args: Sequence[str], directory: str | os.PathLike[str]) -> int:
    """Run ``ocibridge mount ARGS --foreground`` as a process of its own (its own session: a
    Ctrl-C in this terminal does not reach it), and return its pid once ``directory`` is
    mounted. Until then its stderr comes here: what it says is said here, and its error is
    this call's (one line); after, it writes to this stderr itself (what it cannot read, say).
    ``ocibridge umount DIRECTORY`` ends it."""
    where = Path(directory)
    if is_mounted(where):
        raise OcibridgeError(f"{where} is a mount point already (ocibridge umount {where})")
    said: list[str] = []
    read_end, write_end = os.pipe()
    own = os.dup(sys.stderr.fileno())
    try:
        child = subprocess.Popen([sys.executable, "-m", "ocibridge", "mount", *args, "--foreground"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=write_end,
                                 pass_fds=(own,), env={**os.environ, STDERR_FD_ENV: str(own)},
                                 start_new_session=True)
    finally:
        os.close(write_end)
        os.close(own)
    listener = threading.Thread(target=_collect, args=(read_end, said), daemon=True)
    listener.start()
    while child.poll() is None:
        if is_mounted(where):
            listener.join(5)  # the child hands its stderr over as soon as it is mounted
            _say(said)
            return child.pid
        time.sleep(_POLL_SECONDS)
    listener.join()
    error = next((line for line in reversed(said) if line.startswith(_ERROR)), None)
    _say([line for line in said if line is not error])
    if error is None:
        raise OcibridgeError(f"the mount process ended (exit {child.returncode}) before {where} was mounted")
    raise OcibridgeError(error.removeprefix(_ERROR))


def _collect(fd: int, lines: list[str]) -> None:
    with os.fdopen(fd, "r", errors="replace") as stream:
        lines.extend(line.rstrip("\n") for line in stream)


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _stderr_handed_back() -> None:
    """In a detached mount, once mounted: stderr becomes the starting command's own again."""
    fd = os.environ.pop(STDERR_FD_ENV, None)
    if fd is not None and fd.isdigit():
        sys.stderr.flush()
        os.dup2(int(fd), sys.stderr.fileno())
        os.close(int(fd))

def unmount(directory: str | os.PathLike[str]) -> None:
    """Unmount a mount of ``ocibridge mount`` (``fusermount3 -u``); its process then ends."""
    where = Path(directory)
    if not is_mounted(where):
        raise OcibridgeError(f"{where} is not mounted")
    unmount_directory(where)
