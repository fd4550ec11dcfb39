"""``ocibridge mount``: a registry model as a read-only FUSE directory, every read verified
(docs/mount.md). The tree (``tree``, made by ``build``), the kernel's answers (``ops``), the
FUSE loop and its end (``session``); the API wires them to ``lazyread``'s model."""
