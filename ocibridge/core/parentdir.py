"""A destination the user names is made only inside a directory that exists, as ``cp``,
``oras`` and ``skopeo`` make theirs: a mistyped ``/nonexistent/deep/dir`` is one error line,
not a tree made from the filesystem's root. The stores ocibridge keeps for itself (the local
store, the caches) make their own parents."""

from __future__ import annotations

import os
from pathlib import Path

from ocibridge.errors import OcibridgeError


def parent_must_exist(path: str | os.PathLike[str], named: str) -> None:
    """Nothing when ``path`` exists or its parent is a directory; else the error naming that
    parent (``named``: the destination as the user wrote it)."""
    target = Path(os.path.expanduser(path))
    if target.exists() or target.is_symlink():
        return
    parent = target.parent
    if parent.is_dir():
        return
    raise OcibridgeError(f"{named}: no such directory {parent} to make {target.name} in "
                         f"(create it first: mkdir -p {parent})")
