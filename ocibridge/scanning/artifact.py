"""Scanning a stored artifact (a registry's or a layout's): its raw files read by ranges where
the store sends parts (a registry: a safetensors header check moves its header, verified by the
chunk table, not its tensors), else from the verified blob; its tar layers unpacked member by
member, each judged as pull judges it first."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

from ocibridge.core.streams import open_tar_stream
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.model.paths import ArtifactPaths
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.scanning.content import LocalFile
from ocibridge.scanning.files import Opener, scan_contents
from ocibridge.scanning.library import scanner
from ocibridge.scanning.report import ScanReport
from ocibridge.stores.base import ReadableStore
from ocibridge.stores.ranged import RangedBlobSource


def scan_stored(store: ReadableStore, subject: Descriptor, name: str = "") -> ScanReport:
    """Scan every file of the model manifest ``subject`` in ``store``."""
    scanner()  # (the library looked for before a byte of the model moves)
    parsed = parse_manifest_bytes(store.fetch_bytes(subject), subject.mediaType)
    if not isinstance(parsed, Manifest):
        raise OcibridgeError(f"{name or subject.digest} is an index: name one model manifest (by its digest) "
                             "to scan its files")
    paths = ArtifactPaths(parsed)
    with tempfile.TemporaryDirectory(prefix="ocibridge-scan-") as scratch:
        return scan_contents(_files(store, subject, paths, scratch), subject=subject.digest)


def _files(store: ReadableStore, subject: Descriptor, paths: ArtifactPaths,
           scratch: str) -> Iterator[tuple[str, Opener]]:
    from ocibridge.layers.reader import compression_of

    remote = None
    if isinstance(store, RangedBlobSource):
        from ocibridge.lazyread.model import RemoteModel

        remote = RemoteModel(store, subject.digest, warn=None)
    try:
        for raw in paths.raw:
            if remote is not None and compression_of(raw.layer.mediaType) is None:
                yield raw.path, _ranged(remote, raw.path)
            else:
                yield raw.path, _copied(store, raw.layer, scratch)
        yield from _tar_files(store, paths, scratch)
    finally:
        if remote is not None:
            remote.close()


def _ranged(remote: object, path: str) -> Opener:
    from ocibridge.lazyread.model import RemoteModel

    assert isinstance(remote, RemoteModel)
    return lambda: remote.open(path)


def _copied(store: ReadableStore, layer: Descriptor, scratch: str) -> Opener:
    """The layer's decoded bytes copied to a scratch file (verified: read to its end)."""
    from ocibridge.layers.reader import open_layer

    def opener() -> RangeReadable:
        fd, name = tempfile.mkstemp(dir=scratch)
        with os.fdopen(fd, "wb") as out, open_layer(store, layer) as stream:
            shutil.copyfileobj(stream, out, CHUNK)
        return _Scratch(name)
    return opener


class _Scratch(LocalFile):
    """A scratch copy, removed once scanned."""

    def __init__(self, path: str):
        super().__init__(path)
        self._path = path

    def close(self) -> None:
        super().close()
        os.unlink(self._path)


def _tar_files(store: ReadableStore, paths: ArtifactPaths, scratch: str) -> Iterator[tuple[str, Opener]]:
    """Each regular file of the tar layers, judged as pull judges it, copied out as its turn comes."""
    from ocibridge.layers.reader import open_layer, readable_layer
    from ocibridge.layers.tarwalk import tar_members

    for layer in paths.tars:
        with readable_layer(layer), open_layer(store, layer) as stream, open_tar_stream(stream) as tar:
            for member in tar_members(tar):
                rel = paths.member(member)
                if rel is None or not member.isfile():
                    continue
                source = tar.extractfile(member)
                assert source is not None
                fd, name = tempfile.mkstemp(dir=scratch)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(source, out, CHUNK)
                yield rel, _opened(name)
            while stream.read(CHUNK):  # to EOF, where the layer is verified
                pass
    paths.finish()


def _opened(name: str) -> Opener:
    return lambda: _Scratch(name)
