"""The containers policy file (``containers-policy.json(5)``): what skopeo, podman, buildah and
CRI-O enforce, read here so that every use of a model obeys the same file.

Found as skopeo finds it: ``--policy FILE``, else ``$OCIBRIDGE_POLICY``, else
``$HOME/.config/containers/policy.json``, else ``/etc/containers/policy.json``; no file
anywhere means no policy (everything accepted, as before the file was read).

The requirements of a reference are those of its most specific scope, as containers/image
looks them up (``signature/policy_eval.go requirementsForImageRef``): for the ``docker``
transport ``host/repo:tag`` (or ``host/repo@digest``), then ``host/repo``, its parent
namespaces, ``host``, then ``*.domain`` wildcards, then the transport's ``""`` scope; for the
``oci`` transport (layouts, the local store) the layout's absolute directory, then its parent
directories; then ``default``. Every requirement of the scope must hold.

Standard library only: the CLI reads the file before it knows whether anything must be verified
(``insecureAcceptAnything`` loads no cryptography, and needs no request).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ocibridge.core.hosts import canonical_host
from ocibridge.errors import InvalidReference, SignatureError, UsageError
from ocibridge.oci.reference import parse_registry_reference

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store

ACCEPT = "insecureAcceptAnything"
REJECT = "reject"
SIGNED_BY = "signedBy"
SIGSTORE_SIGNED = "sigstoreSigned"
SIGNED_BASE_LAYER = "signedBaseLayer"
#: ocibridge's own requirement (docs/scanning.md): the newest scan report signed by one of its keys
#: is clean. containers/image refuses a file that names it: keep it in a file for ocibridge
CLEAN_SCAN = "ocibridgeCleanScan"
REQUIREMENT_TYPES = (ACCEPT, REJECT, SIGNED_BY, SIGSTORE_SIGNED, SIGNED_BASE_LAYER, CLEAN_SCAN)

#: signedIdentity types (``policy_reference_match.go``); matchRepoDigestOrExact is the default
SIGNED_BY_KEY_TYPES = ("GPGKeys", "signedByGPGKeys", "X509Certificates", "signedByX509CAs")
IDENTITY_TYPES = ("matchExact", "matchRepoDigestOrExact", "matchRepository", "exactReference",
                  "exactRepository", "remapIdentity")
MAX_POLICY_BYTES = 4 << 20


class PolicyFileError(UsageError):
    """The policy file cannot be read or is not a containers policy: one line naming it."""


class CleanScanCheck(Protocol):
    """How an ``ocibridgeCleanScan`` requirement is judged: by the scan reports of the files, which
    the scanning layer reads (above this one), so whoever evaluates a policy is handed it."""

    def __call__(self, store: Store, subject: Descriptor, requirement: Requirement, /) -> None:
        """Return when the requirement holds; raise :class:`SignatureError` (one line: why) otherwise."""


@dataclass(frozen=True)
class UsePolicy:
    """What must hold before a model is used: the policy file (``file``: ``--policy FILE``;
    None: ``$OCIBRIDGE_POLICY``, then the default places) and, when given, ``keys`` (a
    :class:`ocibridge.signing.verify.VerifyPolicy`, ``--verify-key``): both must pass."""

    keys: Any = None
    file: str | None = None


# -- references -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DockerName:
    """A normalised Docker reference (``docker.io/library/x``), as containers/image compares them."""

    name: str  # host/repository
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, text: str) -> DockerName:
        """``reference.ParseNormalizedNamed``: Docker Hub's defaults, no default tag."""
        ref = parse_registry_reference(text)
        tag = ref.tag if ref.names_version else None
        return cls(f"{ref.registry}/{ref.repository}", tag, ref.digest)

    @property
    def name_only(self) -> bool:
        return self.tag is None and self.digest is None

    def string(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class Scope:
    """Where a reference is looked up: its transport, its identity and the namespaces above it,
    and its Docker reference (for ``signedIdentity``; None for a layout)."""

    transport: str | None  # docker | oci | None (no transport: the default only)
    identity: str = ""
    namespaces: tuple[str, ...] = ()
    docker: DockerName | None = None

    def describe(self) -> str:
        return f"{self.transport}:{self.identity}" if self.transport else "(no transport)"


def docker_scope(name: DockerName) -> Scope:
    """The ``docker`` transport's identity and namespaces (``docker/policyconfiguration``), of
    the canonical name: the host in lower case and the port as a number (core/hosts.py), so
    that ``LOCALHOST:5000/bad`` and ``127.0.0.1:05000/bad`` meet the scopes written for
    ``localhost:5000/bad`` and ``127.0.0.1:5000/bad`` (the file's scopes are read the same way)."""
    name = DockerName(canonical_scope(name.name), name.tag, name.digest)
    identity = name.name + (f"@{name.digest}" if name.digest else f":{name.tag or 'latest'}")
    found: list[str] = []
    rest = name.name
    while True:
        found.append(rest)
        if "/" not in rest:
            break
        rest = rest.rsplit("/", 1)[0]
    host = rest.split(":", 1)[0]  # a port is dropped before the wildcards
    while "." in host:
        host = host.split(".", 1)[1]
        found.append(f"*.{host}")
    if name.digest is None and name.tag is None:
        name = DockerName(name.name, "latest")
    return Scope("docker", identity, tuple(found), name)


def oci_scope(directory: str) -> Scope:
    """The ``oci`` transport's identity (the layout's resolved absolute directory) and its
    parent directories, "/" excepted (``oci/layout/oci_transport.go``)."""
    path = os.path.realpath(directory)
    found: list[str] = []
    while path != "/" and "/" in path:
        found.append(path)
        path = path.rsplit("/", 1)[0]
    return Scope("oci", found[0] if found else path, tuple(found[1:]))


# -- the file ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class IdentityRule:
    """A ``signedIdentity``: which Docker reference a signature must name."""

    type: str = "matchRepoDigestOrExact"
    docker_reference: str = ""
    docker_repository: str = ""
    prefix: str = ""
    signed_prefix: str = ""

    def matches(self, image: DockerName | None, signed: str) -> bool:
        """Whether a signature naming ``signed`` is accepted for ``image`` (containers/image's
        ``matchesDockerReference`` of each type; an unparsable reference matches nothing)."""
        try:
            signature = DockerName.parse(signed)
        except InvalidReference:
            return False
        if self.type == "exactReference":
            try:
                wanted = DockerName.parse(self.docker_reference)
            except InvalidReference:
                return False
            return not wanted.name_only and not signature.name_only and signature.string() == wanted.string()
        if self.type == "exactRepository":
            try:
                return signature.name == DockerName.parse(self.docker_repository).name
            except InvalidReference:
                return False
        if image is None:  # a layout has no Docker identity to compare
            return False
        if self.type == "matchExact":
            return not image.name_only and not signature.name_only and signature.string() == image.string()
        if self.type == "matchRepository":
            return signature.name == image.name
        if self.type == "remapIdentity":
            image = self._remapped(image)
            if image is None:
                return False
        return _repo_digest_or_exact(image, signature)

    def prefix_matches(self, image: DockerName) -> bool:
        """remapIdentity: whether ``prefix`` names ``image``'s repository or a namespace above it."""
        name = image.name
        return name == self.prefix or (name.startswith(self.prefix) and name[len(self.prefix):][:1] == "/")

    def _remapped(self, image: DockerName) -> DockerName | None:
        if not self.prefix_matches(image):
            return image
        try:
            return DockerName.parse(image.string().replace(self.prefix, self.signed_prefix, 1))
        except InvalidReference:
            return None

    def describe(self) -> str:
        extra = self.docker_reference or self.docker_repository or (
            f"{self.prefix} -> {self.signed_prefix}" if self.prefix else "")
        return f"{self.type}" + (f" {extra}" if extra else "")


def _repo_digest_or_exact(image: DockerName, signature: DockerName) -> bool:
    if signature.name_only:
        return False
    if image.tag is not None:
        return signature.string() == image.string()
    if image.digest is not None:  # the manifest digest itself is checked against the signature's
        return signature.name == image.name
    return False


@dataclass(frozen=True)
class KeySource:
    """A public key a requirement names: a file (read when the requirement is evaluated, as
    containers/image reads it, so a missing key of another scope refuses nothing else) or data."""

    name: str
    path: str | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                return f.read(1 << 20)
        except OSError as e:
            raise SignatureError(f"policy key file {self.path}: {e.strerror or e}") from None


@dataclass(frozen=True)
class Requirement:
    """One requirement of a scope. For ``sigstoreSigned``: exactly one key source (``keys``, of
    keyPath/keyPaths/keyData/keyDatas, or ``fulcio``, or ``pki``), optional Rekor keys, and the
    ``signedIdentity``."""

    type: str
    keys: tuple[KeySource, ...] = ()
    rekor_keys: tuple[KeySource, ...] = ()
    fulcio: Mapping[str, Any] | None = None
    pki: Mapping[str, Any] | None = None
    identity: IdentityRule = field(default_factory=IdentityRule)

    def describe(self) -> str:
        if self.type == CLEAN_SCAN:
            return f"{CLEAN_SCAN} signed by key " + " or ".join(k.name for k in self.keys)
        if self.type != SIGSTORE_SIGNED:
            return self.type
        who = ("key " + " or ".join(k.name for k in self.keys)) if self.keys else "fulcio" if self.fulcio else "pki"
        return f"sigstoreSigned by {who} ({self.identity.describe()})"


@dataclass(frozen=True)
class Decision:
    """The requirements a policy file sets for one scope, and which section said so."""

    path: Path
    section: str  # 'docker "host/repo"', 'docker ""' or 'default'
    requirements: tuple[Requirement, ...]
    scope: Scope

    @property
    def accepts_anything(self) -> bool:
        return all(r.type == ACCEPT for r in self.requirements)

    def where(self) -> str:
        return f"{self.path} ({self.section})"

    def refuse_early(self, name: str) -> None:
        """Raise for a requirement no signature can meet (``reject``), or that ocibridge does not
        evaluate (``signedBy``: GPG; ``signedBaseLayer``: not implemented in containers/image
        either): before anything is fetched."""
        for r in self.requirements:
            if r.type == REJECT:
                raise SignatureError(f"{name}: refused: the policy {self.where()} rejects it")
            if r.type == SIGNED_BY:
                raise SignatureError(f"{name}: refused: the policy {self.where()} asks for signedBy (GPG) "
                                     "signatures, which ocibridge does not verify (use sigstoreSigned)")
            if r.type == SIGNED_BASE_LAYER:
                raise SignatureError(f"{name}: refused: the policy {self.where()} asks for signedBaseLayer, "
                                     "which is not implemented (nor in containers/image)")


@dataclass(frozen=True)
class ContainersPolicy:
    path: Path
    default: tuple[Requirement, ...]
    transports: Mapping[str, Mapping[str, tuple[Requirement, ...]]]

    def decide(self, scope: Scope) -> Decision:
        """The requirements of the most specific scope that names ``scope``."""
        scopes = self.transports.get(scope.transport or "")
        if scopes is not None:
            for key in (scope.identity, *scope.namespaces, ""):
                if key in scopes:
                    return Decision(self.path, f'{scope.transport} "{key}"', scopes[key], scope)
        return Decision(self.path, "default", self.default, scope)


#: transports whose scopes are absolute, clean paths (containers/image: oci, oci-archive, dir, sif)
PATH_TRANSPORTS = ("oci", "oci-archive", "dir", "sif")
#: transports that take the transport's "" scope only (docker-archive, tarball)
NO_SCOPE_TRANSPORTS = ("docker-archive", "tarball")


def canonical_scope(scope: str) -> str:
    """A ``docker`` scope (or a name) with its host part in canonical form (core/hosts.py):
    ``LOCALHOST:05000/x`` is ``localhost:5000/x``, ``*.Example.COM`` is ``*.example.com``.
    Raises :class:`OddHost` for an ambiguous address spelling."""
    host, slash, rest = scope.partition("/")
    if host.startswith("*."):
        return host.lower() + slash + rest
    if not host:
        return scope
    return canonical_host(host) + slash + rest


def path_scope_error(scope: str) -> str | None:
    """Why containers/image refuses ``scope`` for a path transport (``oci/internal.ValidateScope``):
    it must be absolute, not "/" (the transport's "" scope says that), and clean (no trailing
    "/", no "//", ".", ".."); None when it is accepted."""
    if not scope.startswith("/"):
        return "must be an absolute path"
    if scope == "/":
        return 'is "/": use the transport\'s "" scope'
    cleaned = "/" + posixpath.normpath(scope).lstrip("/")
    if cleaned != scope:
        return f"is not a clean path (write {json.dumps(cleaned)})"
    return None
