"""Verified lazy reads of a model's files straight from a registry: not the registry
client (``stores.registry``), but what reads a registry model's files by byte range through it.

``blobreader``: byte ranges of one blob, every byte checked against the blob's chunk table
(:mod:`ocibridge.chunks`) or the whole blob's digest; ``model``: a model's files by path;
``tensorfile`` and ``safetensors``: one tensor without the rest; ``chunkstore``, ``keeper`` and
``layerfill``: where the verified chunks of reads are kept, in which shape, and a whole read
served from one fetch. See docs/lazy.md.
"""
