"""Which repositories uploaded a staged file (issue 55): :class:`.staging.Staging` keeps one copy
of a file by its SHA-256 whichever repository it was uploaded for, so without this a write
token of one repository could commit a file another repository's writer uploaded and never
committed, only by naming its SHA-256. The Hub's rule is kept instead: a commit may name content
its repository's writers uploaded, or content they can read (a file of the branch, or a blob of
another repository of the registry: :mod:`.mounts`).

    <staging root>/owners/<sha256>/<repo id, lowercased, %-quoted>   empty: an upload for it

Files, not memory, so an upload made before a restart still counts for the commit after it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote

_HEX64 = re.compile(r"[0-9a-f]{64}")


class Owners:
    """The repositories each staged SHA-256 was uploaded for (the module's docstring)."""

    def __init__(self, staging_root: Path):
        self.root = staging_root / "owners"

    def _dir(self, sha256: str) -> Path | None:
        return self.root / sha256 if _HEX64.fullmatch(sha256) else None

    def add(self, repo_id: str, sha256: str) -> None:
        """``sha256`` was uploaded (and verified) for ``repo_id``."""
        where = self._dir(sha256)
        if where is None:
            return
        where.mkdir(parents=True, exist_ok=True)
        (where / quote(repo_id.lower(), safe="")).touch()

    def has(self, repo_id: str, sha256: str) -> bool:
        """Whether ``sha256`` was uploaded for ``repo_id``."""
        where = self._dir(sha256)
        return where is not None and (where / quote(repo_id.lower(), safe="")).is_file()

    def any(self, sha256: str, may: Callable[[str], bool]) -> bool:
        """Whether ``sha256`` was uploaded for a repository ``may(repo_id)`` accepts."""
        where = self._dir(sha256)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            return any(may(unquote(entry.name)) for entry in where.iterdir()) if where is not None else False
        return False
