"""The values the options of push, pull and convert take: source formats, model families,
ModelPack namings, layer kinds and variants, the metadata fields a writer sets. Read from the
tables that define them (kinds/table.py, oci/mediatypes.py, kinds/overrides.py) without
loading a kind, so ``--help`` lists them quickly and the command takes them from the API."""

from __future__ import annotations

from ocibridge.chunks import hashes
from ocibridge.kinds.overrides import OVERRIDES
from ocibridge.kinds.table import family_names, format_choices
from ocibridge.kinds.table import source_kinds as _source_kinds
from ocibridge.oci.mediatypes import Family, Kind, Variant

#: the ModelPack naming written unless another is asked for
DEFAULT_MEDIA_TYPES = Family.CNAI.value


def chunk_hashes() -> list[str]:
    """Hashes a chunk table may name (push's ``--chunk-hash``), the default first."""
    return [hashes.DEFAULT] + [h for h in hashes.KNOWN if h != hashes.DEFAULT]


def source_formats() -> list[str]:
    """Formats a source path may be read as (push's and pull's ``--format``)."""
    return format_choices()


def families() -> list[str]:
    """Model families a push or convert writes (``--to``), in detection order."""
    return family_names()


def media_type_families() -> list[str]:
    """ModelPack namings (``--media-types``): ``cnai``, ``cncf``."""
    return [f.value for f in Family]


def layer_kinds() -> list[str]:
    """Kinds of model file (``--group``, ``--kind GLOB=KIND``)."""
    return [k.value for k in Kind]


def layer_variants() -> list[str]:
    """How a layer is packed (``--layer KIND=VARIANT``)."""
    return [v.value for v in Variant]


def metadata_fields() -> dict[str, tuple[str, str]]:
    """The descriptor/config fields a writer sets (``--arch`` & co.): name -> (section, field)."""
    return dict(OVERRIDES)


def source_kinds() -> str:
    """How help texts name what push reads and pull writes: ``directory, *.carton, ...``."""
    return _source_kinds()
