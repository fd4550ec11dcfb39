"""One reading of an argument that takes several texts (tags, models, files, keys, globs): one
given alone is one item, never its letters. A str is a ``Sequence[str]`` to Python and to mypy,
so ``tag(ref, "v2")`` type-checks, and read as a sequence it tagged 'v' and '2'. Standard
library only."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeVar, cast

_Text = TypeVar("_Text", bound="str | os.PathLike[str]")


def one_or_many(value: _Text | Iterable[_Text]) -> tuple[_Text, ...]:
    """``value`` as a tuple of items: a text (or a path) alone is one item."""
    if isinstance(value, (str, os.PathLike)):
        return (cast(_Text, value),)
    return tuple(value)
