"""Container image names as a runtime pulls them, checked where a command takes them (``--image`` and
the like): a misspelt one is a usage line, not a document the kubelet refuses at the first pod."""

from __future__ import annotations

import functools

from ocibridge.errors import OcibridgeError


@functools.lru_cache(maxsize=64)
def image_name_problem(text: str) -> str | None:
    """Why ``text`` is no image name a runtime pulls (Docker's rules: ``NAME[:TAG][@DIGEST]``), or None.
    Kept per text: argparse before Python 3.12 converts a value once for each of its intermixed passes,
    and the reference grammar reads a text once."""
    from ocibridge.oci.reference import parse_registry_reference

    try:
        parse_registry_reference(text)
    except OcibridgeError as e:
        return str(e)
    return None
