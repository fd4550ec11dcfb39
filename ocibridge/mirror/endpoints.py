"""Opening a job's source and target strings as stores.

``host/repo`` (every tag) or ``host/repo:tag`` / ``@digest`` (one reference) on a registry,
with the job's per-host options; ``oci:PATH[:TAG|@DIGEST]`` for a layout, PATH relative to
the job file; as sources only, ``ollama:NAME`` (the local Ollama store, ``$OLLAMA_MODELS``),
``ollama://[host/]NAME`` (an Ollama registry) and ``hf://ORG/NAME`` (a repository on a Hub
endpoint, read by mirror/hub.py). Unlike the CLI's references, a name without a
tag means *all tags*.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.kinds.hf.locator import hub_reference_of
from ocibridge.kinds.ollama.target import ollama_reference_of
from ocibridge.mirror.job import MirrorJob
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import (
    LayoutReference,
    OllamaName,
    OllamaReference,
    RegistryReference,
    ollama_model_name,
)
from ocibridge.places.locate import Locator, Role, locate
from ocibridge.stores.base import Store, close_store
from ocibridge.stores.layout import LAYOUT_FILE, LayoutStore

if TYPE_CHECKING:
    from ocibridge.stores.registry.options import RequestGate


@dataclass
class Endpoint:
    store: Store
    name: str  # repository as written for messages: host/repo or oci:PATH
    reference: str | None  # a tag or digest when one artifact is named, else None (all tags)
    host: str | None = None  # registry host, None for layouts and the local Ollama store
    ollama: bool = False  # an Ollama store or registry: its models are converted to ModelPack
    ollama_name: OllamaName | None = None  # the Ollama model an ollama:// source names (its tags name it)
    layout_to_make: Path | None = None  # a layout target not there yet: made by writable()

    @property
    def is_tag(self) -> bool:
        return self.reference is not None and not self.reference.startswith("sha256:")

    def writable(self) -> Store:
        """The store to copy into. A layout target that is not there yet is made now, when an
        artifact is about to be copied, not when the entry is planned: an entry that fails (a
        misspelt source, a registry down) or copies nothing leaves no empty layout behind."""
        if self.layout_to_make is not None:
            self.store = LayoutStore(self.layout_to_make, create=True)
            self.layout_to_make = None
        return self.store

    def close(self) -> None:
        with contextlib.suppress(Exception):
            close_store(self.store)


def open_endpoint(text: str, job: MirrorJob, *, for_write: bool = False, dry_run: bool = False,
                  gate: RequestGate | None = None) -> Endpoint:
    """A store for ``text``; a missing layout target in a dry run reads as empty. Every
    request to a registry waits for ``gate`` (the entry's rate_limit) when one is given."""
    parsed = job_reference(text)
    ollama = ollama_reference_of(parsed)
    if ollama is not None:
        if for_write:
            raise OcibridgeError(f"{text!r}: Ollama stores are mirror sources only "
                                 "(use `ocibridge pull REF ollama:NAME` to install a model)")
        return _ollama_endpoint(ollama, job, gate)
    hub = hub_reference_of(parsed)
    if hub is not None:  # planned by mirror/hub.py, downloaded when copied
        if for_write:
            raise OcibridgeError(f"{text!r}: a Hub repository is a mirror source only (the target is a "
                                 "registry repository or oci:PATH)")
        name = f"hf://{hub.typed_id}"
        return Endpoint(EmptyStore(name), name, hub.revision)
    if isinstance(parsed, LayoutReference):
        ref = parsed
        path = Path(os.path.expanduser(ref.path))
        if not path.is_absolute():
            path = job.base_dir / path
        reference = ref.digest or ref.tag
        name = f"oci:{path}"
        if for_write and not (path / LAYOUT_FILE).is_file():  # planned as empty; made once there is a copy
            if path.exists() and not path.is_dir():
                raise OcibridgeError(f"{path} exists and is not a directory")
            return Endpoint(EmptyStore(name), name, reference, layout_to_make=None if dry_run else path)
        return Endpoint(LayoutStore(path, create=for_write), name, reference)
    assert isinstance(parsed, RegistryReference)
    registry_ref = parsed
    from ocibridge.stores.registry import open_repository

    options = job.registry_options(registry_ref.registry).with_gate(gate)
    registry_store = open_repository(registry_ref, options)
    reference = (registry_ref.digest or registry_ref.tag) if registry_ref.names_version else None
    return Endpoint(registry_store, f"{registry_ref.registry}/{registry_ref.repository}", reference,
                    registry_ref.registry, ollama_name=_as_ollama_name(registry_ref))


def _as_ollama_name(ref: RegistryReference) -> OllamaName | None:
    """The Ollama model a registry repository ``namespace/model`` would hold (the name an Ollama
    model found there is given), if its parts follow Ollama's rules; else None."""
    parts = ref.repository.split("/")
    if len(parts) != 2:
        return None
    try:
        return ollama_model_name(ref.registry, parts[0], parts[1])
    except InvalidReference:
        return None


@functools.lru_cache(maxsize=256)
def job_reference(text: str) -> Locator:
    """A job's source or target, located once (places/locate.py, role ``JOB``; kept, as the job
    asks for each entry's more than once): a job names no local paths, so what is not a layout
    or Ollama name is a registry name, as Docker reads it. A registry or Ollama name that does
    not parse is the job's error."""
    try:
        return locate(text, Role.JOB)
    except InvalidReference as e:
        if text.startswith("oci:"):
            raise
        raise OcibridgeError(f"{text!r}: {e}") from None


def _ollama_endpoint(ref: OllamaReference, job: MirrorJob, gate: RequestGate | None) -> Endpoint:
    from ocibridge.kinds.ollama.store import OllamaStore, default_models_dir

    name = ref.name
    reference = name.digest or (name.tag if name.names_version else None)
    if ref.remote:
        from ocibridge.stores.registry import open_repository

        repo = RegistryReference(name.host, name.repository, None, None)
        store: Store = open_repository(repo, job.registry_options(name.host).with_gate(gate))
        return Endpoint(store, f"{name.host}/{name.repository}", reference, name.host, ollama=True,
                        ollama_name=name)
    store = OllamaStore(default_models_dir(), name)
    return Endpoint(store, f"ollama:{name.display_model}", reference, None, ollama=True)


class EmptyStore:
    """A target that does not exist yet, as a dry run sees it: holds nothing (and, read-only,
    accepts nothing)."""

    def __init__(self, name: str):
        self.name = name

    def describe(self) -> str:
        return self.name

    def exists(self, desc: Descriptor) -> bool:
        return False

    def resolve(self, reference: str) -> Descriptor:
        raise NotFound(f"{self.name}:{reference}: not found")

    def tags(self) -> list[str]:
        return []

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        raise NotFound(f"{self.name}: {desc.digest} not found")

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        raise NotFound(f"{self.name}: {desc.digest} not found")
