"""The OCI wire models as pydantic models: what ``schemas/oci-*.schema.json`` are generated from.

The models every command uses are the plain ones of :mod:`.models` (no pydantic to import);
tests/test_oci_models.py holds the two to the same documents. Unknown fields are kept
(``extra="allow"``); serialisation is canonical (no whitespace, keys in model order, None
fields dropped).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ocibridge.oci.digest import check_digest
from ocibridge.oci.mediatypes import OCI_INDEX, OCI_MANIFEST


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json_bytes(self) -> bytes:
        """Canonical JSON: compact, None omitted; what digests are computed over."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


class Platform(_Wire):
    architecture: str
    os: str
    os_version: str | None = Field(default=None, alias="os.version")
    variant: str | None = None


class Descriptor(_Wire):
    mediaType: str
    digest: str
    size: int = Field(ge=0)
    urls: list[str] | None = None
    annotations: dict[str, str] | None = None
    artifactType: str | None = None
    platform: Platform | None = None

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        return check_digest(v)


class Manifest(_Wire):
    schemaVersion: int = 2
    mediaType: str | None = OCI_MANIFEST
    artifactType: str | None = None
    config: Descriptor
    layers: list[Descriptor] = Field(default_factory=list)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


class Index(_Wire):
    schemaVersion: int = 2
    mediaType: str | None = OCI_INDEX
    artifactType: str | None = None
    manifests: list[Descriptor] = Field(default_factory=list)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None


class RootFS(_Wire):
    type: str = "layers"
    diff_ids: list[str] = Field(default_factory=list)


class ImageConfig(_Wire):
    """An OCI/Docker image config, as containerd needs for a mountable image."""

    created: str | None = None
    architecture: str = "amd64"
    os: str = "linux"
    config: dict[str, Any] | None = None
    rootfs: RootFS = Field(default_factory=RootFS)
    history: list[dict[str, Any]] | None = None

