"""The manifest a tag serve deleted names (oci/bookkeeping.py): a ref deleted through the Hub's
API (``delete_branch``, ``delete_tag``, every tag of a ``delete_repo``) is moved here rather than
deleted, because most registries delete a manifest with every tag naming it, not one tag, and
many refuse deletes. Its bytes are the same in every repository, so its digest is known without
asking: a tag that resolves to :data:`DIGEST` names no revision. The bytes are built below serve
(:mod:`ocibridge.stores.tombstones`), where the CLI tells a deleted tag by them too."""

from __future__ import annotations

from ocibridge.stores.tombstones import TOMBSTONE, TOMBSTONE_BODY, TOMBSTONE_DIGEST

BODY, DESCRIPTOR, DIGEST = TOMBSTONE_BODY, TOMBSTONE, TOMBSTONE_DIGEST


def is_tombstone(digest: str) -> bool:
    """Whether a tag resolving to ``digest`` was deleted by serve."""
    return digest == DIGEST
