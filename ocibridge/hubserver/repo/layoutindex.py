"""A served layout's ``index.json``, parsed once per change and shared by every request.

Serve reads a layout source for every row of the catalog page and every model the API lists;
the plain :class:`~ocibridge.stores.layout.LayoutStore` re-reads and re-parses ``index.json``
at each ``tags()``, ``resolve()`` and ``referrers()``, so a 100,000-entry index cost a whole
parse per call (the catalog page took minutes). Here a parse is kept, keyed by the file's
inode, size and mtime (a writer replaces it atomically: a new inode), for at most
:data:`KEPT` layouts, and the tag names and name -> entry map are made from it once. The
size cap (``$OCIBRIDGE_MAX_INDEX_BYTES``) still applies to every parse.

The store is for reading: serve's writes to a layout open a plain ``LayoutStore``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from ocibridge.errors import NotFound
from ocibridge.oci.digest import is_digest
from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME
from ocibridge.oci.models import Descriptor, Index
from ocibridge.stores.layout import LayoutStore

#: layouts whose parsed index is kept (each a few hundred MiB at most under the default cap)
KEPT = 4


@dataclass
class Parsed:
    """One parse of ``index.json`` and what is derived from it once."""

    index: Index
    by_name: dict[str, Descriptor] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, index: Index) -> Parsed:
        by_name: dict[str, Descriptor] = {}
        for entry in index.manifests:
            name = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
            if name:
                by_name.setdefault(name, entry)
        return cls(index, by_name, sorted(by_name))


_lock = threading.Lock()
_kept: OrderedDict[tuple[str, int, int, int, int], Parsed] = OrderedDict()
#: parses made since start (tests and the metrics read it)
parses = 0


def _key(root: str) -> tuple[str, int, int, int, int] | None:
    try:
        st = os.stat(os.path.join(root, "index.json"))
    except FileNotFoundError:
        return None
    return (root, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class ServedLayout(LayoutStore):
    """A layout read by serve: ``index.json`` parsed once per change (see the module)."""

    def _parsed(self) -> Parsed:
        global parses
        key = _key(str(self.root))
        if key is not None:
            with _lock:
                known = _kept.get(key)
                if known is not None:
                    _kept.move_to_end(key)
                    return known
        parsed = Parsed.of(LayoutStore.read_index(self))  # the cap applies here
        if key is None:
            return parsed
        with _lock:
            parses += 1
            for old in [k for k in _kept if k[0] == key[0]]:
                del _kept[old]  # an older version of the same layout
            _kept[key] = parsed
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
        return parsed

    def read_index(self) -> Index:
        return self._parsed().index

    def tags(self) -> list[str]:
        return list(self._parsed().names)

    def resolve(self, reference: str) -> Descriptor:
        if is_digest(reference):
            return super().resolve(reference)
        entry = self._parsed().by_name.get(reference)
        if entry is None:
            raise NotFound(f"{self.describe()}:{reference}: tag not found")
        return _without_name(entry)


def _without_name(entry: Descriptor) -> Descriptor:
    annotations = {k: v for k, v in (entry.annotations or {}).items() if k != ANNOTATION_REF_NAME}
    return entry.model_copy(update={"annotations": annotations or None})
