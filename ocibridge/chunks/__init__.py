"""Chunk tables: the per-chunk SHA-256 of a raw layer that lets a byte range be checked alone
(format: docs/lazy.md), with everything that makes, checks, trusts, binds and keeps them.

``table``: the format; ``chunking``: tables made in the read that hashes a push's files, kept by
layer digest for a re-push (``chunkcache``); ``attach``: tables computed from a model's blobs and
attached as a referrer; ``chain``: which table a resolved manifest binds (what a reader may trust);
``bound``: that table read from, or fetched into, an OCI layout; ``carry``: a bound table cut down
and bound again for a converted manifest; ``tablehash``: a layer checked chunk by chunk as it
streams in; ``chunkindex``: which blob of a layout holds which chunk; ``delta`` and
``localchunks``: a blob built from chunks held here and Range fetches of the rest.
See docs/architecture-pull.md for what stays elsewhere and why.
"""
