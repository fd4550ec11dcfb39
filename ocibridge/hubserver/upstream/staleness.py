"""An answer given from a branch's last fetched head because the upstream could not be asked says
so: ``Warning: 110 - "Response is Stale: ..."`` (RFC 7234's stale warning), so a client
or an operator can tell a proxy that is cut off from its upstream from one that is current.

The proxy's catalog notes it (:func:`note_stale`) while it resolves; this ASGI middleware gives
each HTTP request a place for that note and writes the header on its answer."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from starlette.types import Scope

from ocibridge.hubserver.answerheader import AnswerHeader

HEADER = b"warning"
_noted: ContextVar[list[str] | None] = ContextVar("ocibridge_upstream_stale", default=None)


def note_stale(what: str) -> None:
    """The request being answered is answered stale: ``what`` (a revision, and why) goes in its
    Warning header. Outside a request (no place for it): nothing."""
    noted = _noted.get()
    if noted is not None and what not in noted:
        noted.append(what)


def warning(noted: list[str]) -> bytes:
    """The header's value: one warn-text, quotes and backslashes left out, Latin-1 only."""
    text = "; ".join(noted).replace('"', "'").replace("\\", "/")
    return f'110 - "Response is Stale: {text}"'.encode("latin-1", "replace")


class StaleWarning(AnswerHeader):
    """ASGI middleware: the stale note of each HTTP request, written as its answer's Warning."""

    name = HEADER

    def begin(self, scope: Scope) -> Callable[[], bytes | None]:
        noted: list[str] = []
        _noted.set(noted)  # a list, so a worker thread's copy of the context adds to this very one
        return lambda: warning(noted) if noted else None
