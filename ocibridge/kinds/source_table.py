"""The registration lines of the source formats: what ``push`` reads and ``pull`` writes besides
stores.

Kept free of imports so that the command line can list ``--format`` choices without loading a
format (``--help`` loads neither pydantic nor httpx); :mod:`.door` imports a format's module on
first use. A line says how a format is recognised without opening anything: by a scheme the
reference starts with, or by a file suffix. A format may also recognise its files by content
(:class:`.base.SniffsContent`) and convert artifacts of a model family found in a store
(:class:`.base.ReadsArtifacts`, named by the line's ``family``). Adding a format: one module with a class implementing
:class:`.base.SourceFormat`, and one line here (or :func:`register`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Registration:
    """One source format: its ``--format`` name and where its class lives."""

    name: str
    module: str
    cls: str
    suffixes: tuple[str, ...] = ()  # file names ending so are this format (case-insensitive)
    schemes: tuple[str, ...] = ()  # references starting so are this format (not a --format choice)
    fallback: bool = False  # what a local path is when nothing else recognises it
    #: the model family whose artifacts the format converts wherever they are found (its
    #: :class:`.base.ReadsArtifacts` ``family``): a pull or push meeting an artifact of a family
    #: loads only the format that reads it, not every format to ask
    family: str | None = None


#: In detection order; the fallback last.
REGISTRATIONS: list[Registration] = [
    Registration("carton", "ocibridge.kinds.carton.door", "CartonFormat", suffixes=(".carton",)),
    Registration("mlarchive", "ocibridge.kinds.mlsteam.door", "MlarchiveFormat", suffixes=(".mlarchive",)),
    Registration("ollama", "ocibridge.kinds.ollama.door", "OllamaFormat", schemes=("ollama:",),
                 family="ollama"),
    Registration("hf", "ocibridge.kinds.hf.door", "HubCacheFormat", schemes=("hf:",)),
    Registration("directory", "ocibridge.kinds.directory.source", "DirectoryFormat", fallback=True),
]


def register(line: Registration) -> None:
    """Add a format (before the fallback, so it is tried first)."""
    if any(r.name == line.name for r in REGISTRATIONS):
        raise ValueError(f"source format {line.name!r} registered twice")
    at = next((i for i, r in enumerate(REGISTRATIONS) if r.fallback), len(REGISTRATIONS))
    REGISTRATIONS.insert(at, line)


def unregister(name: str) -> None:
    REGISTRATIONS[:] = [r for r in REGISTRATIONS if r.name != name]


def choices() -> list[str]:
    """``--format`` choices: every format named by a local path (a scheme names the others)."""
    by_path = [r for r in REGISTRATIONS if not r.schemes]
    return [r.name for r in by_path if r.fallback] + [r.name for r in by_path if not r.fallback]


def file_suffixes() -> tuple[str, ...]:
    """Suffixes that make a name a local file, not a registry reference (``a.b/m.carton``)."""
    return tuple(s for r in REGISTRATIONS for s in r.suffixes)


def source_kinds() -> str:
    """How the help names what push reads and pull writes: ``directory, *.carton, ...``."""
    kinds = [r.name for r in REGISTRATIONS if r.fallback]
    kinds += [f"*{s}" for r in REGISTRATIONS for s in r.suffixes]
    kinds += [f"{s}NAME" for r in REGISTRATIONS for s in r.schemes]
    return ", ".join(kinds)
