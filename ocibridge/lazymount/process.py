"""A mount served by a process of its own, and how that process is started and hears its task.

Why a process: the file system's answers are Python, and Python runs one thread at a time. A
program that reads a mount served by its own process with the interpreter lock held (a page
of an ``mmap`` touched by safetensors' Rust code, a ``numpy.memmap`` copy) waits for an answer
that waits for that lock: measured, such a process hung for good. So ``ocibridge.mount``
starts ``python -m <module>`` in a session of its own (a Ctrl-C in the caller's terminal does
not reach it; it outlives the caller, as a detached mount must), hands it the request on its
stdin (pickled: options, public keys as PEM), and returns once the directory is mounted.

Until then the process's stderr is a pipe back to the caller: what it says there is said by the
caller, and its error is the caller's (one line, not two). Once mounted it writes to the
caller's stderr itself (what it could not read, and why), through a descriptor handed over,
when that is a terminal or a file; a pipe it would hold open for as long as it runs (``$(…
2>&1)`` would wait for the unmount), so then it says nothing more (the reads still fail, EIO).
"""

from __future__ import annotations

import io
import os
import pickle
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocibridge.core.environment import MOUNT_STDERR_FD
from ocibridge.errors import OcibridgeError
from ocibridge.lazymount.mounttable import is_mounted, refuse_a_mount_point

#: the environment variable naming the descriptor of the caller's stderr in the mount process
STDERR_FD_ENV = MOUNT_STDERR_FD
#: how often the caller looks whether the directory is mounted yet
POLL_SECONDS = 0.02
_ERROR = "ocibridge: error: "


class _Pickler(pickle.Pickler):
    """Public keys (cryptography's objects do not pickle) travel as PEM."""

    def reducer_override(self, obj: Any) -> Any:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

        if isinstance(obj, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey, ed25519.Ed25519PublicKey,
                            ed448.Ed448PublicKey)):
            pem = obj.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            return public_key, (pem,)
        return NotImplemented


def public_key(pem: bytes) -> object:
    """A public key again, in the mount process (cryptography's loader is not picklable by name)."""
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(pem)


def _pickled(request: object) -> bytes:
    out = io.BytesIO()
    try:
        _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(request)
    except (pickle.PicklingError, TypeError) as e:
        raise OcibridgeError(f"these options cannot be handed to a mount process ({e})") from None
    return out.getvalue()


def start(command: Sequence[str], request: object, directory: Path) -> subprocess.Popen[bytes]:
    """Run ``command`` (which calls :func:`read_request`) with ``request``; return it once
    ``directory`` is mounted, or raise its error."""
    refuse_a_mount_point(directory)
    data = _pickled(request)
    said: list[str] = []
    read_end, write_end = os.pipe()
    own = os.dup(sys.stderr.fileno()) if _lasting(sys.stderr.fileno()) else -1
    try:
        child = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=write_end,
                                 pass_fds=(own,) if own >= 0 else (), env={**os.environ, STDERR_FD_ENV: str(own)},
                                 start_new_session=True)
    finally:
        os.close(write_end)
        if own >= 0:
            os.close(own)
    listener = threading.Thread(target=_collect, args=(read_end, said), daemon=True)
    listener.start()
    assert child.stdin is not None
    with child.stdin:
        child.stdin.write(data)
    while child.poll() is None:
        if is_mounted(directory):
            listener.join(5)  # it hands its stderr over as soon as it is mounted
            _say(said)
            return child
        time.sleep(POLL_SECONDS)
    listener.join()
    error = next((line for line in reversed(said) if line.startswith(_ERROR)), None)
    _say([line for line in said if line is not error])
    if error is None:
        raise OcibridgeError(f"the mount process ended (exit {child.returncode}) before {directory} was mounted")
    raise OcibridgeError(error.removeprefix(_ERROR))


def _lasting(fd: int) -> bool:
    """Whether a process may keep writing to ``fd`` for as long as it runs: a terminal or a file
    (not a pipe or a socket, whose reader waits for every writer to close it)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISCHR(mode)  # (a terminal is a character device, as /dev/null)


def _collect(fd: int, lines: list[str]) -> None:
    with os.fdopen(fd, "r", errors="replace") as stream:
        lines.extend(line.rstrip("\n") for line in stream)


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def read_request() -> Any:
    """In the mount process: what :func:`start` sent (the caller's own trusted bytes)."""
    return pickle.loads(sys.stdin.buffer.read())  # noqa: S301  # from the process that started this one


def stderr_handed_back() -> None:
    """In the mount process, once mounted: stderr becomes the caller's own, or /dev/null when
    the caller gave none (the pipe back to it is closed either way)."""
    fd = os.environ.pop(STDERR_FD_ENV, None)
    if fd is None:
        return  # not started by start(): stderr is whatever it was given
    sys.stderr.flush()
    given = int(fd) if fd.isdigit() else os.open(os.devnull, os.O_WRONLY)
    os.dup2(given, sys.stderr.fileno())
    os.close(given)
