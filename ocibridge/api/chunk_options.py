"""Push's chunk flags as the API takes them (``chunks=`` of ``copy_reference`` and ``convert``,
serve's ``upstream_*chunk*`` options): :class:`ChunkChoice`, and :func:`choose`, which checks the
three as push checks its flags. Light (no pydantic, no httpx): the command line parses with it."""

from __future__ import annotations

from ocibridge.chunks.choice import JOB_KEYS, PUSH_FLAGS, UPSTREAM_FLAGS, ChunkChoice, ChunkNames, choose

__all__ = ["JOB_KEYS", "PUSH_FLAGS", "UPSTREAM_FLAGS", "ChunkChoice", "ChunkNames", "choose"]
