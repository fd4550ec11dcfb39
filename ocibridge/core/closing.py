"""``with x:`` for every class that holds something to release (a file, a connection pool, a
lease): one mixin instead of the same ``__enter__``/``__exit__`` pair written in each."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_Self = TypeVar("_Self", bound="ClosesOnExit")


class ClosesOnExit:
    """The end of a ``with`` block closes the object, whatever ended it."""

    close: Callable[[], None]  # each class's own; declared here only so the mixin can call it

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
