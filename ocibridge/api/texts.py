"""What a result reads as for a person: the text a command prints in place of ``--json``.

A program that shows results (a notebook, a job's log) prints the same lines the command does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.transfer.results import InspectResult


def inspect_text(result: InspectResult) -> str:
    """``ocibridge inspect``'s text: family, digest, media types, then a line per layer."""
    from ocibridge.model.inspect import format_inspect

    return format_inspect(result.as_dict())
