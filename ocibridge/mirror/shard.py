"""Which shard of a mirror job owns an artifact: ``--shard I/N``.

Consistent hashing (Lamping and Veach's jump hash) of the first 8 bytes of ``sha256(key)``.
The answer depends only on the artifact's key and N, never on which other tags exist, so a tag
added to the source moves nothing else; going from N to N+1 shards moves only the ~1/(N+1)
artifacts the new shard takes (a hash modulo N would move nearly all); and it costs O(log N)
per artifact, so a thousand shards each partitioning a hundred thousand artifacts is quick.
Every shard of one job computes the same partition without talking to the others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ocibridge.errors import UsageError

#: More shards than this is a typing mistake, not a plan (an Indexed Job allows 100,000).
MAX_SHARDS = 100_000


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based, as Kubernetes' JOB_COMPLETION_INDEX)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, key: str) -> bool:
        return owner(key, self.count) == self.index


def parse_shard(text: str) -> Shard:
    """``I/N`` with 0 <= I < N; anything else is a usage error naming the flag."""
    index_text, sep, count_text = text.partition("/")
    if not (sep and index_text.isascii() and index_text.isdigit() and count_text.isascii()
            and count_text.isdigit()):
        raise UsageError(f"--shard expects I/N (shard I of N, counted from 0), got {text!r}")
    index, count = int(index_text), int(count_text)
    if not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"--shard {text}: N must be between 1 and {MAX_SHARDS}")
    if index >= count:
        raise UsageError(f"--shard {text}: I counts from 0, so it must be below N={count}")
    return Shard(index, count)


def artifact_key(source: str, reference: str, target: str, tag: str | None) -> str:
    """What an artifact is known by across runs: source repository and reference, target
    repository and tag (the same source tag mirrored into two places is two pieces of work)."""
    return "\n".join((source, reference, target, tag or ""))


_MASK = (1 << 64) - 1
#: The 64-bit linear congruential step of the jump hash paper.
_LCG = 2862933555777941757


def owner(key: str, count: int) -> int:
    """The shard (0 … count-1) that owns ``key``.

    The jump hash walks the shard counts at which the key would move, each jump drawn from a
    generator seeded by the key, and stops at the last one below ``count``: growing ``count``
    by one moves a key only to the new shard, with probability 1/(count+1).
    """
    state = int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()[:8], "big")
    shard, jump = -1, 0
    while jump < count:
        shard = jump
        state = (state * _LCG + 1) & _MASK
        jump = int((shard + 1) * ((1 << 31) / ((state >> 33) + 1)))
    return shard
