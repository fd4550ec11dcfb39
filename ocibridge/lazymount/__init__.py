"""``ocibridge mount``: a registry model as a read-only FUSE directory, every read verified
(docs/mount.md). The tree (``tree``, made by ``build``), the kernel's answers (``ops``), the
FUSE loop and its end (``session``); the API wires them to ``lazyread``'s model."""

#: a mount's read fails (EIO) once what it waits for has heard nothing from the registry for
#: this many seconds, retries included (``--read-timeout``; docs/mount.md); here, where the
#: command's options can name it without loading the mount
READ_TIMEOUT = 30.0
