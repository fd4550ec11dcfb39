"""``hf:ORG/NAME[@REVISION]``: a model of the local Hugging Face cache, as a typed locator (the
hf kind's grammar in the table of kinds; :func:`ocibridge.places.locate.locate` calls it);
``hf:datasets/ORG/NAME[@REVISION]``: a dataset of it, named as the Hub's URLs name it.

``hf://ORG/NAME[@REVISION]`` names the repository on a Hub endpoint instead (``remote``): a
mirror job's source, downloaded into that cache first (docs/mirroring.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ocibridge.kinds.hf.hubcache import SCHEME, parse_typed
from ocibridge.kinds.hf.repotype import DATASET, DATASETS_PART, MODEL
from ocibridge.oci.reference import RegistryReference

REMOTE_SCHEME = "hf://"


@dataclass(frozen=True)
class HubReference:
    """A repository of the Hub cache and the revision asked for (None: ``main``); ``remote``:
    the repository on a Hub endpoint (``hf://``), which only mirror jobs read; ``repo_type``:
    ``model`` or ``dataset`` (kinds/hf/repotype.py)."""

    repo_id: str
    revision: str | None = None
    written: str = field(default="", compare=False, repr=False)
    remote: bool = False
    repo_type: str = MODEL

    #: what it answers as a kind's place (ocibridge.places.locators.KindPlace): a source, not a store
    kind: ClassVar[str] = "hf"
    is_store: ClassVar[bool] = False

    @property
    def holds_referrers(self) -> bool:
        return False  # the Hub cache keeps files, no signatures

    @property
    def text(self) -> str:
        return self.written or str(self)

    @property
    def is_dataset(self) -> bool:
        return self.repo_type == DATASET

    @property
    def typed_id(self) -> str:
        """The repo id as the Hub's URLs write it: ``datasets/ORG/NAME`` for a dataset."""
        return f"{DATASETS_PART}/{self.repo_id}" if self.is_dataset else self.repo_id

    @property
    def repository_text(self) -> str:
        return (REMOTE_SCHEME if self.remote else SCHEME) + self.typed_id

    def registry_reference(self) -> RegistryReference | None:
        return None

    def __str__(self) -> str:
        scheme = REMOTE_SCHEME if self.remote else SCHEME
        return f"{scheme}{self.typed_id}" + (f"@{self.revision}" if self.revision else "")


def parse_hub_reference(text: str) -> HubReference:
    """``hf:[datasets/]ORG/NAME[@REVISION]`` (the scheme may be left out), or
    ``hf://[datasets/]ORG/NAME[@REVISION]`` (the repository on a Hub endpoint); one error line if
    malformed."""
    remote = text.startswith(REMOTE_SCHEME)
    repo_type, repo_id, revision = parse_typed(SCHEME + text[len(REMOTE_SCHEME):] if remote else text)
    return HubReference(repo_id, revision, written=text, remote=remote, repo_type=repo_type)


def as_hub_reference(value: str | HubReference) -> HubReference:
    """A Hub reference as given, or read from its text (an API argument may be either)."""
    return value if isinstance(value, HubReference) else parse_hub_reference(value)


def hub_reference_of(located: object) -> HubReference | None:
    """``located`` when it is this kind's place (the hf kind answers; no code outside it tests the type)."""
    return located if isinstance(located, HubReference) else None
