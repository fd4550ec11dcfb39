"""What the archive exporters (carton, mlarchive) share: reading a layer to its end, where its
digest is checked; handing over a tar layer's members one at a time; and the temporary file
beside the destination that is renamed into place only once it is whole."""

from __future__ import annotations

import contextlib
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.core.streams import Reader, open_tar_stream
from ocibridge.errors import OcibridgeError
from ocibridge.layers.reader import open_layer, readable_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store

#: Called with a tar member (never a directory) and its content: a reader for a regular file,
#: None for a link or a device, which the format may refuse.
MemberVisitor = Callable[[tarfile.TarInfo, Reader | None], None]


def read_to_end(reader: Reader) -> None:
    """Read what is left, so the verifying reader checks the digest of the whole blob."""
    while reader.read(CHUNK):
        pass


def each_tar_member(store: Store, desc: Descriptor, visit: MemberVisitor,
                    error: type[OcibridgeError]) -> None:
    """Hand ``visit`` every member of the tar layer ``desc`` but directories, in order, then
    read the layer to its end; a layer that does not decode or is not a tar is one ``error``
    naming it."""
    with contextlib.closing(open_layer(store, desc)) as layer, readable_layer(desc, error=error):
        with open_tar_stream(layer) as tar:
            for member in tar_members(tar):
                if not member.isdir():
                    visit(member, tar.extractfile(member) if member.isfile() else None)
        read_to_end(layer)


@contextlib.contextmanager
def temp_beside(final: Path, suffix: str) -> Iterator[Path]:
    """A temporary file beside ``final`` (the caller renames it there); on failure it and the
    folders made for it go, so a failed export leaves nothing behind."""
    made = [d for d in (final.parent, *final.parent.parents) if not d.exists()]  # deepest first
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=suffix, dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    ok = False
    try:
        yield tmp
        ok = True
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        for folder in [] if ok else made:
            with contextlib.suppress(OSError):
                folder.rmdir()


def manifest_to_export(store: Store, desc: Descriptor, out_path: Path, what: str,
                       not_one: type[OcibridgeError]) -> Manifest:
    """The model manifest ``desc`` names, to be exported as the file ``out_path`` (a directory
    there is refused, ``what`` saying what to give instead); an index is one ``not_one`` error."""
    if out_path.is_dir():
        raise OcibridgeError(f"{out_path} is a directory; give {what}")
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    if not isinstance(manifest, Manifest):
        raise not_one(f"{desc.digest} is an index, not a model manifest; pick one by digest")
    return manifest
