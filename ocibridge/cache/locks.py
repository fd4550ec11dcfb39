"""File locks of the model cache: processes that resolve the same blob or snapshot wait for
each other instead of downloading or building twice; ``prune`` waits for every build."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ocibridge.core.lockfile import flocked_file


@contextlib.contextmanager
def flocked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an ``flock`` on ``path`` (created) for the block. Each call opens its own file, so
    two threads of one process exclude each other as two processes do."""
    with flocked_file(path, shared=shared):  # created inside its directory, never through a link
        yield
