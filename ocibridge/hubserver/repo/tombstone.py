"""The manifest a tag serve deleted names (oci/bookkeeping.py): a ref deleted through the Hub's
API (``delete_branch``, ``delete_tag``, every tag of a ``delete_repo``) is moved here rather than
deleted, because most registries delete a manifest with every tag naming it, not one tag, and
many refuse deletes. Its bytes are the same in every repository, so its digest is known without
asking: a tag that resolves to :data:`DIGEST` names no revision."""

from __future__ import annotations

from ocibridge.oci.bookkeeping import TOMBSTONE_ARTIFACT_TYPE
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest

#: the empty config and layer (image-spec's ``application/vnd.oci.empty.v1+json``)
EMPTY_JSON = b"{}"
EMPTY = Descriptor.for_bytes(OCI_EMPTY, EMPTY_JSON)
BODY = Manifest(mediaType=OCI_MANIFEST, artifactType=TOMBSTONE_ARTIFACT_TYPE, config=EMPTY,
                layers=[EMPTY]).to_json_bytes()
DESCRIPTOR = Descriptor.for_bytes(OCI_MANIFEST, BODY)
DIGEST = DESCRIPTOR.digest


def is_tombstone(digest: str) -> bool:
    """Whether a tag resolving to ``digest`` was deleted by serve."""
    return digest == DIGEST
