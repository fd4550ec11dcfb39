"""What a program running several calls around one run needs: every store opened in it closed
when it ends, the request log of ``--debug``, the kinds of model a push reads (``--help`` names
them), the environment variable that makes every call offline.

Small and light on purpose: the command line's entry point and ``--help`` import it before any
command, so it imports nothing heavier than the standard library at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocibridge.core.environment import OFFLINE as OFFLINE_ENV

if TYPE_CHECKING:
    from ocibridge.stores.opened import closing_opened_stores

__all__ = ["OFFLINE_ENV", "closing_opened_stores", "enable_request_log", "source_kinds"]


def enable_request_log() -> None:
    """Log every registry request on stderr, secrets redacted (what ``--debug`` turns on)."""
    from ocibridge.stores.registry.debuglog import enable_request_log as enable

    enable()


def source_kinds() -> str:
    """The kinds of model ``push`` reads and ``pull`` writes, as the help names them
    (``directory, *.carton, ..., ollama:NAME``)."""
    from ocibridge.kinds.table import source_kinds as kinds

    return kinds()


def __getattr__(name: str) -> Any:
    """``closing_opened_stores`` on first use: ``--help`` reads this module and opens no store."""
    if name == "closing_opened_stores":
        from ocibridge.stores.opened import closing_opened_stores

        return closing_opened_stores
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
