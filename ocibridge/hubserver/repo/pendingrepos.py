"""Repositories ``create_repo`` made that no commit has reached yet. The Hub makes a
first commit at once (a ``.gitattributes``); serve writes nothing to the registry until the first
commit, so that a repository holds exactly the files its commits sent. Until then the repository
is a marker file in serve's cache, not a set in memory: a serve restarted between
``create_repo`` and the first upload, or another replica sharing the cache volume, still knows it.

    $OCIBRIDGE_CACHE/serve/created/<repo id, lowercased and %-quoted>
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import quote


class CreatedRepos:
    """The markers under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _marker(self, repo_id: str) -> Path:
        return self.root / quote(repo_id.lower(), safe="")

    def add(self, repo_id: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._marker(repo_id).touch()

    def has(self, repo_id: str) -> bool:
        return self._marker(repo_id).is_file()

    def discard(self, repo_id: str) -> None:
        """The first commit has landed: the registry knows the repository now."""
        with contextlib.suppress(OSError):
            self._marker(repo_id).unlink(missing_ok=True)
