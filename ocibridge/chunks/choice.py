"""What a command that builds an artifact is told about the chunk table its manifest binds:
push's ``--no-chunks``, ``--chunk-threshold SIZE`` and ``--chunk-hash``, as one value checked in
one place, whoever spells them (push, ``copy``/``convert`` of an ``hf:`` source, serve's
``--upstream-*`` flags, a mirror job's keys): the same meaning, checks and error lines for all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.core.terminal import parse_bytes
from ocibridge.errors import ChunkTableError, UsageError

if TYPE_CHECKING:
    from ocibridge.chunks.chunking import ChunkPolicy


@dataclass(frozen=True)
class ChunkNames:
    """How a surface spells the three settings, for its error lines."""

    off: str
    threshold: str
    hash: str

    @property
    def listed(self) -> str:
        return f"{self.off}, {self.threshold} and {self.hash}"


PUSH_FLAGS = ChunkNames("--no-chunks", "--chunk-threshold", "--chunk-hash")  # push, copy, convert
UPSTREAM_FLAGS = ChunkNames("--upstream-no-chunks", "--upstream-chunk-threshold", "--upstream-chunk-hash")
JOB_KEYS = ChunkNames("no_chunks", "chunk_threshold", "chunk_hash")  # a mirror job's


@dataclass(frozen=True)
class ChunkChoice:
    """Which files a built artifact binds a chunk table of: ``chunks`` off, none; else each raw
    file of ``threshold`` bytes or more (None: push's default, 64 MiB), in chunks of
    ``chunk_size`` bytes (None: 1 MiB), hashed with ``algorithm`` (None: BLAKE3). The default
    value is push's default: every surface left alone builds the artifact push builds."""

    chunks: bool = True
    threshold: int | None = None
    algorithm: str | None = None
    chunk_size: int | None = None

    def policy(self) -> ChunkPolicy | None:
        """The policy a build takes (None: no table); one error line for a value it refuses."""
        if not self.chunks:
            return None
        from ocibridge.chunks import hashes
        from ocibridge.chunks.chunking import ChunkPolicy
        from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD

        try:
            return ChunkPolicy(DEFAULT_CHUNK_SIZE if self.chunk_size is None else self.chunk_size,
                               PUSH_THRESHOLD if self.threshold is None else self.threshold,
                               algorithm=self.algorithm or hashes.DEFAULT)
        except (ValueError, ChunkTableError) as e:
            raise UsageError(str(e)) from None


def refuse_for_stored(source: str, keeps: str, builds: str) -> UsageError:
    """The one line for push's chunk flags given with a stored artifact as source, which a
    command takes as it is (its bytes, digests and any chunk table): ``keeps`` says what the
    command does with it, ``builds`` which sources the flags shape instead. Dropping them
    silently would store an artifact other than the one asked for."""
    return UsageError(f"{source}: {keeps}: {PUSH_FLAGS.listed} are for {builds}")


def choose(no_chunks: bool, threshold: str | int | None, algorithm: str | None,
           names: ChunkNames = PUSH_FLAGS) -> ChunkChoice:
    """The three settings as given (a threshold as a person writes it, ``64M``, or in bytes),
    checked as push checks its flags: a threshold or a hash beside "no table" is a
    contradiction, not a setting to drop silently."""
    if threshold is not None and no_chunks:
        raise UsageError(f"{names.threshold} says which files get a chunk table: leave it out with {names.off}")
    if algorithm is not None and no_chunks:
        raise UsageError(f"{names.hash} says how a chunk table is hashed: leave it out with {names.off}")
    size: int | None = None
    if isinstance(threshold, str):
        try:
            size = parse_bytes(threshold)
        except ValueError as e:
            raise UsageError(f"{names.threshold}: {e}") from None
    elif threshold is not None:
        if threshold < 1:
            raise UsageError(f"{names.threshold}: {threshold} is under one byte")
        size = threshold
    if algorithm is not None:
        from ocibridge.chunks import hashes

        try:
            hashes.check_name(algorithm)
        except ChunkTableError as e:
            raise UsageError(f"{names.hash}: {e}") from None
    return ChunkChoice(not no_chunks, size, algorithm)
