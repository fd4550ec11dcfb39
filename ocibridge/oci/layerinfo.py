"""What a layer's annotations say of the file it carries: its model path and its mode."""

from __future__ import annotations

import contextlib
import json

from ocibridge.oci.mediatypes import ANNOTATION_TITLE, Family
from ocibridge.oci.models import Descriptor


def layer_path(desc: Descriptor) -> str | None:
    """The model path a layer carries: the filepath annotation of either family, else the title."""
    annotations = desc.annotations or {}
    for family in Family:
        if family.filepath_key in annotations:
            return annotations[family.filepath_key]
    return annotations.get(ANNOTATION_TITLE)


def layer_mode(desc: Descriptor) -> int:
    """0o755 for a layer whose file metadata says executable, else 0o644."""
    annotations = desc.annotations or {}
    for family in Family:
        raw = annotations.get(family.metadata_key)
        if raw:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                mode = int(json.loads(raw).get("mode", 0o644))
                return 0o755 if mode & 0o111 else 0o644
    return 0o644
