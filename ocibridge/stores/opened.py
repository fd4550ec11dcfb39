"""The stores an API call (or a command) opened, closed when it ends: a context of its own,
standard library only, so a command that opens no store (a warm ``path``) pays no import for it."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

#: The stores opened by the call running in this context (None: outside any).
_OPENED: ContextVar[list[object] | None] = ContextVar("ocibridge_opened_stores", default=None)

_Call = TypeVar("_Call", bound=Callable[..., Any])


@contextlib.contextmanager
def closing_opened_stores() -> Iterator[None]:
    """Every store opened in the block (:func:`remember`, however deep) is closed at its end,
    whatever happens: a call leaves no connection pool behind."""
    opened: list[object] = []
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)
        if opened:
            from ocibridge.stores.base import close_store

            for store in reversed(opened):
                close_store(store)


def closes_its_stores(call: _Call) -> _Call:
    """An API function whose result is data: the stores it opens are closed when it returns."""

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        with closing_opened_stores():
            return call(*args, **kwargs)

    return run  # type: ignore[return-value]  # same signature, wrapped


def remember(store: object) -> None:
    """A store was opened: closed with the innermost :func:`closing_opened_stores` block."""
    opened = _OPENED.get()
    if opened is not None:
        opened.append(store)
