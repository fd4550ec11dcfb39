"""Which paths an artifact may write: one judgement for pull, mount, lazy reads and serve's
file listing, so that none of them shows what another refuses.

Every name is judged as the manifest or the tar layer writes it, before it is normalised (a
reader that strips a leading ``/`` first turns ``/etc/evil.bin`` into a file pull refuses).
The raw layers are judged from the manifest alone, all at once: a path no relative name could
be, one given twice (``model.bin`` and ``./model.bin`` are one path), a file that is also
another's directory. The tar layers' entries are judged one by one as they are read
(:meth:`ArtifactPaths.entry`), against the raw files and the entries before them: what pull's
staging directory would hold at that moment, so the error is pull's, word for word.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from ocibridge.core.confined import check_links
from ocibridge.core.fsutil import is_root_entry, link_stays_inside, safe_relpath
from ocibridge.core.streams import open_tar_stream
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.oci.cnaidraft import LAYER_VARIANTS, is_draft, is_draft_layer
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.empty import is_empty_layer
from ocibridge.oci.layerinfo import raw_file_path
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import ReadableStore

if TYPE_CHECKING:  # the layer reader (tarfile, gzip) loads with the first tar layer read
    import tarfile


class Held(Enum):
    """What a path of the tree being judged is."""

    FILE = "file"
    DIR = "dir"
    LINK = "link"


@dataclass(frozen=True)
class RawFile:
    """A raw layer's file: its path (judged, then normalised) and the layer whose bytes it has."""

    path: str
    layer: Descriptor


class ArtifactPaths:
    """The judged paths of one manifest's layers: ``raw`` (in manifest order), ``tars`` (tar
    layers, in manifest order) and ``changesets`` (layers of the early CNAI draft, laid over
    one another by pull's own code); the empty descriptor (a model of no files: oci/empty.py)
    is none of them. Raises at construction what the manifest alone shows."""

    def __init__(self, manifest: Manifest):
        self.raw: list[RawFile] = []
        self.tars: list[Descriptor] = []
        self.changesets: list[Descriptor] = []
        draft = is_draft(manifest)
        for layer in manifest.layers:
            if is_empty_layer(layer):
                continue  # no file: what a commit that deleted every file holds
            if is_draft_layer(layer) or (draft and layer.mediaType in LAYER_VARIANTS):
                self.changesets.append(layer)
                continue
            name = raw_file_path(layer)
            if name is None:
                self.tars.append(layer)
            else:
                self.raw.append(RawFile(safe_relpath(name, "layer file path"), layer))
        paths = [f.path for f in self.raw]
        if len(set(paths)) != len(paths):
            raise OcibridgeError(f"duplicate path in artifact: {next(p for p in paths if paths.count(p) > 1)}")
        self._held: dict[str, Held] = {}
        for path in sorted(paths):
            self._parents(path, path)
            self._held[path] = Held.FILE
        packed = [t.digest for t in [*self.tars, *self.changesets]]
        if len(set(packed)) != len(packed) or {f.layer.digest for f in self.raw} & set(packed):
            raise OcibridgeError("duplicate path in artifact: a tar layer is listed twice")
        self._links: dict[str, str] = {}

    @property
    def files(self) -> dict[str, RawFile]:
        """The raw files by path."""
        return {f.path: f for f in self.raw}

    def _parents(self, path: str, entry: str) -> None:
        """Every directory above ``path`` is one (made when missing); ``entry`` is named when
        one of them is a link."""
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            held = self._held.get(parent)
            if held is Held.LINK:
                raise UnsafePath(f"{entry}: a parent directory is a symlink in the artifact")
            if held is Held.FILE:
                raise OcibridgeError(f"the artifact holds {parent} as a file and as a directory")
            self._held[parent] = Held.DIR

    def entry(self, name: str, *, directory: bool = False, link: str | None = None,
              regular: bool = True) -> str | None:
        """Judge one tar entry as its layer names it (``directory``, a symlink to ``link``, a
        regular file, or neither: a hard link or a device, refused); its relative path, or
        None for the layer's root entry (``./``)."""
        if directory and is_root_entry(name):
            return None
        rel = safe_relpath(name, "tar entry")
        if directory:
            self._parents(rel + "/", rel)
            return rel
        self._parents(rel, rel)
        if rel in self._held:
            raise OcibridgeError(f"duplicate path in artifact: {rel}")
        if link is not None:
            if not link_stays_inside(rel, link):
                raise UnsafePath(f"{rel}: symlink points outside the model ({link})")
            self._held[rel] = Held.LINK
            self._links[rel] = link
        elif regular:
            self._held[rel] = Held.FILE
        else:
            raise UnsafePath(f"{rel}: unsupported tar entry type (hard link or device)")
        return rel

    def member(self, member: tarfile.TarInfo) -> str | None:
        """:meth:`entry` for a member of a tar layer."""
        return self.entry(member.name, directory=member.isdir(), link=member.linkname if member.issym() else None,
                          regular=member.isfile())

    def finish(self) -> None:
        """Once every tar entry is judged: no link, followed through the others, leaves the tree."""
        check_links(self._links)


def judge_tar_layers(store: ReadableStore, paths: ArtifactPaths) -> None:
    """Judge every entry of the tar layers of ``paths`` (read from ``store`` to their ends, so
    verified), then the links among them: what a reader that unpacks nothing must do to refuse
    what pull refuses. A layer that is not a readable tar is refused, as pull refuses it."""
    from ocibridge.layers.reader import open_layer, readable_layer
    from ocibridge.layers.tarwalk import tar_members

    for layer in paths.tars:
        with readable_layer(layer), open_layer(store, layer) as stream:
            with open_tar_stream(stream) as tar:
                for member in tar_members(tar):
                    paths.member(member)
            while stream.read(CHUNK):  # to EOF, where the layer is verified
                pass
    paths.finish()
