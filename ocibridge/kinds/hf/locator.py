"""``hf:ORG/NAME[@REVISION]``: a model of the local Hugging Face cache, as a typed locator (the
hf kind's grammar in the table of kinds; :func:`ocibridge.kinds.locate.locate` calls it).

``hf://ORG/NAME[@REVISION]`` names the repository on a Hub endpoint instead (``remote``): a
mirror job's source, downloaded into that cache first (docs/mirroring.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ocibridge.kinds.hf.hubcache import SCHEME, parse

REMOTE_SCHEME = "hf://"


@dataclass(frozen=True)
class HubReference:
    """A repository of the Hub cache and the revision asked for (None: ``main``); ``remote``:
    the repository on a Hub endpoint (``hf://``), which only mirror jobs read."""

    repo_id: str
    revision: str | None = None
    written: str = field(default="", compare=False, repr=False)
    remote: bool = False

    @property
    def text(self) -> str:
        return self.written or str(self)

    def __str__(self) -> str:
        scheme = REMOTE_SCHEME if self.remote else SCHEME
        return f"{scheme}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")


def parse_hub_reference(text: str) -> HubReference:
    """``hf:ORG/NAME[@REVISION]`` (the scheme may be left out), or ``hf://ORG/NAME[@REVISION]``
    (the repository on a Hub endpoint); one error line if malformed."""
    if text.startswith(REMOTE_SCHEME):
        repo_id, revision = parse(SCHEME + text[len(REMOTE_SCHEME):])
        return HubReference(repo_id, revision, written=text, remote=True)
    repo_id, revision = parse(text)
    return HubReference(repo_id, revision, written=text)
