"""Ollama models in the table of kinds: ``ollama:NAME`` (the local store) and
``ollama://[host/]NAME`` (a registry) as sources and destinations, and any Ollama model found
in a store (its family, on the same line of the table, knows one by its media types) converted
by what it is."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from ocibridge.kinds.source import ExportRequest, ReadRequest

if TYPE_CHECKING:
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.pull_result import PullResult


class OllamaFormat:
    name: ClassVar[str] = "ollama"
    family: ClassVar[str] = "ollama"
    picks_files: ClassVar[bool] = False
    shows_progress: ClassVar[bool] = False

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.oci.reference import parse_ollama_reference
        from ocibridge.places.targets import open_store_target

        parsed = request.source if request.source is not None else parse_ollama_reference(source)
        origin = open_store_target(parsed, options=request.registry_options)
        return self.read_artifact(origin.store, origin.reference, dataclasses.replace(request, source=parsed))

    def read_artifact(self, store: Store, reference: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.kinds.ollama.reader import read_ollama
        from ocibridge.oci.reference import OllamaReference

        # the name the user gave (ollama:NAME, ollama://HOST/NAME) names the model it becomes;
        # a model found in a layout or a plain registry repository has none
        source = request.source
        name = source.name if isinstance(source, OllamaReference) else None
        return read_ollama(store, reference, name)

    def mount_sources(self, origin: Store, reference: str) -> dict[str, Store]:
        from ocibridge.kinds.ollama.blobmounts import mount_sources

        return mount_sources(origin, reference)

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        from ocibridge.kinds.ollama.exporter import export_ollama
        from ocibridge.oci.reference import parse_ollama_reference
        from ocibridge.places.targets import open_store_target
        from ocibridge.transfer.pull_result import PullResult

        located = request.destination if request.destination is not None else parse_ollama_reference(dest)
        target = open_store_target(located, for_write=True, options=request.registry_options)
        export_ollama(store, desc, target)
        return PullResult(desc.digest, dest, self.name)
