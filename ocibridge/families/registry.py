"""The table of model families: detection by what an artifact is, and lookup by name.

Adding a family is one module implementing :class:`~.base.ModelFamily` plus one line in
:mod:`.table`; ``convert --to``, ``pull`` and ``push --to`` take their choices from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import OcibridgeError
from ..oci.mediatypes import INDEX_TYPES
from ..oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ..stores.base import MAX_MANIFEST_BYTES, Store
from .base import ModelFamily
from .describe import describe_other

#: An index is searched for a model among at most this many entries (a multi-arch image
#: index is refused after reading a bounded number of manifests).
MAX_INDEX_ENTRIES = 32

_FAMILIES: list[ModelFamily] = []


class NotAModel(OcibridgeError):
    """An artifact of no known model family; the message says what it is instead."""


def register(family: ModelFamily) -> None:
    if any(f.name == family.name for f in _FAMILIES):
        raise ValueError(f"model family {family.name!r} registered twice")
    _FAMILIES.append(family)


def families() -> list[ModelFamily]:
    return list(_FAMILIES)


def names() -> list[str]:
    return [f.name for f in _FAMILIES]


def by_name(name: str) -> ModelFamily:
    for family in _FAMILIES:
        if family.name == name:
            return family
    raise OcibridgeError(f"unknown model family {name!r} (known: {', '.join(names())})")


def family_of(manifest: Manifest) -> ModelFamily | None:
    """The family a manifest belongs to, by its media types; None for anything else."""
    for family in _FAMILIES:
        if family.matches(manifest):
            return family
    return None


@dataclass
class Identified:
    """A model manifest found at a reference, and its family."""

    family: ModelFamily
    desc: Descriptor
    data: bytes
    manifest: Manifest


def _fetch(store: Store, desc: Descriptor) -> tuple[bytes, Manifest | Index]:
    if desc.size > MAX_MANIFEST_BYTES:
        raise OcibridgeError(f"manifest {desc.digest} is too large ({desc.size} bytes)")
    data = store.fetch_bytes(desc)
    return data, parse_manifest_bytes(data, desc.mediaType)


def identify(store: Store, reference: str) -> Identified:
    """The model ``reference`` names, of any registered family.

    An index resolves to its one model entry: by ``artifactType`` when entries carry it, else
    by reading the entries' manifests (``skopeo copy --all`` drops ``artifactType``). When an
    index holds several models, the first by the table's order (ModelPack first) is taken.
    Anything else raises :class:`NotAModel` saying what it is.
    """
    desc = store.resolve(reference)
    data, node = _fetch(store, desc)
    if isinstance(node, Manifest):
        family = family_of(node)
        if family is None:
            raise NotAModel(f"{reference} is {describe_other(node)}, not a model of a known family "
                            f"({', '.join(names())})")
        return Identified(family, desc, data, node)
    return _from_index(store, reference, node)


def _from_index(store: Store, reference: str, index: Index) -> Identified:
    found: list[Identified] = []
    seen_other: list[str] = []
    for entry in index.manifests[:MAX_INDEX_ENTRIES]:
        if entry.mediaType in INDEX_TYPES:
            continue
        data, node = _fetch(store, entry)
        if not isinstance(node, Manifest):
            continue
        family = family_of(node)
        if family is None:
            seen_other.append(describe_other(node))
        else:
            found.append(Identified(family, entry, data, node))
    if not found:
        what = f" (entries: {', '.join(sorted(set(seen_other)))})" if seen_other else ""
        raise NotAModel(f"{reference} is an index with no model manifest{what}")
    order = {f.name: i for i, f in enumerate(_FAMILIES)}
    found.sort(key=lambda i: order[i.family.name])
    return found[0]


def _register_builtin() -> None:
    import importlib

    from .table import REGISTRATIONS

    for _, module, cls in REGISTRATIONS:
        register(getattr(importlib.import_module(module), cls)())


_register_builtin()
