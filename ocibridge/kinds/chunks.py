"""A conversion carries the chunk table its source manifest binds (docs/lazy.md).

Family writers keep the source's manifest annotations, the binding among them; but the table
names layers, and the new manifest may hold fewer raw ones (tar layers of a ModelKit or a
ModelCar image have no byte ranges per file). So the table is read from the source and checked
against the digest it is bound by, cut down to the layers that survive byte for byte, bound by
the new manifest and served as its referrer; what was cut is reported as lost.
"""

from __future__ import annotations

from dataclasses import replace

from ocibridge.chunks.carry import ChunkReferrer, bound_source_table, describe_reduction, rebind, reduce_table
from ocibridge.kinds.neutral import Loss
from ocibridge.kinds.view import ConvertedStore
from ocibridge.oci.models import Manifest
from ocibridge.stores.base import Store

#: the field a dropped or reduced table is reported under (``lost`` of a conversion)
FIELD = "chunk table"


def carry_chunks(source: Store, source_digest: str, source_manifest: Manifest, converted: ConvertedStore,
                 *, keeps_table: bool, family: str) -> tuple[ConvertedStore, list[Loss]]:
    """``converted`` binding (and serving) what survives of the table that ``source_manifest``
    binds, and the losses to report. ``keeps_table``: whether the target family's manifest
    keeps annotations a reader can find (an exporter's does not).
    A table served with other bytes than its binding names raises: nothing is written."""
    found = bound_source_table(source, source_manifest)
    losses = [Loss(FIELD, found.note, False)] if found.note else []
    table = found.table
    carried = None
    if table is not None and keeps_table:
        carried = reduce_table(table, converted.manifest.layers)
    if table is not None:
        said = describe_reduction(table, carried) if keeps_table else (
            f"dropped (a {family} manifest keeps no chunk table): lazy reads fall back to whole-blob reads")
        if said:
            losses.append(Loss(FIELD, f"{table.descriptor().digest} of {source_digest}: {said}", False))
    manifest = rebind(converted.manifest, carried)
    if manifest.annotations != converted.manifest.annotations:  # a restored original may already bind it
        converted = ConvertedStore(converted.inner, replace(converted.written, manifest=manifest.to_json_bytes()))
    if carried is not None and carried.layers:
        converted = ConvertedStore(converted.inner, converted.written, ChunkReferrer(converted.descriptor, carried))
    return converted, losses
