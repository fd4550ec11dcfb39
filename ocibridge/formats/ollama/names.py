"""Ollama model names: ``[scheme://][host/][namespace/]model[:tag][@digest]``.

Defaults are Ollama's: host ``registry.ollama.ai``, namespace ``library``, tag ``latest``.
Every part is checked against Ollama's character rules, which also keeps the parts safe to use
as path components of the local store (no ``..``, no separators).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidReference
from ...oci.digest import is_digest

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MODELS_ENV = "OLLAMA_MODELS"

_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,349}(?::[0-9]{1,5})?\Z")
_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}\Z")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}\Z")
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


@dataclass(frozen=True)
class OllamaName:
    """A fully qualified Ollama model name."""

    host: str = DEFAULT_HOST
    namespace: str = DEFAULT_NAMESPACE
    model: str = ""
    tag: str = DEFAULT_TAG
    digest: str | None = None

    @property
    def repository(self) -> str:
        """The registry repository: ``namespace/model``."""
        return f"{self.namespace}/{self.model}"

    @property
    def display(self) -> str:
        """The short form Ollama shows: defaults left out."""
        head = "" if self.host == DEFAULT_HOST else f"{self.host}/"
        if self.namespace != DEFAULT_NAMESPACE or head:
            head += f"{self.namespace}/"
        return f"{head}{self.model}:{self.tag}" + (f"@{self.digest}" if self.digest else "")

    @property
    def display_model(self) -> str:
        """The short form without tag and digest: what names the model across its tags."""
        return self.display.split("@", 1)[0].rsplit(":", 1)[0]

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    @property
    def is_loopback(self) -> bool:
        host = self.host.rsplit(":", 1)[0] if self.host.count(":") == 1 else self.host
        return host in _LOOPBACK


def _looks_like_host(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def parse_ollama_name(text: str) -> OllamaName:
    """Parse a model name as Ollama does (positional parts), with one refinement: in a two-part
    name the first part is a host when it looks like one (has ``.`` or ``:`` or is localhost)."""
    original = text
    if "://" in text:
        text = text.split("://", 1)[1]
    if not text or any(c.isspace() for c in text):
        raise InvalidReference(f"invalid Ollama model name {original!r}")
    digest = None
    if "@" in text:
        text, digest = text.split("@", 1)
        if not is_digest(digest):
            raise InvalidReference(f"invalid digest in Ollama model name {original!r}")
    tag = DEFAULT_TAG
    slash, colon = text.rfind("/"), text.rfind(":")
    if colon > slash:
        text, tag = text[:colon], text[colon + 1:]
    parts = text.split("/")
    host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
    if len(parts) == 3:
        host, namespace, model = parts
    elif len(parts) == 2:
        if _looks_like_host(parts[0]):
            host, model = parts
        else:
            namespace, model = parts
    elif len(parts) == 1:
        model = parts[0]
    else:
        raise InvalidReference(
            f"invalid Ollama model name {original!r}: expected [host/][namespace/]model[:tag]"
        )
    if not _HOST_RE.match(host):
        raise InvalidReference(f"invalid host {host!r} in Ollama model name {original!r}")
    for what, value in (("namespace", namespace), ("model", model)):
        if not _PART_RE.match(value):
            raise InvalidReference(f"invalid {what} {value!r} in Ollama model name {original!r}")
    if not _TAG_RE.match(tag):
        raise InvalidReference(f"invalid tag {tag!r} in Ollama model name {original!r}")
    return OllamaName(host, namespace, model, tag, digest)


def default_models_dir() -> Path:
    """``$OLLAMA_MODELS``, else ``~/.ollama/models`` (where Ollama keeps its store)."""
    value = os.environ.get(MODELS_ENV)
    return Path(value).expanduser() if value else Path.home() / ".ollama" / "models"
