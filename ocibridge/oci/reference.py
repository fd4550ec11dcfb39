"""Every reference users type, parsed in one place: the CLI, the API and mirror jobs read them here.

| form                           | parsed as                                              |
|--------------------------------|--------------------------------------------------------|
| ``host[:port]/repo[:tag][@digest]`` | :class:`RegistryReference`, with Docker's defaults |
| ``host[:port]/repo@<40 hex>``  | a serve commit id: the tag ``ocibridge-commit-<40 hex>`` (bookkeeping.py) |
| ``host[:port]/repo@<7-39 hex>`` | an abbreviated commit id, looked up as ``ocibridge-commit-<hex>`` (commitscan.py) |
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
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from ocibridge.errors import InvalidReference, passes
from ocibridge.oci.bookkeeping import COMMIT_PREFIX, SHORT_MIN, commit_tag
from ocibridge.oci.digest import is_digest

DEFAULT_REGISTRY = "docker.io"
DEFAULT_TAG = "latest"
LAYOUT_SCHEME = "oci:"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*\Z")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
#: the OCI ``org.opencontainers.image.ref.name`` grammar (image-spec annotations.md): a layout's
#: names, which may hold ':' and '/' (``mymodel:v2``, ``myorg/model:v1``)
_REF_COMPONENT = r"[A-Za-z0-9]+(?:(?:[-._:@+]|--)[A-Za-z0-9]+)*"
_REF_NAME_RE = re.compile(rf"^{_REF_COMPONENT}(?:/{_REF_COMPONENT})*\Z")
_HEX = frozenset("0123456789abcdef")
#: distribution's NameTotalLengthMax: a repository name with its registry, at most
MAX_NAME_LENGTH = 255
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?\Z")


def check_tag(tag: str) -> str:
    if not _TAG_RE.match(tag):
        raise InvalidReference(f"invalid tag {tag!r}")
    return tag


def is_tag(text: str) -> bool:
    """Whether ``text`` is a registry tag (the grammar :func:`check_tag` holds a tag to)."""
    return _TAG_RE.match(text) is not None


class Written(Protocol):
    """Any locator (places/locate.py): it says how the user wrote it."""

    @property
    def text(self) -> str: ...


def check_ref_name(name: str) -> str:
    """A name written into an OCI image layout: a registry tag, or a local ``NAME:TAG`` whose
    NAME is a repository name and TAG a registry tag (both within the OCI ref.name grammar), so
    every name written can also be pushed as it is."""
    head, sep, tag = name.rpartition(":")
    fits = _REPO_RE.match(head) and _TAG_RE.match(tag) if sep else _TAG_RE.match(name)
    if len(name) > 255 or not fits or not _REF_NAME_RE.match(name):
        raise InvalidReference(f"invalid tag {name!r} (a layout's names: TAG or NAME:TAG)")
    return name


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
    #: the text named a tag or digest (not ``latest`` by default): a mirror job reads a bare
    #: name as *every tag*
    names_version: bool = field(default=True, compare=False, repr=False, kw_only=True)

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


def _split_commit(text: str) -> tuple[str, str | None]:
    """``repo@<40 hex>``: the commit id ``ocibridge serve`` gave (the Hub API's and its pages'
    ``sha``), which names the tag serve keeps for that commit, or its first 7 or more hex digits
    as git abbreviates it (the store finds the one commit they start); a digest stays
    ``@sha256:...``."""
    head, at, commit = text.rpartition("@")
    if at and COMMIT_PREFIX.fullmatch(commit.lower()):
        return head, commit.lower()
    if at and commit and all(c in _HEX for c in commit.lower()):
        raise InvalidReference(f"invalid reference {text!r}: a commit id is {SHORT_MIN} to 40 hex digits "
                               "(a digest: @sha256:<64 hex>)")
    return text, None


def parse_registry_reference(text: str) -> RegistryReference:
    """Parse ``host[:port]/repo[:tag][@digest]`` with Docker's defaults."""
    original = text
    if not text or any(c.isspace() for c in text):
        raise InvalidReference(f"invalid reference {original!r}")
    if "://" in text:
        raise InvalidReference(f"invalid reference {original!r}: no scheme expected")
    rest, commit = _split_commit(text)
    rest, digest = _split_digest(rest)
    tag = commit_tag(commit) if commit else None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        if commit:
            raise InvalidReference(f"invalid reference {original!r}: a tag or a commit id, not both")
        rest, tag = rest[:colon], check_tag(rest[colon + 1:])
    first, sep, remainder = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        registry, repository = first, remainder
        if not _HOST_RE.match(registry):
            raise InvalidReference(f"invalid registry host {registry!r} in {original!r}")
        registry = _canonical_registry(registry)
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
    if len(registry) + 1 + len(repository) > MAX_NAME_LENGTH:  # a registry answers NAME_INVALID
        raise InvalidReference(f"invalid repository {repository[:40]!r}... in {original[:60]!r}...: the name, its "
                               f"registry included, is over {MAX_NAME_LENGTH} characters (Docker's limit)")
    named = tag is not None or digest is not None
    if not named:
        tag = DEFAULT_TAG
    return RegistryReference(registry, repository, tag, digest, written=original, names_version=named)


def _canonical_registry(text: str) -> str:
    """``host[:port]`` in its one spelling (core/hosts.py): ``LOCALHOST:05000`` is
    ``localhost:5000`` wherever it is compared (policy scopes, credentials, settings); an
    ambiguous address spelling (``127.000.000.001``) is refused with one line."""
    from ocibridge.core.hosts import OddHost, canonical_host

    try:
        return canonical_host(text)
    except OddHost as e:
        raise InvalidReference(str(e)) from None


def parse_layout_reference(text: str) -> LayoutReference:
    """Parse ``oci:PATH[:REF|@DIGEST]``. REF is what follows the first ':', as containers/image
    splits ``oci:PATH:REF``, so a name holding ':' or '/' reads the same here and in skopeo
    (``oci:STORE:mymodel:v2``, ``oci:STORE:myorg/model:v1``); a PATH holding ':' is taken when it
    is a layout on disk already."""
    if not text.startswith(LAYOUT_SCHEME):
        raise InvalidReference(f"not a layout reference: {text!r}")
    body = text[len(LAYOUT_SCHEME):]
    body, digest = _split_digest(body)
    tag = None
    colon = _name_colon(body) if digest is None else -1
    if colon >= 0:
        body, tag = body[:colon], check_ref_name(body[colon + 1:])
    if not body:
        raise InvalidReference(f"layout reference {text!r} has no path")
    return LayoutReference(body, tag, digest, written=text)


def _name_colon(body: str) -> int:
    """Where ``PATH:REF`` splits (-1: no REF): at a ':' whose left side is an existing layout
    (a path holding ':' is found when it is there), else at the first ':' when a name follows it,
    as skopeo splits it, so ``oci:new:acme/x:v1`` makes the layout ``new`` holding ``acme/x:v1``
    (not ``new:acme/x``), else at the first ':' of the last path component."""
    for at, char in enumerate(body):
        if char == ":" and at and os.path.isfile(os.path.join(os.path.expanduser(body[:at]), "oci-layout")):
            return at
    first = body.find(":")
    if first >= 0 and _is_ref_name(body[first + 1:]):
        return first
    return body.find(":", body.rfind("/") + 1)  # not a name after the first ':' (``/x:1/y``): a path


def _is_ref_name(text: str) -> bool:
    return passes(check_ref_name, text, InvalidReference)


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
    #: the text named a tag or digest (see :attr:`RegistryReference.names_version`)
    names_version: bool = field(default=True, compare=False, repr=False, kw_only=True)

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


def ollama_model_name(host: str, namespace: str, model: str) -> OllamaName:
    """The Ollama model ``host/namespace/model`` from parts already split (a registry repository
    an Ollama model was found in), each checked against Ollama's rules."""
    if not _OLLAMA_HOST_RE.match(host):
        raise InvalidReference(f"invalid host {host!r} for an Ollama model name")
    for what, value in (("namespace", namespace), ("model", model)):
        if not _OLLAMA_PART_RE.match(value):
            raise InvalidReference(f"invalid {what} {value!r} for an Ollama model name")
    return OllamaName(host, namespace, model)


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
    named = digest is not None
    slash, colon = text.rfind("/"), text.rfind(":")
    if colon > slash:
        text, tag, named = text[:colon], text[colon + 1:], True
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
    if host != OLLAMA_DEFAULT_HOST:
        host = _canonical_registry(host)
    for what, value in (("namespace", namespace), ("model", model)):
        if not _OLLAMA_PART_RE.match(value):
            raise InvalidReference(f"invalid {what} {value!r} in Ollama model name {original!r}")
    if not OLLAMA_TAG_RE.match(tag):
        raise InvalidReference(f"invalid tag {tag!r} in Ollama model name {original!r}")
    return OllamaName(host, namespace, model, tag, digest, names_version=named)


@dataclass(frozen=True)
class OllamaReference(_AsWritten):
    """``ollama:NAME`` (the local store, ``remote`` False) or ``ollama://[host/]NAME`` (an
    Ollama-compatible registry: repository ``namespace/model`` on ``name.host``)."""

    name: OllamaName
    remote: bool

    #: what it answers as a kind's place (ocibridge.places.locators.KindPlace)
    kind: ClassVar[str] = "ollama"
    is_store: ClassVar[bool] = True

    @property
    def holds_referrers(self) -> bool:
        return self.remote  # the local Ollama store keeps models only

    @property
    def repository_text(self) -> str:
        return (OLLAMA_REGISTRY_SCHEME if self.remote else OLLAMA_SCHEME) + self.name.display_model

    @property
    def reference(self) -> str:
        return self.name.digest or self.name.tag

    def __str__(self) -> str:
        return (OLLAMA_REGISTRY_SCHEME if self.remote else OLLAMA_SCHEME) + self.name.display

    def registry_reference(self) -> RegistryReference | None:
        """The registry repository an ``ollama://`` name is served from (None: the local store)."""
        if not self.remote:
            return None
        return RegistryReference(self.name.host, self.name.repository, self.name.tag, self.name.digest)


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


def path_like(text: str) -> bool:
    """Whether ``text`` is written as a file-system path: no registry reference starts so."""
    return text.startswith(("/", "./", "../", "~")) or text in (".", "..")
