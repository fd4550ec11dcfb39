"""The model families: detection by what an artifact is, and lookup by name.

The families are the lines of the one table of kinds, :mod:`.table`, that name a family class
(:class:`~.family.ModelFamily`); ``convert --to``, ``pull`` and ``push --to`` take their
choices from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.kinds import table
from ocibridge.kinds.describe import describe_other, is_image
from ocibridge.kinds.family import ModelFamily, Probes
from ocibridge.oci.mediatypes import INDEX_TYPES
from ocibridge.oci.models import Descriptor, Index, Manifest, ManifestRead, parse_manifest_bytes
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store, read_parsed
from ocibridge.stores.tombstones import refuse_tombstone


def _load(line: table.Line) -> ModelFamily:
    """The family of a table line, its module imported on first use (``table.made``)."""
    assert line.artifacts is not None
    family: ModelFamily = table.made(line.artifacts)
    return family


class NotAModel(OcibridgeError):
    """An artifact of no known model family; the message says what it is instead.

    ``files_artifact`` is true for a plain OCI artifact manifest (not an image, not an index):
    files pushed the way ``oras push`` writes them, which a pull can still give back as files;
    ``read`` is then that manifest as it was read, checked and parsed (handed down, not read again)."""

    def __init__(self, message: str, *, files_artifact: bool = False, read: ManifestRead | None = None) -> None:
        super().__init__(message)
        self.files_artifact = files_artifact
        self.read = read


def names() -> list[str]:
    return table.family_names()


def _families() -> Iterator[ModelFamily]:
    """The families in the table's order, each loaded when the iteration reaches it."""
    for line in table.families():
        yield _load(line)


def by_name(name: str) -> ModelFamily:
    return _load(table.line_named(table.families(), name, lambda k: k.family, "model family"))


def family_of(manifest: Manifest) -> ModelFamily | None:
    """The family a manifest belongs to, by its media types; None for anything else."""
    for family in _families():
        if family.matches(manifest):
            return family
    return None


def probed(store: Store, desc: Descriptor, manifest: Manifest) -> ModelFamily | None:
    """The family an image belongs to by its content (a ModelCar built by another tool)."""
    if not is_image(manifest):
        return None
    for line in table.families():
        if not line.probes:
            continue  # only the families that say they probe are loaded to ask
        family = _load(line)
        if isinstance(family, Probes) and family.probe(store, desc, manifest):
            return family
    return None


@dataclass
class Identified:
    """A model manifest found at a reference, and its family."""

    family: ModelFamily
    desc: Descriptor
    data: bytes
    manifest: Manifest
    #: every manifest of the index the model is an entry of, as read to find it (none for a manifest)
    entries: tuple[Manifest, ...] = ()


def _fetch(store: Store, desc: Descriptor) -> tuple[bytes, Manifest | Index]:
    if desc.size > MAX_MANIFEST_BYTES:
        raise TooLarge(f"manifest {desc.digest} is too large ({desc.size} bytes)")
    data = store.fetch_bytes(desc)
    return data, parse_manifest_bytes(data, desc.mediaType)


def identify(store: Store, reference: str, *, shown: str | None = None) -> Identified:
    """The model ``reference`` names, of any registered family (``shown``: the reference as the
    user wrote it, for the refusal; ``reference`` alone is a tag such as ``1``).

    An index resolves to its one model entry: by ``artifactType`` when entries carry it, else
    by reading the entries' manifests (``skopeo copy --all`` drops ``artifactType``). When an
    index holds several models, the first by the table's order (ModelPack first) is taken.
    Anything else raises :class:`NotAModel` saying what it is.
    """
    return identify_with_top(store, reference, shown=shown)[0]


def identify_with_top(store: Store, reference: str, *, shown: str | None = None
                      ) -> tuple[Identified, Manifest | Index]:
    """:func:`identify`, with what ``reference`` names as read and parsed (the index the model
    was found in, or its manifest): handed to a caller that judges it too, not read again."""
    desc, data, parsed = read_parsed(store, reference)  # one request and one parse on a registry
    refuse_tombstone(store, desc, shown or reference)  # a tag serve deleted: no model, said so
    node = parsed if parsed is not None else parse_manifest_bytes(data, desc.mediaType)
    return identify_read(store, desc, data, node, shown=shown or reference), node


def identify_read(store: Store, desc: Descriptor, data: bytes, node: Manifest | Index, *,
                  shown: str) -> Identified:
    """:func:`identify` of a manifest already read, checked and parsed (``node``, at ``desc``,
    its bytes ``data``): what ``inspect`` read is judged as it is, not read again."""
    if isinstance(node, Manifest):
        family = family_of(node) or probed(store, desc, node)
        if family is None:
            files = not is_image(node)
            raise NotAModel(f"{shown} is {describe_other(node)}, not a model of a known family "
                            f"({', '.join(names())})", files_artifact=files,
                            read=ManifestRead(desc, data, node) if files else None)
        return Identified(family, desc, data, node)
    return _from_index(store, shown, node)


def _from_index(store: Store, reference: str, index: Index) -> Identified:
    order = {name: i for i, name in enumerate(names())}
    entries: list[Manifest] = []  # each one read: handed on with the model found

    def rank(manifest: Manifest) -> int | None:
        entries.append(manifest)
        family = family_of(manifest)
        return None if family is None else order[family.name]

    from ocibridge.model.index import model_entry  # an index's reader loads with the first index met

    others: list[Manifest] = []
    found = model_entry(store, index, rank, rank_type=None, others=others)
    if found is None and any(is_image(m) for m in others):
        car = _probed_image(store, index)
        if car is not None:
            return car
    if found is None:
        seen = sorted({describe_other(m) for m in others})
        what = f" (entries: {', '.join(seen)})" if seen else ""
        raise NotAModel(f"{reference} is an index with no model manifest{what}")
    family = family_of(found.manifest)
    assert family is not None
    return Identified(family, found.desc, found.data, found.manifest, tuple(entries))


def _probed_image(store: Store, index: Index) -> Identified | None:
    """An index of images: its first image is looked into (the platforms of a ModelCar hold the
    same files under /models), a ModelCar built by another tool when its layers say so."""
    from ocibridge.model.index import MAX_INDEX_ENTRIES

    for entry in index.manifests[:MAX_INDEX_ENTRIES]:
        if entry.mediaType in INDEX_TYPES:
            continue
        data, node = _fetch(store, entry)
        if isinstance(node, Manifest) and is_image(node):
            family = probed(store, entry, node)
            return Identified(family, entry, data, node) if family is not None else None
    return None

