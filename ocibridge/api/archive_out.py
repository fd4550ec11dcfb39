"""An archive named as the destination of ``push``, ``copy`` or ``convert`` (``out.carton``,
``out.mlarchive``): a local file, as docs/cli.md says of an archive-suffixed name, written as
``pull REF out.carton`` writes it (the same exporter, the same refusal of an existing file);
never a model of the local store named ``out.carton:latest``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.kinds import table
from ocibridge.oci.reference import PathReference
from ocibridge.places.locate import Locator, Role, locate, text_of

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.kinds.source import SourceFormat
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.results import PushResult


def archive_output(dest: str | Locator | None) -> tuple[PathReference, SourceFormat] | None:
    """The archive file ``dest`` names by its suffix, and the format that writes it; None for a
    store (or any other name, which the store rules locate)."""
    if not isinstance(dest, str) or not dest.lower().endswith(tuple(s.lower() for s in table.file_suffixes())):
        return None  # decided by the name alone: a copy between registries loads no format (startup)
    from ocibridge.kinds import dispatch

    located = locate(dest, Role.OUTPUT)
    if not isinstance(located, PathReference):
        return None
    fmt = dispatch.destination_format(located)
    if fmt is None or fmt.picks_files:  # a directory (or the Hub cache): not a file
        return None
    return located, fmt


def write_archive(output: tuple[PathReference, SourceFormat], store: Store, desc: Descriptor,
                  transfer: TransferOptions) -> PushResult:
    """Write the artifact ``desc`` of ``store`` as the archive ``output`` names (an existing
    file there is refused, unless it already is this archive: core/overwrite.py)."""
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.kinds import dispatch
    from ocibridge.transfer.copy import CopyStats
    from ocibridge.transfer.results import PushResult

    dest, fmt = output
    request = dispatch.ExportRequest(transfer.registry_options(), transfer.concurrency, None, None,
                                 OnExisting.REFUSE, dest)
    pulled = fmt.export(store, desc, text_of(dest), request)
    return PushResult(pulled.output, desc, CopyStats(root=desc), {"archive": pulled.output, "format": fmt.name})
