"""serve's audit trail (``--audit-log FILE``, ``-`` for stdout): every write asked of serve is
one JSON line, whether it landed or was refused, so that who changed which repository, and who
tried, can be told afterwards without the registry's own logs.

A line holds ``time`` (UTC, ISO 8601), ``action`` (``create_repo``, ``commit``, ``create_branch``,
``create_tag``, ``delete_repo``, ``delete_branch``, ``delete_tag``), ``outcome`` (``landed``;
``refused``: a 4xx; ``failed``: a 5xx, the registry's or serve's),
``status`` (the HTTP answer), ``token`` (the token's name, never the token; null when none
serve knows was sent), ``repository``, ``revision``; a landed commit adds ``commit`` (its id),
``digest`` (its manifest), ``added`` and ``removed`` (paths), and ``bytes_received`` (the bytes of
the files it adds that its branch did not hold); a refusal adds ``reason`` (what the client was
told). Uploads (LFS, Xet) land nothing until a commit names them: their first requests
(``preupload``, ``lfs_batch``, ``xet_write_token``) are lines only when refused.

Each line is one ``write`` to a descriptor opened with ``O_APPEND``, under a lock: lines of
threads and of several serve processes sharing the file never interleave.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ocibridge.errors import UsageError
from ocibridge.hubserver.access import grant_of
from ocibridge.hubserver.answers import error
from ocibridge.hubserver.repo.committing import Landed
from ocibridge.hubserver.repo.reponames import key_of
from ocibridge.kinds.hf.repotype import MODEL

Handler = Callable[[Request], Awaitable[Response]]
#: where a route leaves what its write did, in the request's scope
NOTE = "ocibridge.audit"


def note(request: Request, **facts: Any) -> None:
    """Facts of the write the request made (a repository named in the body, a commit landed)."""
    request.scope.setdefault(NOTE, {}).update(facts)


def noted(request: Request, landed: Landed) -> None:
    note(request, **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(landed).items()})


#: line breaks json.dumps leaves as they are (outside ASCII), escaped: a name holding one (a branch
#: may) would end the line for str.splitlines and JSON-lines readers
_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class AuditLog:
    """The audit file (``-``: stdout; None: no audit), appended one line at a time."""

    def __init__(self, where: str | None):
        self.where = where
        self._lock = threading.Lock()
        self._fd: int | None = None
        if where == "-":
            self._fd = 1
        elif where:
            try:
                self._fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            except OSError as e:
                raise UsageError(f"--audit-log {where}: {e.strerror or e}") from None

    def close(self) -> None:
        if self._fd is not None and self._fd != 1:
            os.close(self._fd)
        self._fd = None

    def record(self, entry: dict[str, Any]) -> None:
        """``entry`` as one line, in one write (the rest written after a short write)."""
        if self._fd is None:
            return
        data = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")).translate(_BREAKS) + "\n").encode()
        with self._lock:
            while data:
                data = data[os.write(self._fd, data):]

    def audited(self, action: str, answer: Handler, *, refusals_only: bool = False) -> Handler:
        """``answer`` (a write route, its access already checked inside), each call recorded;
        ``refusals_only``: a route that starts a write (an upload's first request), whose
        refusal is a write refused but whose success lands nothing yet."""
        if self._fd is None:
            return answer

        async def endpoint(request: Request) -> Response:
            try:
                response = await answer(request)
            except Exception:
                self.record(entry(action, request, error(500, None, "serve failed: see its log")))
                raise
            if response.status_code >= 400 or not refusals_only:
                self.record(entry(action, request, response))
            return response

        return endpoint


def entry(action: str, request: Request, response: Response) -> dict[str, Any]:
    """The audit line of one write request and its answer."""
    facts: dict[str, Any] = dict(request.scope.get(NOTE, {}))
    params = request.path_params
    repo = facts.pop("repository", None)
    if repo is None and "name" in params:  # its key (repo/reponames.py): a dataset's is datasets/ORG/NAME
        repo = key_of(str(params.get("repo_type", MODEL)), f"{params['org']}/{params['name']}"
                      if "org" in params else str(params["name"]))
    grant = grant_of(request)
    status = response.status_code
    line: dict[str, Any] = {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
        "action": action.replace("{kind}", str(params.get("kind", ""))),
        "outcome": "landed" if status < 400 else "refused" if status < 500 else "failed", "status": status,
        "token": grant.name if grant is not None else None, "repository": repo,
        "revision": facts.pop("revision", None) or params.get("revision") or params.get("ref"),
    }
    if status >= 400:
        line["reason"] = response.headers.get("x-error-message", "")
    line.update(facts)
    return line
