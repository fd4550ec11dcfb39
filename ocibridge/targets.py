"""Turning the strings users type (SOURCE, DEST, REF) into stores, packages and exporters.

| form                          | what                                      |
|-------------------------------|-------------------------------------------|
| ``oci:PATH[:TAG\\|@DIGEST]``  | an OCI image layout directory             |
| ``host[:port]/repo[:tag]``    | a registry repository                     |
| ``ollama:NAME``               | the local Ollama store ($OLLAMA_MODELS)   |
| ``ollama://[host/]NAME``      | an Ollama-compatible registry             |
| ``*.carton`` / ``*.mlarchive``| an archive file (by extension or --format)|
| an existing directory         | a plain model directory (source), or the directory to pull into |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidReference
from .oci.reference import (
    DEFAULT_TAG,
    is_layout_reference,
    parse_layout_reference,
    parse_registry_reference,
)
from .stores.base import Store
from .stores.layout import LAYOUT_FILE, LayoutStore

STORE_ENV = "OCIBRIDGE_STORE"
ARCHIVE_FORMATS = {".carton": "carton", ".mlarchive": "mlarchive"}


def default_store_path() -> Path:
    """The embedded default store: ``$OCIBRIDGE_STORE`` or ``$XDG_DATA_HOME/ocibridge/store``."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "ocibridge" / "store"


@dataclass
class StoreTarget:
    """A store plus the tag or digest within it."""

    store: Store
    reference: str
    tag: str | None  # what to tag on write (None when pinned by digest only)
    text: str  # how the user wrote it, for messages


def archive_format(text: str, explicit: str | None = None) -> str | None:
    """``carton`` / ``mlarchive`` for archive paths (by --format or extension), else None."""
    if explicit and explicit != "auto":
        return explicit
    for ext, fmt in ARCHIVE_FORMATS.items():
        if text.lower().endswith(ext):
            return fmt
    return None


def is_store_reference(text: str) -> bool:
    """Whether ``text`` names a store (layout, registry, Ollama) rather than a local path."""
    if is_layout_reference(text) or text.startswith("ollama:"):
        return True
    if os.path.exists(text) or text.startswith((".", "/", "~")) or archive_format(text):
        return False
    first = text.split("/", 1)[0]
    return "/" in text and ("." in first or ":" in first or first == "localhost")


def open_store_target(text: str, *, for_write: bool = False, **registry_options) -> StoreTarget:
    """Open the store a reference names. Registry and Ollama stores are imported lazily."""
    if is_layout_reference(text):
        ref = parse_layout_reference(text)
        store = LayoutStore(os.path.expanduser(ref.path), create=for_write)
        return StoreTarget(store, ref.reference, ref.tag or (None if ref.digest else DEFAULT_TAG), text)
    if text.startswith("ollama:"):
        from .formats.ollama import open_ollama_target  # issue 5

        return open_ollama_target(text, for_write=for_write, **registry_options)
    if os.path.exists(text):  # else a local directory would be looked up as docker.io/<path>
        is_layout = os.path.isfile(os.path.join(text, LAYOUT_FILE))
        hint = f"; as an OCI image layout it is written oci:{text}" if is_layout else ""
        raise InvalidReference(
            f"{text} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag]){hint}")
    registry_ref = parse_registry_reference(text)
    from .stores.registry import open_repository  # issue 3
    from .stores.registry.mirrors import open_for_reading

    opener = open_repository if for_write else open_for_reading  # reads may come from a mirror
    registry_store = opener(registry_ref, **registry_options)
    return StoreTarget(registry_store, registry_ref.reference, registry_ref.tag, text)
