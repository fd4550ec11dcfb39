"""MLSteam archives (``*.mlarchive``) in the table of kinds: read into a model package (found
by suffix or by content), exported back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ocibridge.kinds.source import ReadRequest, WriteFile, ZipArchiveFormat, existing_file

if TYPE_CHECKING:
    from ocibridge.core.zipbound import ZipMember
    from ocibridge.model.package import ModelPackage


class MlarchiveFormat(ZipArchiveFormat):
    name: ClassVar[str] = "mlarchive"

    def members(self) -> tuple[set[str], Callable[[Path], list[ZipMember]]]:
        """An MLSteam manifest.json at the root, read within the MLSteam reader's limits."""
        from ocibridge.kinds.mlsteam.manifest import MANIFEST_NAME
        from ocibridge.kinds.mlsteam.ziparchive import scan_zip

        return {MANIFEST_NAME}, scan_zip

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.kinds.mlsteam.reader import read_mlarchive

        return read_mlarchive(existing_file(source, self.name))

    def writer(self) -> WriteFile:
        from ocibridge.kinds.mlsteam.exporter import export_mlarchive

        return export_mlarchive
