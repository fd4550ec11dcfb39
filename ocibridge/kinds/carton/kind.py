"""Carton (``*.carton``) in the table of kinds: read into a model package (found by suffix or by
content), exported back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ocibridge.kinds.source import ReadRequest, WriteFile, ZipArchiveFormat, existing_file

if TYPE_CHECKING:
    from ocibridge.core.zipbound import ZipMember
    from ocibridge.model.package import ModelPackage


class CartonFormat(ZipArchiveFormat):
    name: ClassVar[str] = "carton"

    def members(self) -> tuple[set[str], Callable[[Path], list[ZipMember]]]:
        """Carton's MANIFEST and carton.toml, read within the Carton reader's limits."""
        from ocibridge.kinds.carton.manifest import MANIFEST_NAME, TOML_NAME
        from ocibridge.kinds.carton.zipread import scan_entries

        return {MANIFEST_NAME, TOML_NAME}, scan_entries

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.kinds.carton.links import LinkFetcher
        from ocibridge.kinds.carton.reader import read_carton

        fetcher = LinkFetcher(options=request.registry_options)  # LINKS reached as a pull reaches a registry
        return read_carton(existing_file(source, self.name), links_fetcher=fetcher)

    def writer(self) -> WriteFile:
        from ocibridge.kinds.carton.exporter import export_carton

        return export_carton
