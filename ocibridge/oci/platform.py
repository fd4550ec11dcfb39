"""Platforms (``os/arch[/variant]``) as the runtimes read and match them."""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Platform


def parse_platform(text: str) -> Platform:
    """``os/arch[/variant]`` as a Platform."""
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise OcibridgeError(f"invalid platform {text!r} (expected os/arch[/variant])")
    return Platform(os=parts[0], architecture=parts[1], variant=parts[2] if len(parts) == 3 else None)


def platform_matches(have: Platform, want: Platform) -> bool:
    """os and architecture equal; a variant only has to agree where both name one."""
    if have.os != want.os or have.architecture != want.architecture:
        return False
    return not (have.variant and want.variant and have.variant != want.variant)
