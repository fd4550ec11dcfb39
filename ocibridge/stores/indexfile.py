"""A layout's ``index.json`` as a file: read whole up to a cap (a layout is untrusted, and its
index is read by every command that names it), replaced atomically (callers hold the layout's
lock, :mod:`.layout`), and the name edits made on its entries (tags, renames).

Which entries a push or tag leaves listed is :mod:`.layoutentries`; what they reach is
:mod:`.layoutgraph`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ocibridge.core.environment import MAX_INDEX_BYTES as ENV_MAX_INDEX
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.core.limits import env_limit, over_limit, read_capped
from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME, OCI_INDEX
from ocibridge.oci.models import Descriptor, Index, parse_manifest_bytes
from ocibridge.oci.reference import check_ref_name

INDEX_FILE = "index.json"

#: A layout's ``index.json`` is read whole (it is JSON) up to this many bytes: ~50,000 tags.
MAX_INDEX_BYTES = 16 << 20


def max_index_bytes() -> int:
    """The cap on ``index.json``, raised with ``$OCIBRIDGE_MAX_INDEX_BYTES``."""
    return env_limit(ENV_MAX_INDEX, MAX_INDEX_BYTES)


def read(root: Path) -> Index:
    """``root/index.json``, read up to its cap; an empty index when there is none."""
    cap = max_index_bytes()
    try:
        with open(root / INDEX_FILE, "rb") as f:
            data = read_capped(f, cap)  # one byte more tells a longer file, and no more is read
    except FileNotFoundError:
        return Index()
    if len(data) > cap:
        raise TooLarge(over_limit(f"{root}/{INDEX_FILE}", cap, ENV_MAX_INDEX))
    index = parse_manifest_bytes(data, OCI_INDEX)
    if not isinstance(index, Index):
        raise OcibridgeError(f"{root}/{INDEX_FILE} is not an image index")
    return index


def write(root: Path, index: Index) -> None:
    """Replace ``root/index.json`` whole, so a reader sees the old file or the new one."""
    atomic_write_bytes(root / INDEX_FILE, index.to_json_bytes())


def ref_name(entry: Descriptor) -> str | None:
    """The entry's name (``org.opencontainers.image.ref.name``), None when untagged."""
    return (entry.annotations or {}).get(ANNOTATION_REF_NAME)


def names(entries: Iterable[Descriptor]) -> list[str]:
    """The names the entries carry, sorted, each once."""
    return sorted({n for n in map(ref_name, entries) if n})


def rename(entries: Iterable[Descriptor], renames: dict[str, str]) -> list[str]:
    """Rename entries in place: each ``old -> new`` whose ``old`` is listed and whose ``new``
    names nothing yet (a name another writer took is never overwritten). Returns the old names
    renamed; the caller writes the index when there are any."""
    for wanted in renames.values():
        check_ref_name(wanted)
    entries = list(entries)
    taken: set[str | None] = {ref_name(e) for e in entries}
    done: list[str] = []
    for entry in entries:
        old = ref_name(entry)
        new = renames.get(old or "")
        if old is None or new is None or new in taken:
            continue
        entry.annotations = {**(entry.annotations or {}), ANNOTATION_REF_NAME: new}
        taken.add(new)
        done.append(old)
    return done
