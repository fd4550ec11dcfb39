"""What serve does before it answers: bind its address itself (a port in use is one error line
and exit 1, not uvicorn's ``ERROR: [Errno 98]`` and exit 3), say in one line what it serves and
how, and warn when the first source -- where new repositories go and the first one searched --
does not answer (serve still starts: the registry may come up later, and ``/readyz`` says so)."""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable, Sequence

from ocibridge.errors import OcibridgeError

log = logging.getLogger("ocibridge.serve")

#: why a bind failed, in the words a user acts on
_BIND_FAILURES = {
    errno.EADDRINUSE: "address already in use (another process listens there; pick another --listen)",
    errno.EADDRNOTAVAIL: "no interface of this machine has that address",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket at ``host:port``; an OcibridgeError naming ``--listen`` when it
    cannot be had."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as e:
        raise OcibridgeError(f"--listen {shown}: {e.strerror or e}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart over TIME_WAIT, as uvicorn
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        reason = _BIND_FAILURES.get(e.errno or 0, e.strerror or str(e))
        raise OcibridgeError(f"--listen {shown}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def banner(sources: Sequence[str], url: str, *, writes: bool, tokens: bool, writer: str | None,
           standing_by: str | None = None) -> str:
    """The one line serve starts with: what it serves, where, and who may do what
    (``standing_by``: why writes are refused here, another serve holding the writer lease)."""
    if writer is not None:
        mode = f"reads here, writes sent to {writer}"
    elif writes and standing_by:
        mode = standing_by
    else:
        mode = "writes on (write tokens publish)" if writes else "read-only"
    access = "tokens required" if tokens else "open (no --token-file: anyone who reaches it reads)"
    return f"serving the Hugging Face Hub API of {', '.join(sources)} at {url}; {mode}; {access}"


def warn_when_silent(shown: str, check: Callable[[], None]) -> threading.Thread:
    """Check the first source in the background (a registry's retries must not delay the start)
    and warn once when it does not answer."""

    def run() -> None:
        try:
            check()
        except Exception as e:  # noqa: BLE001 - any failure of the check is what the warning reports
            log.warning("warning: the first source %s does not answer: %s", shown, _one_line(e))

    thread = threading.Thread(target=run, name="first-source-check", daemon=True)
    thread.start()
    return thread


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
