"""What a visitor looks for first on a model's page, as the Hub's side panel puts it at the top:
signed or not (and verified by serve's keys or not), allowed by the policy or not, size, tags,
license. Made from what the page gathered already: no read of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Glance:
    signatures: int  # signatures referring to the manifest (classic and bundles)
    verified: str  # "verified": a --verify-key key verified one; "not verified"; "": serve has no keys
    policy: str  # the policy file that allowed it, or "" (no file applies)
    size: int
    tags: tuple[str, ...]  # the model card's tags
    license: str
    policy_checks: bool = False  # the policy entry asks for something (not insecureAcceptAnything alone)


def glance(signatures: int, keys: bool, key_problem: str, policy_file: str, size: int,
           descriptor: Mapping[str, str], card: Mapping[str, Any], *, policy_checks: bool = False) -> Glance:
    """From the page's gathered facts: ``descriptor`` (the config's, as shown), ``card`` (the
    card metadata the artifact carries)."""
    verified = "" if not keys else ("not verified" if key_problem else "verified")
    tags = card.get("tags")
    licenses = descriptor.get("licenses") or card.get("license") or ""
    return Glance(signatures, verified, policy_file, size, tuple(tags) if isinstance(tags, list) else (),
                  str(licenses), policy_checks)
