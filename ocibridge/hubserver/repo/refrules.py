"""Which names a Hub branch or tag may have: git's rules for a ref name (``git check-ref-format``),
which the Hub keeps, not a registry tag's. ``feature/x`` is a branch on the Hub and no registry
tag: such a ref lives at a reserved tag of its own (:mod:`.refnames`)."""

from __future__ import annotations

import re

from ocibridge.errors import InvalidReference
from ocibridge.oci.reference import check_tag

#: what a ref name may be at most (the Hub's refs are git's; a registry tag's 128 is not the bound)
NAME_MAX = 255
#: characters git refuses in a ref name: controls, space, ``~ ^ : ? * [ \`` and DEL
_BAD = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]")


def hub_ref_name(name: str) -> str:
    """``name`` when git would take it as a branch or tag name; else :class:`InvalidReference`."""
    why = _why_not(name)
    if why:
        raise InvalidReference(f"invalid branch or tag name {name!r}: {why}")
    return name


def is_tag(name: str) -> bool:
    """Whether ``name`` is a tag a registry takes (else its ref lives at a reserved one)."""
    try:
        check_tag(name)
    except InvalidReference:
        return False
    return True


def _why_not(name: str) -> str:
    if not name or len(name) > NAME_MAX:
        return f"1 to {NAME_MAX} characters"
    if _BAD.search(name):
        return "no spaces, control characters or any of ~ ^ : ? * [ \\"
    if "@{" in name or name == "@":
        return "no '@{' (git reads it as a reflog)"
    if ".." in name or "//" in name or name.startswith("/") or name.endswith(("/", ".", ".lock")):
        return "no '..' or '//', no '/' at either end, no '.' or '.lock' at the end"
    if any(part.startswith(".") for part in name.split("/")):
        return "no part starting with '.'"
    return ""
