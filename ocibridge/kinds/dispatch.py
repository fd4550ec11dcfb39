"""The door: which source format reads a ``push`` source, writes a ``pull`` destination, or
converts an artifact found in a store, all decided by the source formats' side of the one
table of kinds, :mod:`.table`.

A format (the protocols are in :mod:`.source`) is a class with a ``name``, ``read`` (a source
→ a model package) and ``export`` (an artifact → the destination), plus two optional
capabilities checked with ``isinstance``:
:class:`SniffsContent` (recognise a file by its bytes when its name says nothing) and
:class:`ReadsArtifacts` (convert artifacts of a model family, as found in any store: an
Ollama model in a registry is converted by what it is, not by how its reference is spelled).

Recognition order for a local path or reference: ``--format`` when given, then a scheme, then
a file suffix, then content, then the fallback (a plain directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError, SourceError
from ocibridge.kinds import table
from ocibridge.kinds.source import ExportRequest, ReadRequest, ReadsArtifacts, SniffsContent, SourceFormat
from ocibridge.oci.reference import PathReference

if TYPE_CHECKING:
    from ocibridge.kinds.families import Identified
    from ocibridge.oci.models import ManifestRead
    from ocibridge.places.locators import Locator
    from ocibridge.stores.base import Store

__all__ = ["ExportRequest", "ReadRequest", "ReadsArtifacts", "SniffsContent", "SourceFormat"]


def _load(line: table.Line) -> SourceFormat:
    """The source format of a table line, its module imported on first use."""
    assert line.source is not None
    format: SourceFormat = table.made(line.source)
    return format


def by_name(name: str) -> SourceFormat:
    return _load(table.line_named(table.sources(), name, lambda k: k.format, "format"))


def _by_reference(text: str) -> SourceFormat | None:
    """The format a scheme or a suffix names, without opening anything."""
    lower = text.lower()
    for line in table.sources():
        if any(text.startswith(s) for s in line.schemes) or any(lower.endswith(s.lower()) for s in line.suffixes):
            return _load(line)
    return None


def _by_locator(located: Locator) -> SourceFormat | None:
    """The format whose own place a kind's locator names (``ollama:NAME``, ``hf:ORG/NAME``), or
    the one a path's suffix names."""
    if isinstance(located, PathReference):
        return _by_reference(located.path)
    made = (type(located).__module__, type(located).__qualname__)
    for line in table.sources():
        if line.locator == made:
            return _load(line)
    return None


def is_store(located: Locator) -> bool:
    """Whether a locator names a store holding artifacts (a layout, a registry, Ollama's), not
    a file, a directory or a format's own place that keeps none (the Hub cache)."""
    from ocibridge.places.locators import is_store as names_a_store

    return names_a_store(located)


def _fallback() -> SourceFormat:
    return _load(next(k for k in table.sources() if k.fallback))


def source_format(source: str, explicit: str | None = None) -> SourceFormat:
    """The format that reads ``source``: ``explicit`` (``--format``), else by scheme or
    suffix, else by content (an existing file), else the fallback."""
    if explicit and explicit != "auto":
        return _named(explicit, "source")
    found = _by_reference(source)
    if found is not None:
        return found
    path = Path(source)
    if path.is_file():
        for line in table.sources():
            if not line.sniffs:
                continue  # only the formats that say they sniff are loaded to ask
            fmt = _load(line)
            if isinstance(fmt, SniffsContent) and fmt.sniff(path):
                return fmt
    return _fallback()


def destination_format(dest: Locator, explicit: str | None = None) -> SourceFormat | None:
    """The format a ``pull`` writes at ``dest`` (located, places/locate.py); None when ``dest``
    is a store (a copy)."""
    if explicit and explicit != "auto":
        return _named(explicit, "output")
    found = _by_locator(dest)
    if found is not None:
        return found
    return None if is_store(dest) else _fallback()


def _named(name: str, what: str) -> SourceFormat:
    try:
        return by_name(name)
    except OcibridgeError:
        raise SourceError(f"unknown {what} format {name!r}") from None


def exports_quietly(dest: Locator, explicit: str | None = None) -> bool:
    """Whether a pull into ``dest`` is an export that reports no progress (no bar drawn)."""
    fmt = destination_format(dest, explicit)
    return fmt is not None and not fmt.shows_progress


@dataclass
class Conversion:
    """The format whose model family the artifact at a reference is, and what to read there."""

    format: ReadsArtifacts
    reference: str  # the model manifest (an index's entry by digest)
    as_is: bool  # the destination is that format's own: the artifact goes across unconverted


@dataclass
class Examined:
    """What the door found at a reference: the model (None when it is no model of a known
    family) and, when a format reads that model's family, the conversion; ``files``, a plain
    artifact of files (no model) as its manifest was read, checked and parsed."""

    model: Identified | None
    conversion: Conversion | None
    files: ManifestRead | None = None


def examine(store: Store, reference: str, dest_format: SourceFormat | None = None, *,
            source: Locator | None = None, refuse_other: bool = True) -> Examined:
    """Identify the artifact ``reference`` names by its model family (by media type) and pick
    the format that reads that family, if any; ``as_is`` when ``dest_format`` is that same
    format (an Ollama model into an Ollama store). The manifest is read once.

    A ``source`` spelled with a format's scheme (``ollama:NAME``) names that format's own store,
    which holds nothing else: its reader takes it without identification, and reports what is
    wrong with a model there in its own terms."""
    from ocibridge.kinds.families import NotAModel, identify

    named = _by_locator(source) if source is not None else None
    if isinstance(named, ReadsArtifacts):
        return Examined(None, Conversion(named, reference, as_is=named is dest_format))
    try:
        found = identify(store, reference, shown=source.text if source is not None else None)
    except NotAModel as not_a_model:
        if not_a_model.files_artifact or not refuse_other:  # read (or copied) as it is
            return Examined(None, None, not_a_model.read)
        raise  # a container image, an index of no model: refused saying what it is
    for line in table.sources():
        if not line.converts or line.family != found.family.name:
            continue  # the other formats are not loaded to ask (a ModelPack artifact needs none)
        fmt = _load(line)
        if isinstance(fmt, ReadsArtifacts) and fmt.family == found.family.name:
            root = store.resolve(reference)
            model = reference if root.digest == found.desc.digest else found.desc.digest
            return Examined(found, Conversion(fmt, model, as_is=fmt is dest_format))
    return Examined(found, None)


if TYPE_CHECKING:  # mypy holds the built-in formats to the protocols (the table loads them by name)
    from ocibridge.kinds.carton.kind import CartonFormat
    from ocibridge.kinds.directory.source import DirectoryFormat
    from ocibridge.kinds.hf.kind import HubCacheFormat
    from ocibridge.kinds.mlsteam.kind import MlarchiveFormat
    from ocibridge.kinds.ollama.kind import OllamaFormat

    def _conforming() -> tuple[list[SourceFormat], ReadsArtifacts]:
        formats: list[SourceFormat] = [CartonFormat(), MlarchiveFormat(), OllamaFormat(), HubCacheFormat(),
                                       DirectoryFormat()]
        return formats, OllamaFormat()
