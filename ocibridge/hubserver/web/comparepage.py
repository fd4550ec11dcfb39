"""One page of a compare page's tensors: a diff of 200,000 changed tensors is laid out
:data:`TENSORS_SHOWN` at a time (``?tensors=FIRST``), not as one page of tens of megabytes.

The tensors of every file are counted in file order; a page shows those from FIRST on, and links
the pages before and after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.lazyread.diff import ModelDiff, TensorChange

#: tensors laid out on one page
TENSORS_SHOWN = 500


@dataclass(frozen=True)
class TensorRows:
    """The tensors a page shows, by file path; ``first``: the number of the first (from 0) of
    ``total``; ``previous``/``next``: where the pages around it start (None: there is none)."""

    first: int = 0
    total: int = 0
    by_file: dict[str, tuple[TensorChange, ...]] = field(default_factory=dict)
    previous: int | None = None
    next: int | None = None

    @property
    def last(self) -> int:
        return min(self.first + TENSORS_SHOWN, self.total)


def tensor_page(diff: ModelDiff | None, asked: str | None) -> TensorRows:
    """The page of ``diff``'s tensors starting at ``asked`` (a number; anything else, or past
    the end: the first page)."""
    if diff is None:
        return TensorRows()
    total = sum(len(f.tensors or ()) for f in diff.files)
    first = int(asked) if asked is not None and asked.isdigit() and len(asked) < 12 else 0
    if first >= total:
        first = 0
    by_file: dict[str, tuple[TensorChange, ...]] = {}
    at = 0
    for f in diff.files:
        tensors = f.tensors or ()
        lo, hi = max(first - at, 0), min(first + TENSORS_SHOWN - at, len(tensors))
        if lo < hi:
            by_file[f.path] = tensors[lo:hi]
        at += len(tensors)
    return TensorRows(first, total, by_file, max(first - TENSORS_SHOWN, 0) if first else None,
                      first + TENSORS_SHOWN if first + TENSORS_SHOWN < total else None)
