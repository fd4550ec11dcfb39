"""References: registry references with Docker's defaults, and OCI layout references.

``host[:port]/repo[:tag][@digest]`` — no host means Docker Hub (``docker.io``), a one-part
repository there means ``library/<name>``, no tag and no digest means ``latest``.
``oci:PATH[:TAG|@DIGEST]`` names an OCI image layout directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidReference
from .digest import is_digest

DEFAULT_REGISTRY = "docker.io"
DEFAULT_TAG = "latest"
LAYOUT_SCHEME = "oci:"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*\Z")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?\Z")


def check_tag(tag: str) -> str:
    if not _TAG_RE.match(tag):
        raise InvalidReference(f"invalid tag {tag!r}")
    return tag


@dataclass(frozen=True)
class RegistryReference:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What the distribution API takes after /manifests/: the digest if pinned, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    def with_digest(self, digest: str) -> RegistryReference:
        return RegistryReference(self.registry, self.repository, None, digest)

    def __str__(self) -> str:
        s = f"{self.registry}/{self.repository}"
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s


@dataclass(frozen=True)
class LayoutReference:
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        return self.digest or self.tag or DEFAULT_TAG

    def __str__(self) -> str:
        s = f"{LAYOUT_SCHEME}{self.path}"
        if self.digest:
            return s + f"@{self.digest}"
        return s + f":{self.tag}" if self.tag else s


def _split_digest(text: str) -> tuple[str, str | None]:
    if "@" not in text:
        return text, None
    head, _, digest = text.rpartition("@")
    if not is_digest(digest):
        raise InvalidReference(f"invalid digest in reference: {digest!r}")
    return head, digest


def parse_registry_reference(text: str) -> RegistryReference:
    """Parse ``host[:port]/repo[:tag][@digest]`` with Docker's defaults."""
    original = text
    if not text or any(c.isspace() for c in text):
        raise InvalidReference(f"invalid reference {original!r}")
    if "://" in text:
        raise InvalidReference(f"invalid reference {original!r}: no scheme expected")
    rest, digest = _split_digest(text)
    tag = None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], check_tag(rest[colon + 1:])
    first, sep, remainder = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        registry, repository = first, remainder
        if not _HOST_RE.match(registry):
            raise InvalidReference(f"invalid registry host {registry!r} in {original!r}")
    else:
        registry, repository = DEFAULT_REGISTRY, rest
    if registry in ("index.docker.io", "registry-1.docker.io"):
        registry = DEFAULT_REGISTRY
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = f"library/{repository}"
    if not _REPO_RE.match(repository):
        raise InvalidReference(
            f"invalid repository {repository!r} in {original!r} "
            "(lowercase letters, digits and separators . _ - /)"
        )
    if tag is None and digest is None:
        tag = DEFAULT_TAG
    return RegistryReference(registry, repository, tag, digest)


def parse_layout_reference(text: str) -> LayoutReference:
    """Parse ``oci:PATH[:TAG|@DIGEST]``; the tag is what follows the last ':' after the last '/'."""
    if not text.startswith(LAYOUT_SCHEME):
        raise InvalidReference(f"not a layout reference: {text!r}")
    body = text[len(LAYOUT_SCHEME):]
    body, digest = _split_digest(body)
    tag = None
    slash = body.rfind("/")
    colon = body.rfind(":")
    if colon > slash and digest is None:
        body, tag = body[:colon], check_tag(body[colon + 1:])
    if not body:
        raise InvalidReference(f"layout reference {text!r} has no path")
    return LayoutReference(body, tag, digest)


def is_layout_reference(text: str) -> bool:
    return text.startswith(LAYOUT_SCHEME)
