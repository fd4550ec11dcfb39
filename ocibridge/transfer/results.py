"""Typed results of the Python API: one frozen dataclass per call, each with ``as_dict()`` (the
CLI's ``--json``), so callers get attributes and type checking rather than loose dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ocibridge.oci.models import Descriptor
from ocibridge.transfer.pull_result import PullResult as PullResult  # its home since pull needs it alone
from ocibridge.transfer.push_result import PushResult as PushResult  # its home since copy needs it alone


@dataclass(frozen=True)
class ValidateResult:
    """A valid artifact (an invalid one raises :class:`ocibridge.errors.ValidationError`)."""

    reference: str
    descriptor: Descriptor
    warnings: tuple[str, ...] = ()  # runtime readiness beyond the spec (validate --strict: errors)
    family: str = "modelpack"  # the model family validated (``modelkit``, ``docker-model``, ...)
    title: str = ""  # that family's name for messages; empty for ModelPack

    @property
    def digest(self) -> str:
        return self.descriptor.digest

    def as_dict(self) -> dict[str, Any]:
        return {"valid": True, "digest": self.digest, "family": self.family, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class InspectResult:
    """An artifact's manifest, config and layer table (``data`` is the ``--json`` form)."""

    reference: str
    digest: str
    media_type: str
    artifact_type: str | None
    size: int
    layers: tuple[dict[str, Any], ...]
    config: Any
    data: dict[str, Any] = field(repr=False, default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class ModelEntry:
    """One manifest listed in a layout's ``index.json`` (``list``/``ls``)."""

    name: str | None
    tag: str | None
    digest: str
    size: int  # manifest + config + layers
    created: str | None
    family: str | None  # cnai, cncf, or None for other artifacts
    attached: int = 0  # signatures and other artifacts that refer to this one (listed with --all)
    subject: str | None = None  # for an attached artifact: the digest it refers to
    ref: str | None = None  # the name stored (the layout's ref.name): local store NAME:TAG
    model: str | None = None  # the name the model's config gives it

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tag": self.tag, "digest": self.digest, "size": self.size,
                "created": self.created, "family": self.family, "attached": self.attached,
                "subject": self.subject, "ref": self.ref, "model": self.model}


@dataclass(frozen=True)
class RemoveResult:
    """What ``rm``/``delete`` took away (tags and manifests)."""

    reference: str
    digest: str
    tags: tuple[str, ...]
    referrers: tuple[str, ...] = ()  # attached artifacts removed with it (their manifests)
    dry_run: bool = False  # listed only: nothing was removed

    def as_dict(self) -> dict[str, Any]:
        out = {"reference": self.reference, "digest": self.digest, "tags": list(self.tags),
               "referrers": list(self.referrers)}
        return {**out, "dryRun": True} if self.dry_run else out


@dataclass(frozen=True)
class PruneResult:
    """Blobs of a layout that nothing listed in ``index.json`` uses: removed, or to be."""

    blobs: tuple[str, ...]
    bytes: int
    dry_run: bool
    kept_recent: int = 0  # unreferenced but younger than the grace period

    def as_dict(self) -> dict[str, Any]:
        return {"blobs": list(self.blobs), "bytes": self.bytes, "dryRun": self.dry_run,
                "keptRecent": self.kept_recent}


@dataclass(frozen=True)
class TagResult:
    digest: str
    tags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "tags": list(self.tags)}


@dataclass(frozen=True)
class ResolveResult:
    reference: str
    descriptor: Descriptor

    @property
    def digest(self) -> str:
        return self.descriptor.digest

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "digest": self.digest,
                "mediaType": self.descriptor.mediaType, "size": self.descriptor.size}


@dataclass(frozen=True)
class AttachResult:
    """An artifact pushed with ``subject`` (a signature, an SBOM, a model card)."""

    reference: str
    descriptor: Descriptor
    subject: Descriptor
    artifact_type: str

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "digest": self.descriptor.digest,
                "mediaType": self.descriptor.mediaType, "size": self.descriptor.size,
                "artifactType": self.artifact_type, "subject": self.subject.digest}


@dataclass(frozen=True)
class ReferrerNode:
    """An artifact referring to a subject, and those referring to it in turn (a signature of
    an SBOM), for showing the tree ``ocibridge discover`` draws."""

    descriptor: Descriptor
    referrers: tuple[ReferrerNode, ...] = ()


@dataclass(frozen=True)
class DiscoverResult:
    """The referrers of a subject (the referrers API, or the ``sha256-<hex>`` tag fallback);
    ``tree``: each of them with theirs, when asked (``discover(..., tree=True)``; not in
    ``--json``, which lists the subject's own)."""

    reference: str
    subject: Descriptor
    referrers: tuple[Descriptor, ...]
    tree: tuple[ReferrerNode, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "subject": self.subject.digest,
                "referrers": [r.model_dump(exclude_none=True) for r in self.referrers]}


@dataclass(frozen=True)
class LoginResult:
    """A login that succeeded; ``settings``: the file that now remembers how the host was
    reached (``--ca-file``, ``--plain-http``, ``--insecure``), when any was given."""

    host: str
    username: str
    settings: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "username": self.username, "loggedIn": True, "settings": self.settings}
