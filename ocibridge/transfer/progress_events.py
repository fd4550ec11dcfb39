"""Progress as typed events with the file path, for API callers and the ``plain`` display.

Transfers report ``progress(event, descriptor, nbytes)`` (see :mod:`ocibridge.transfer.progress`). A
push knows a file before its digest (it hashes while sending), so such a file is reported
under a stand-in descriptor that carries the file's path, not a digest anyone could look up.
:func:`events` turns either kind of report into a :class:`ProgressEvent`:

| field | meaning |
|---|---|
| ``kind`` | ``plan``, ``start``, ``bytes``, ``done``, ``skip`` (already there), ``mount`` |
| ``path`` | the model file (or tar layer directory) the blob carries; None for config/manifest |
| ``digest`` | the blob's digest, None while a push still hashes it |
| ``size`` | the blob's size (for a tar layer not built yet, the size of its files) |
| ``nbytes`` | for ``bytes``: how many more were read |
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.oci.layerinfo import layer_path
from ocibridge.oci.mediatypes import Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor, Manifest

#: ``progress(event, descriptor, nbytes)``: what every transfer reports (see :mod:`ocibridge.transfer.progress`).
ProgressFn = Callable[[str, Descriptor, int], None]

#: Annotations of a stand-in descriptor: the path it stands for, and the real digest once known.
PATH_KEY = "io.ocibridge.progress.path"
DIGEST_KEY = "io.ocibridge.progress.digest"
SIZE_KEY = "io.ocibridge.progress.size"
MEDIA_TYPE_KEY = "io.ocibridge.progress.media-type"
STAND_IN_TYPE = "application/vnd.ocibridge.progress.pending"


@dataclass(frozen=True)
class ProgressEvent:
    kind: str
    path: str | None
    digest: str | None
    size: int
    nbytes: int
    media_type: str

    @property
    def name(self) -> str:
        """What to call the blob on a screen: its path, else its kind and short digest."""
        if self.path:
            return self.path
        what = "manifest" if "manifest" in self.media_type or "index" in self.media_type else "config"
        return f"{what} {(self.digest or '').split(':', 1)[-1][:12]}".strip()


def stand_in(path: str, size: int, what: str = "file") -> Descriptor:
    """A descriptor keyed by ``path`` for a blob whose digest is not known yet."""
    key = hashlib.sha256(f"{what}\0{path}".encode()).hexdigest()
    return Descriptor(mediaType=STAND_IN_TYPE, digest=f"sha256:{key}", size=size,
                      annotations={PATH_KEY: path})


def known_as(stand: Descriptor, real: Descriptor) -> Descriptor:
    """``stand`` (same key, same size for the display) now naming the real blob's digest."""
    annotations = dict(stand.annotations or {})
    annotations.update({DIGEST_KEY: real.digest, SIZE_KEY: str(real.size), MEDIA_TYPE_KEY: real.mediaType})
    return stand.model_copy(update={"annotations": annotations})


def event_of(kind: str, desc: Descriptor, nbytes: int) -> ProgressEvent:
    annotations = desc.annotations or {}
    if desc.mediaType == STAND_IN_TYPE:
        return ProgressEvent(kind, annotations.get(PATH_KEY), annotations.get(DIGEST_KEY),
                             int(annotations.get(SIZE_KEY, desc.size)), nbytes,
                             annotations.get(MEDIA_TYPE_KEY, desc.mediaType))
    return ProgressEvent(kind, layer_path(desc), desc.digest, desc.size, nbytes, desc.mediaType)


def events(callback: Callable[[ProgressEvent], None]) -> ProgressFn:
    """A ``progress=`` argument for push/pull/copy that calls ``callback`` with typed events."""

    def report(kind: str, desc: Descriptor, nbytes: int) -> None:
        callback(event_of(kind, desc, nbytes))

    return report


class PushProgress:
    """A push's display plan: every layer is announced (``plan``) before any byte moves, so the
    total is known before a bar starts; the built artifact's blobs are then reported under the
    same path-keyed stand-ins, now carrying their real digests."""

    def __init__(self, progress: ProgressFn, keys: list[Descriptor]):
        """``keys``: the planned layers' stand-ins (see ``PlannedLayer.progress_key``)."""
        self._progress = progress
        for key in keys:
            progress("plan", key, 0)
        # the config is a few hundred bytes written after the files are hashed: it is shown
        # as a blob, but its bytes stay out of the total, which is thus fixed from the start
        progress("plan", CONFIG_KEY, 0)

    def copy_progress(self, manifest: Manifest | Callable[[], Manifest]) -> ProgressFn:
        """``progress`` for the copy of the built artifact ``manifest`` (or of the one a function
        gives once the files are hashed: events before that name files by their stand-ins)."""
        by_digest: dict[str, Descriptor] | None = None
        progress = self._progress

        def report(kind: str, desc: Descriptor, nbytes: int) -> None:
            nonlocal by_digest
            if desc.mediaType == STAND_IN_TYPE:  # a file sent while hashed: no digest yet
                progress(kind, desc, nbytes)
                return
            if by_digest is None:
                by_digest = _keys_by_digest(manifest if isinstance(manifest, Manifest) else manifest())
            progress(kind, by_digest.get(desc.digest, desc), nbytes)

        return report


def _keys_by_digest(manifest: Manifest) -> dict[str, Descriptor]:
    """The stand-in of each blob of a built artifact, now carrying its real digest."""
    by_digest = {manifest.config.digest: known_as(CONFIG_KEY, manifest.config)}
    for desc in manifest.layers:
        key = built_layer_key(desc)
        if key is not None:
            by_digest[desc.digest] = known_as(key, desc)
    return by_digest


CONFIG_KEY = Descriptor(mediaType=STAND_IN_TYPE, digest="sha256:" + "0" * 64, size=0)


def file_key(path: str, size: int) -> Descriptor:
    return stand_in(path, size, "file")


def layer_key(path: str, size: int, kind: str) -> Descriptor:
    """The stand-in of a tar layer of ``kind`` not built yet, from its files' ``size``."""
    return stand_in(path, size, f"layer:{kind}")


def built_layer_key(desc: Descriptor) -> Descriptor | None:
    kind, path = parse_layer_media_type(desc.mediaType), layer_path(desc)
    if kind is None or path is None:
        return None
    if kind.variant is Variant.RAW:
        return file_key(path, desc.size)
    return stand_in(path, desc.size, f"layer:{kind.kind.value}")
