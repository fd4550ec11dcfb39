"""A revision as the catalog resolved it (:class:`Resolved`), what every route reads a landed
revision through; apart from the catalog, so that what the catalog holds (an upstream, a revision
arriving: :mod:`.arriving`) can name it without importing the catalog."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.sources import Repository, Source
    from ocibridge.oci.models import Descriptor, Manifest


@dataclass(frozen=True)
class Resolved:
    """A revision of a repo id, resolved: the manifest it names and the model manifest."""

    repo_id: str
    revision: str
    commit: str  # the first 40 hex digits of ``top``'s digest
    top: Descriptor  # what the revision resolves to (an index, or the model manifest)
    model: Descriptor  # the model manifest
    manifest: Manifest
    repo: Repository
    source: Source
    created: str | None = None  # when the model was made (:func:`created_of`), as the artifact says
    card: Mapping[str, Any] | None = None  # the model card's metadata the artifact carries (the Hub's cardData)
    tag: str | None = None  # the tag the revision named (None: a digest or commit id), as the policy's scopes see it
