"""Bounds of every walk over a manifest graph: each node once, at most so deep, at most so many.

Referrers and cosign's ``sha256-<hex>`` fallback tags are writable by anyone with push rights
to a repository, so the graph a walk follows is untrusted: a chain of manifests that each list
the next twice is 2^N paths, a fallback tag may point back up the chain (a cycle), and nesting
deeper than Python's stack ends in a RecursionError. A walk keeps a :class:`GraphBound`: a
visited set by digest (linear in distinct nodes) and the two limits below, each failing with
one line (docs/security.md lists them).
"""

from __future__ import annotations

import os
import threading

from ocibridge.core.environment import MAX_GRAPH_DEPTH as ENV_MAX_DEPTH
from ocibridge.core.environment import MAX_GRAPH_NODES as ENV_MAX_NODES
from ocibridge.errors import TooLarge

#: Manifests (index entries, referrers, companion tags) nested below a root.
MAX_GRAPH_DEPTH = 32
#: Distinct manifests one walk visits.
MAX_GRAPH_NODES = 10_000


def _limit(env: str, default: int) -> int:
    """``$env`` when it holds a positive integer, else ``default``."""
    text = os.environ.get(env, "").strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else default


def max_depth() -> int:
    return _limit(ENV_MAX_DEPTH, MAX_GRAPH_DEPTH)


def max_nodes() -> int:
    return _limit(ENV_MAX_NODES, MAX_GRAPH_NODES)


class GraphBound:
    """One walk's memory: which nodes it entered, and its limits (read once, at the start)."""

    def __init__(self, what: str = "manifest graph") -> None:
        self.what = what
        self.depth_limit = max_depth()
        self.node_limit = max_nodes()
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def enter(self, key: str, depth: int) -> bool:
        """Whether ``key`` (a digest) is new to this walk; raises past either limit."""
        if depth > self.depth_limit:
            raise TooLarge(f"{self.what}: nested deeper than {self.depth_limit} manifests below the "
                                f"root (${ENV_MAX_DEPTH} raises the limit)")
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self.node_limit:
                raise TooLarge(f"{self.what}: more than {self.node_limit} manifests "
                                    f"(${ENV_MAX_NODES} raises the limit)")
            self._seen.add(key)
            return True

    def __len__(self) -> int:
        return len(self._seen)
