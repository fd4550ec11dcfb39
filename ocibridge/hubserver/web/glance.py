"""What a visitor looks for first on a model's page, as the Hub's side panel puts it at the top:
signed or not (and verified by serve's keys or not), allowed by the policy or not, size, tags,
license. Made from what the page gathered already: no read of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.hubserver.web.model import ModelView


@dataclass(frozen=True)
class Glance:
    signatures: int  # signatures referring to the manifest (classic and bundles)
    verified: str  # "verified": a --verify-key key verified one; "not verified"; "": serve has no keys
    policy: str  # the policy file that allowed it, or "" (no file applies)
    size: int
    tags: tuple[str, ...]  # the model card's tags
    license: str


def glance(view: ModelView) -> Glance:
    g = view.gathered
    signatures = sum(e.kind == "signature" for e in g.evidence)
    verified = "" if not g.keys else ("not verified" if g.key_problem else "verified")
    card = dict(view.resolved.card or {})
    tags = card.get("tags")
    licenses = dict(g.descriptor).get("licenses") or card.get("license") or ""
    return Glance(signatures, verified, g.policy.file if g.policy else "", view.size,
                  tuple(tags) if isinstance(tags, list) else (), str(licenses))
