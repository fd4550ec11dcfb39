"""``pull --include GLOB --exclude GLOB``: which model paths a partial pull brings back.

A glob matches a path when it matches the whole path (``weights/*.bin``) or its base name
(``*.json``), as push's ``--kind`` and ``--exclude`` do. A path is selected when it matches
some ``--include`` (or none is given) and no ``--exclude``. ``fnmatch``'s ``*`` crosses ``/``.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PathFilter:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> PathFilter | None:
        """None when nothing is filtered, so callers keep their fast path."""
        if not include and not exclude:
            return None
        return cls(tuple(include), tuple(exclude))

    def __call__(self, path: str) -> bool:
        if self.include and not any(_matches(path, g) for g in self.include):
            return False
        return not any(_matches(path, g) for g in self.exclude)


def _matches(path: str, glob: str) -> bool:
    glob = glob.rstrip("/")
    if fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(posixpath.basename(path), glob):
        return True
    return path.startswith(glob + "/")  # a directory name selects what is under it
