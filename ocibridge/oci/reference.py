"""Every reference users type, parsed in one place: the CLI, the API and mirror jobs read them here.

| form                           | parsed as                                              |
|--------------------------------|--------------------------------------------------------|
| ``host[:port]/repo[:tag][@digest]`` | :class:`RegistryReference`, with Docker's defaults |
| ``oci:PATH[:TAG|@DIGEST]``     | :class:`LayoutReference`: an OCI image layout directory |
| ``ollama:NAME``                | :class:`OllamaReference`: the local Ollama store       |
| ``ollama://[host/]NAME``       | :class:`OllamaReference`: an Ollama-compatible registry |
| anything else                  | :class:`PathReference`: a local file or directory      |

A registry reference without a host means Docker Hub (``docker.io``), a one-part repository
there means ``library/<name>``, no tag and no digest means ``latest``. Ollama names keep
Ollama's defaults (``registry.ollama.ai``, ``library``, ``latest``). Which files are archives
of a source format is not known here: :func:`parse_reference` takes their suffixes (the
table of kinds in :mod:`ocibridge.kinds.table` supplies them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ocibridge.errors import InvalidReference
from ocibridge.oci.digest import is_digest

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
class _AsWritten:
    """The text a reference was parsed from, kept for messages and results (a bare ``NAME``
    stays ``NAME``, not its ``oci:`` form); not part of its identity."""

    written: str = field(default="", compare=False, repr=False, kw_only=True)

    @property
    def text(self) -> str:
        """How the user wrote it, else its full form."""
        return self.written or str(self)


class _Pinned:
    """A reference that names a tag, a digest or neither (then ``latest``)."""

    tag: str | None
    digest: str | None

    @property
    def reference(self) -> str:
        """What the distribution API takes after /manifests/: the digest if pinned, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG


@dataclass(frozen=True)
class RegistryReference(_Pinned, _AsWritten):
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        s = f"{self.registry}/{self.repository}"
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s


@dataclass(frozen=True)
class LayoutReference(_Pinned, _AsWritten):
    path: str
    tag: str | None = None
    digest: str | None = None

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
    return RegistryReference(registry, repository, tag, digest, written=original)


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
    return LayoutReference(body, tag, digest, written=text)


def is_layout_reference(text: str) -> bool:
    return text.startswith(LAYOUT_SCHEME)


# -- Ollama model names: ``[scheme://][host/][namespace/]model[:tag][@digest]`` --------------
# Every part is checked against Ollama's character rules, which also keeps the parts safe to
# use as path components of the local store (no ``..``, no separators).
OLLAMA_SCHEME = "ollama:"
OLLAMA_REGISTRY_SCHEME = "ollama://"
OLLAMA_DEFAULT_HOST = "registry.ollama.ai"
OLLAMA_DEFAULT_NAMESPACE = "library"

_OLLAMA_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,349}(?::[0-9]{1,5})?\Z")
_OLLAMA_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}\Z")
OLLAMA_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}\Z")


@dataclass(frozen=True)
class OllamaName:
    """A fully qualified Ollama model name."""

    host: str = OLLAMA_DEFAULT_HOST
    namespace: str = OLLAMA_DEFAULT_NAMESPACE
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
        head = "" if self.host == OLLAMA_DEFAULT_HOST else f"{self.host}/"
        if self.namespace != OLLAMA_DEFAULT_NAMESPACE or head:
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
        from ocibridge.core.hosts import is_loopback

        return is_loopback(self.host)


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
    host, namespace = OLLAMA_DEFAULT_HOST, OLLAMA_DEFAULT_NAMESPACE
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
    if not _OLLAMA_HOST_RE.match(host):
        raise InvalidReference(f"invalid host {host!r} in Ollama model name {original!r}")
    for what, value in (("namespace", namespace), ("model", model)):
        if not _OLLAMA_PART_RE.match(value):
            raise InvalidReference(f"invalid {what} {value!r} in Ollama model name {original!r}")
    if not OLLAMA_TAG_RE.match(tag):
        raise InvalidReference(f"invalid tag {tag!r} in Ollama model name {original!r}")
    return OllamaName(host, namespace, model, tag, digest)


@dataclass(frozen=True)
class OllamaReference(_AsWritten):
    """``ollama:NAME`` (the local store, ``remote`` False) or ``ollama://[host/]NAME`` (an
    Ollama-compatible registry: repository ``namespace/model`` on ``name.host``)."""

    name: OllamaName
    remote: bool
    @property
    def reference(self) -> str:
        return self.name.digest or self.name.tag

    def __str__(self) -> str:
        return (OLLAMA_REGISTRY_SCHEME if self.remote else OLLAMA_SCHEME) + self.name.display

    def registry_reference(self) -> RegistryReference:
        """The registry repository an ``ollama://`` name is served from."""
        return RegistryReference(self.name.host, self.name.repository, self.name.tag, self.name.digest)


def is_ollama_reference(text: str) -> bool:
    return text.startswith(OLLAMA_SCHEME)


def parse_ollama_reference(text: str) -> OllamaReference:
    """Parse ``ollama:NAME`` or ``ollama://[host/]NAME``."""
    if text.startswith(OLLAMA_REGISTRY_SCHEME):
        return OllamaReference(parse_ollama_name(text[len(OLLAMA_REGISTRY_SCHEME):]), remote=True, written=text)
    if text.startswith(OLLAMA_SCHEME):
        return OllamaReference(parse_ollama_name(text[len(OLLAMA_SCHEME):]), remote=False, written=text)
    raise InvalidReference(f"not an Ollama reference: {text!r}")


# -- which kind of reference a string is ------------------------------------------------------
@dataclass(frozen=True)
class PathReference:
    """A local file or directory (a source to read, or where a pull writes)."""

    path: str

    @property
    def text(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path


Reference = RegistryReference | LayoutReference | OllamaReference | PathReference


def is_store_reference(text: str, *, file_suffixes: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` names a store (layout, registry, Ollama) rather than a local path.

    An existing path, one starting with ``.``, ``/`` or ``~``, or one ending in an archive
    suffix of ``file_suffixes`` is a path; else a registry needs a host-like first part
    (``.`` or ``:`` in it, or ``localhost``) and a ``/``, as Docker reads names."""
    if is_layout_reference(text) or is_ollama_reference(text):
        return True
    return _names_registry(text, file_suffixes)


def _names_registry(text: str, file_suffixes: tuple[str, ...]) -> bool:
    """:func:`is_store_reference` for a text without a scheme."""
    if os.path.exists(text) or text.startswith((".", "/", "~")):
        return False
    if file_suffixes and text.lower().endswith(tuple(s.lower() for s in file_suffixes)):
        return False
    first = text.split("/", 1)[0]
    return "/" in text and ("." in first or ":" in first or first == "localhost")


def on_this_machine(text: str) -> bool:
    """Whether a store reference names a place on this machine (a layout, the local Ollama
    store) rather than on a registry."""
    return is_layout_reference(text) or (is_ollama_reference(text) and not text.startswith(OLLAMA_REGISTRY_SCHEME))


def on_registry(text: str) -> bool:
    """Whether ``text`` names something on a registry (``host/repo`` or ``ollama://``), where
    blobs can be mounted from one repository into another."""
    if is_layout_reference(text):
        return False
    if is_ollama_reference(text):
        return text.startswith(OLLAMA_REGISTRY_SCHEME)
    return is_store_reference(text)


def parse_reference(text: str, *, file_suffixes: tuple[str, ...] = (), path_schemes: tuple[str, ...] = (),
                    store: bool = False, local: Callable[[str], Reference | None] | None = None) -> Reference:
    """The reference ``text`` is, parsed: one of the four kinds in the table above. The one
    place that decides which scheme a text is (called once per reference, at the API's edge).

    ``store``: a store is meant (``copy``, ``inspect``, a push's destination), so only an
    existing path or one written as a path (``/``, ``./``, ``~``…) is a path, and anything else
    a registry name with Docker's defaults (``ubuntu`` is ``docker.io/library/ubuntu``).
    Otherwise (a push's source, a pull's destination) a registry needs a host-like first part
    (see :func:`is_store_reference`), and ``path_schemes`` (``hf:``: a format's own place,
    keeping no artifacts) and names ending in ``file_suffixes`` are local.

    ``local``: a rule for texts without a scheme, asked first (the local store's bare names,
    :func:`ocibridge.kinds.targets.local_store_reference`, which needs a store to look in)."""
    if is_layout_reference(text):
        return parse_layout_reference(text)
    if is_ollama_reference(text):
        return parse_ollama_reference(text)
    named = local(text) if local is not None else None
    if named is not None:
        return named
    if store:
        if os.path.exists(text) or path_like(text):
            return PathReference(text)
        return parse_registry_reference(text)
    if path_schemes and text.startswith(path_schemes):
        return PathReference(text)
    if _names_registry(text, file_suffixes):
        return parse_registry_reference(text)
    return PathReference(text)


def path_like(text: str) -> bool:
    """Whether ``text`` is written as a file-system path: no registry reference starts so."""
    return text.startswith(("/", "./", "../", "~")) or text in (".", "..")


def names_version(text: str) -> bool:
    """Whether a registry or Ollama name states a tag or digest (its last path part has ':' or
    '@') instead of leaving the default: a mirror job reads a bare name as *every tag*."""
    return "@" in text or ":" in text.rsplit("/", 1)[-1]
