"""The kinds of model: one line each, saying as data what the kind can do.

A kind has a package under ``ocibridge/kinds/`` and up to two faces. Its *source format*
(``source``) reads what ``push`` takes and writes what ``pull`` gives, when that is no store: a
``.carton``, an Ollama model, a directory. Its *model family* (``family``) reads its artifacts
wherever they are stored, recognised by media type, and may write or export them (``convert
--to``, ``push --to``). :mod:`.dispatch` serves the source formats and :mod:`.families` the
families, both from :data:`KINDS`, importing a class by its (module, class) names only when it
is needed.

Kept free of imports so that the command line lists its ``--format`` and ``--to`` choices
without loading a kind (``--help`` loads neither pydantic nor httpx). The capabilities a line
declares are checked against its classes by tests/kinds/test_kinds_table.py, so the table cannot
say what a class does not do. Adding a kind: its package, and one line here (or
:func:`register` at run time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ocibridge.errors import OcibridgeError


@dataclass(frozen=True)
class Line:
    """One kind of model: where its classes live and what each can do."""

    name: str  # its package under ocibridge/kinds/
    # -- the source format: push reads it, pull writes it back (``SourceFormat``)
    format: str | None = None  # its --format name
    source: tuple[str, str] | None = None  # (module, class) of the format
    sniffs: bool = False  # recognises its files by their first bytes (``SniffsContent``)
    suffixes: tuple[str, ...] = ()  # file names ending so are this format (case-insensitive)
    schemes: tuple[str, ...] = ()  # references starting so are this format (not a --format choice)
    #: (module, function): a text starting with one of ``schemes`` -> its typed locator (places/locate.py)
    grammar: tuple[str, str] | None = None
    #: (module, class): the typed locator the grammar makes (a ``places.locators.KindPlace``)
    locator: tuple[str, str] | None = None
    #: (module, function): ``(locator, *, for_write, options) -> target``, how its place is opened
    opener: tuple[str, str] | None = None
    fallback: bool = False  # what a local path is when nothing else recognises it
    # -- the model family: its artifacts, read in any store (``ModelFamily``)
    family: str | None = None  # its --to name
    artifacts: tuple[str, str] | None = None  # (module, class) of the family
    writes: bool = False  # written as a manifest + config over the same blobs (``Writes``)
    exports: bool = False  # written from the ModelPack form by its own exporter (``Exports``)
    probes: bool = False  # some of its artifacts are told apart by content only (``Probes``)
    #: the source format converts this family's artifacts wherever they are found (an Ollama
    #: model in a registry): a pull or push meeting such an artifact loads only this format
    converts: bool = False
    #: what the family recognises by media type alone, where a manifest's config or
    #: ``artifactType`` says it (ModelCar images and Ollama models are told by their layers)
    config_types: tuple[str, ...] = ()
    artifact_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.format is None) != (self.source is None) or (self.family is None) != (self.artifacts is None):
            raise ValueError(f"kind {self.name!r}: a format and a family are each named with their class")
        if bool(self.schemes) != (self.grammar is not None) or (self.grammar is None) != (self.locator is None) \
                or (self.locator is None) != (self.opener is None):
            raise ValueError(f"kind {self.name!r}: schemes are read by the kind's grammar into its locator, "
                             "which its opener opens")


#: In order: the families in detection order (ModelPack first, so an index holding several models
#: resolves to its ModelPack entry), the source formats in detection order, the fallback last.
KINDS: list[Line] = [
    Line("modelpack", family="modelpack", artifacts=("ocibridge.kinds.modelpack.family", "ModelPackFamily"),
         writes=True,
         config_types=("application/vnd.cnai.model.config.v1+json", "application/vnd.cncf.model.config.v1+json"),
         artifact_types=("application/vnd.cnai.model.manifest.v1+json",
                         "application/vnd.cncf.model.manifest.v1+json")),
    Line("kitops", family="modelkit", artifacts=("ocibridge.kinds.kitops.family", "ModelKitFamily"), writes=True,
         config_types=("application/vnd.kitops.modelkit.config.v1+json",),
         artifact_types=("application/vnd.kitops.modelkit.manifest.v1+json",)),
    Line("docker", family="docker-model", artifacts=("ocibridge.kinds.docker.family", "DockerModelFamily"),
         writes=True,
         config_types=("application/vnd.docker.ai.model.config.v0.1+json",
                       "application/vnd.docker.ai.model.config.v0.2+json")),
    Line("modelcar", family="modelcar", artifacts=("ocibridge.kinds.modelcar.family", "ModelCarFamily"),
         exports=True, probes=True),
    Line("carton", format="carton", source=("ocibridge.kinds.carton.kind", "CartonFormat"), sniffs=True,
         suffixes=(".carton",)),
    Line("mlsteam", format="mlarchive", source=("ocibridge.kinds.mlsteam.kind", "MlarchiveFormat"), sniffs=True,
         suffixes=(".mlarchive",)),
    Line("ollama", format="ollama", source=("ocibridge.kinds.ollama.kind", "OllamaFormat"), schemes=("ollama:",),
         grammar=("ocibridge.oci.reference", "parse_ollama_reference"),
         locator=("ocibridge.oci.reference", "OllamaReference"),
         opener=("ocibridge.kinds.ollama.target", "open_ollama_target"),
         family="ollama", artifacts=("ocibridge.kinds.ollama.family", "OllamaFamily"), exports=True, converts=True),
    Line("hf", format="hf", source=("ocibridge.kinds.hf.kind", "HubCacheFormat"), schemes=("hf:",),
         grammar=("ocibridge.kinds.hf.locator", "parse_hub_reference"),
         locator=("ocibridge.kinds.hf.locator", "HubReference"),
         opener=("ocibridge.kinds.hf.artifact", "open_hub_target")),
    Line("directory", format="directory", source=("ocibridge.kinds.directory.source", "DirectoryFormat"),
         fallback=True),
]


def register(line: Line) -> None:
    """Add a kind (a plugin's) before the fallback: its format is tried before a plain directory
    and its family after every built-in one."""
    taken = {n for k in KINDS for n in (k.name, k.format, k.family) if n is not None}
    if any(n in taken for n in {line.name, line.format, line.family} if n is not None):
        raise ValueError(f"kind {line.name!r} registered twice")
    at = next((i for i, k in enumerate(KINDS) if k.fallback), len(KINDS))
    KINDS.insert(at, line)


def unregister(name: str) -> None:
    """Remove the kind ``name`` (the line :func:`register` added)."""
    KINDS[:] = [k for k in KINDS if k.name != name]


def sources() -> list[Line]:
    """The kinds with a source format, in detection order."""
    return [k for k in KINDS if k.source is not None]


def families() -> list[Line]:
    """The kinds with a model family, in detection order."""
    return [k for k in KINDS if k.artifacts is not None]


def format_choices() -> list[str]:
    """``--format`` choices: every format named by a local path (a scheme names the others)."""
    by_path = [k for k in sources() if not k.schemes]
    return [k.format or "" for k in by_path if k.fallback] + [k.format or "" for k in by_path if not k.fallback]


def family_names() -> list[str]:
    """``--to`` choices, in detection order."""
    return [k.family or "" for k in families()]


def file_suffixes() -> tuple[str, ...]:
    """Suffixes that make a name a local file, not a registry reference (``a.b/m.carton``)."""
    return tuple(s for k in KINDS for s in k.suffixes)


def source_kinds() -> str:
    """How the help names what push reads and pull writes: ``directory, *.carton, ...``."""
    kinds = [k.format or "" for k in sources() if k.fallback]
    kinds += [f"*{s}" for k in KINDS for s in k.suffixes]
    kinds += [f"{s}NAME" for k in KINDS for s in k.schemes]
    return ", ".join(kinds)


_MADE: dict[tuple[str, str], Any] = {}


def made(named: tuple[str, str]) -> Any:
    """The object of the class a line names (its family, its source format), made once, its
    module imported on first use: detection stops at the first kind that matches, so a
    ModelPack artifact never loads the other kinds' modules."""
    if named not in _MADE:
        module, cls = named
        _MADE[named] = getattr(importlib.import_module(module), cls)()
    return _MADE[named]


def line_named(lines: list[Line], name: str, key: Callable[[Line], str | None], what: str) -> Line:
    """The line of ``lines`` whose ``key`` is ``name``; one error line naming those there are."""
    for line in lines:
        if key(line) == name:
            return line
    raise OcibridgeError(f"unknown {what} {name!r} (known: {', '.join(str(key(k)) for k in lines)})")
