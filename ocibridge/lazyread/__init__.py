"""Verified lazy reads of a model's files straight from a registry (issue 29).

``table``: the chunk-table format (per-chunk SHA-256 of a raw layer); ``chain``: which table a
reader may trust for a resolved manifest; ``blobreader``: byte ranges of one blob, every byte
checked against the table (or the whole blob's digest); ``model``: a model's files by path;
``safetensors``: one tensor without the rest. See docs/lazy.md.
"""
