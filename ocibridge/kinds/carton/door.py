"""Carton (``*.carton``) in the table of kinds: read into a model package (found by suffix or by
content), exported back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ocibridge.kinds.source import ExportRequest, ReadRequest, existing_file, export_file, zip_lists

if TYPE_CHECKING:
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.results import PullResult


class CartonFormat:
    name: ClassVar[str] = "carton"
    picks_files: ClassVar[bool] = False
    shows_progress: ClassVar[bool] = False

    def sniff(self, path: Path) -> bool:
        """A zip whose central directory (read within the reader's limits) holds Carton's
        MANIFEST and carton.toml."""
        from ocibridge.kinds.carton.manifest import MANIFEST_NAME, TOML_NAME
        from ocibridge.kinds.carton.zipread import scan_entries

        return zip_lists(path, {MANIFEST_NAME, TOML_NAME}, scan_entries)

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.kinds.carton.links import LinkFetcher
        from ocibridge.kinds.carton.reader import read_carton

        fetcher = LinkFetcher(options=request.registry_options)  # LINKS reached as a pull reaches a registry
        return read_carton(existing_file(source, self.name), links_fetcher=fetcher)

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        from ocibridge.kinds.carton.exporter import export_carton

        return export_file(store, desc, dest, request, self.name, export_carton)
