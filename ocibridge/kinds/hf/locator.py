"""``hf:ORG/NAME[@REVISION]``: a model of the local Hugging Face cache, as a typed locator (the
hf kind's grammar in the table of kinds; :func:`ocibridge.kinds.locate.locate` calls it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ocibridge.kinds.hf.hubcache import SCHEME, parse


@dataclass(frozen=True)
class HubReference:
    """A repository of the Hub cache and the revision asked for (None: ``main``)."""

    repo_id: str
    revision: str | None = None
    written: str = field(default="", compare=False, repr=False)

    @property
    def text(self) -> str:
        return self.written or str(self)

    def __str__(self) -> str:
        return f"{SCHEME}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")


def parse_hub_reference(text: str) -> HubReference:
    """``hf:ORG/NAME[@REVISION]`` (the scheme may be left out); one error line if malformed."""
    repo_id, revision = parse(text)
    return HubReference(repo_id, revision, written=text)
