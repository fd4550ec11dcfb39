"""MLSteam archives (``*.mlarchive``) in the table of kinds: read into a model package (found
by suffix or by content), exported back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ocibridge.kinds.source import ExportRequest, ReadRequest, existing_file, export_file, zip_lists

if TYPE_CHECKING:
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.results import PullResult


class MlarchiveFormat:
    name: ClassVar[str] = "mlarchive"
    picks_files: ClassVar[bool] = False
    shows_progress: ClassVar[bool] = False

    def sniff(self, path: Path) -> bool:
        """A zip whose central directory (read within the reader's limits) holds an MLSteam
        manifest.json at its root."""
        from ocibridge.kinds.mlsteam.manifest import MANIFEST_NAME
        from ocibridge.kinds.mlsteam.ziparchive import scan_zip

        return zip_lists(path, {MANIFEST_NAME}, scan_zip)

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.kinds.mlsteam.reader import read_mlarchive

        return read_mlarchive(existing_file(source, self.name))

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        from ocibridge.kinds.mlsteam.exporter import export_mlarchive

        return export_file(store, desc, dest, request, self.name, export_mlarchive)
