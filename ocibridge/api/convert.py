"""``convert`` as an API call: the two references located once here (the edge), then the
conversion of :func:`ocibridge.kinds.conversion.convert`, which takes locators only."""

from __future__ import annotations

from typing import Any

from ocibridge.kinds.conversion import ConvertResult
from ocibridge.kinds.conversion import convert as convert_located
from ocibridge.kinds.locate import Locator, Role, locate
from ocibridge.kinds.targets import closes_its_stores


@closes_its_stores
def convert(src: str | Locator, dst: str | Locator, to: str, **options: Any) -> ConvertResult:
    """Convert the artifact at ``src`` (a model reference, or ``hf:ORG/NAME[@REVISION]``) into
    family ``to`` and store it at ``dst``; ``options`` as :func:`ocibridge.kinds.conversion.convert`."""
    return convert_located(locate(src, Role.MODEL), locate(dst, Role.DESTINATION), to, **options)
