"""``PushResult``, what ``push`` and ``copy_reference`` return, in a module of its own: the copy
command imports it without the other results (a dozen frozen dataclasses, ~10 ms to create).
:mod:`ocibridge.transfer.results` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.oci.models import Descriptor

if TYPE_CHECKING:
    from ocibridge.transfer.copy import CopyStats


@dataclass(frozen=True)
class PushResult:
    """What ``push``/``copy_reference`` stored: ``reference`` is pinned by digest."""

    reference: str
    descriptor: Descriptor
    stats: CopyStats
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, **self.stats.as_dict(), **self.extra}
