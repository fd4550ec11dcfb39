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

import base64
import binascii
import json
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibridge.core import environment
from ocibridge.core.hosts import OddHost, canonical_host
from ocibridge.core.smallfile import read_small
from ocibridge.errors import InvalidReference, SignatureError, TooLarge, UsageError
from ocibridge.oci.digest import is_digest
from ocibridge.oci.reference import parse_registry_reference

SYSTEM_POLICY = Path("/etc/containers/policy.json")
USER_POLICY = Path(".config", "containers", "policy.json")  # under $HOME

ACCEPT = "insecureAcceptAnything"
REJECT = "reject"
SIGNED_BY = "signedBy"
SIGSTORE_SIGNED = "sigstoreSigned"
SIGNED_BASE_LAYER = "signedBaseLayer"
REQUIREMENT_TYPES = (ACCEPT, REJECT, SIGNED_BY, SIGSTORE_SIGNED, SIGNED_BASE_LAYER)

#: signedIdentity types (``policy_reference_match.go``); matchRepoDigestOrExact is the default
SIGNED_BY_KEY_TYPES = ("GPGKeys", "signedByGPGKeys", "X509Certificates", "signedByX509CAs")
IDENTITY_TYPES = ("matchExact", "matchRepoDigestOrExact", "matchRepository", "exactReference",
                  "exactRepository", "remapIdentity")
MAX_POLICY_BYTES = 4 << 20


class PolicyFileError(UsageError):
    """The policy file cannot be read or is not a containers policy: one line naming it."""


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


def find_policy_file(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The policy file that applies: ``explicit``, ``$OCIBRIDGE_POLICY``, the user's, the
    system's; None when there is none (nothing is then checked)."""
    if explicit:
        return Path(explicit)
    named = os.environ.get(environment.POLICY)
    if named:
        return Path(named)
    home = os.environ.get("HOME")
    if home and (Path(home) / USER_POLICY).is_file():
        return Path(home) / USER_POLICY
    return SYSTEM_POLICY if SYSTEM_POLICY.is_file() else None


def load_policy(explicit: str | os.PathLike[str] | None = None) -> ContainersPolicy | None:
    """The policy found by :func:`find_policy_file`, read and checked; None without one."""
    path = find_policy_file(explicit)
    return None if path is None else read_policy_file(path)


def read_policy_file(path: str | os.PathLike[str]) -> ContainersPolicy:
    """The policy file named (no search): for a file that must be there, such as a node's
    (``k8s check --node-policy``) or one to translate (``k8s policy --from-policy``)."""
    where = Path(path)
    try:  # the one small-file reader: bounded, no hang on a FIFO found in place of the file
        data = read_small(where, MAX_POLICY_BYTES, "policy file", error=PolicyFileError)
    except FileNotFoundError as e:
        raise PolicyFileError(f"policy file {where}: {e.strerror}") from None
    except TooLarge as e:
        raise PolicyFileError(str(e)) from None
    return parse_policy(data, where)


def parse_policy(data: bytes, path: Path) -> ContainersPolicy:
    """Read a policy file as containers/image does (``signature/policy_config.go``), failing
    closed on anything it refuses: a key given twice at any level (``default`` twice, a scope
    twice: containers/image's ``ParanoidUnmarshalJSONObject``), unknown keys and requirement
    types, no ``default``, an empty list of requirements, and a scope its transport refuses
    (``ValidatePolicyConfigurationScope``: an ``oci`` scope is an absolute, clean path). Docker
    scopes are read in canonical form (:func:`canonical_scope`), so two spellings of one scope
    are a key given twice too: stricter than containers/image, which compares them as text."""
    try:
        doc = json.loads(data, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise PolicyFileError(f"policy file {path}: {json.dumps(e.key)} is given twice "
                              "(refused, as containers/image refuses a duplicate key)") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise PolicyFileError(f"policy file {path}: not JSON: {e}") from None
    bad = _Reader(path)
    obj = bad.object(doc, "the file")
    bad.only(obj, ("default", "transports"), "the file")
    if "default" not in obj:
        raise PolicyFileError(f"policy file {path}: has no \"default\" requirements")
    default = bad.requirements(obj["default"], "default")
    transports: dict[str, dict[str, tuple[Requirement, ...]]] = {}
    for transport, scopes in bad.object(obj.get("transports", {}), "transports").items():
        read: dict[str, tuple[Requirement, ...]] = {}
        written: dict[str, str] = {}
        for scope, reqs in bad.object(scopes, f"transport {transport}").items():
            where = f"{transport} {json.dumps(scope)}"
            key = bad.scope(transport, scope, where)
            if key in written:
                raise bad.fail(where, f"names the same scope as {json.dumps(written[key])} (scopes are compared "
                                      "in canonical form: host in lower case, port as a number)")
            written[key] = scope
            read[key] = bad.requirements(reqs, where)
        transports[transport] = read
    return ContainersPolicy(path, default, transports)


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


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


class _Reader:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, why: str) -> PolicyFileError:
        return PolicyFileError(f"policy file {self.path}: {where}: {why}")

    def object(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "is not a JSON object")
        return value

    def only(self, obj: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
        unknown = sorted(set(obj) - set(known))
        if unknown:
            raise self.fail(where, f"unknown field {unknown[0]!r}")

    def string(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise self.fail(where, f'"{key}" must be a non-empty string')
        return value

    def scope(self, transport: str, scope: str, where: str) -> str:
        """``scope`` as it is looked up, or a refusal naming it when its transport refuses it."""
        if scope == "":
            return scope
        why = None
        if transport in PATH_TRANSPORTS:
            why = path_scope_error(scope)
        elif transport in NO_SCOPE_TRANSPORTS:
            why = f'{transport} takes no scope but ""'
        elif transport == "docker-daemon" and is_digest(scope):
            why = "a digest cannot be a scope of docker-daemon"
        elif transport == "docker":
            try:
                return canonical_scope(scope)
            except OddHost as e:
                why = str(e)
        if why is not None:
            raise self.fail(where, f"invalid scope: {why}")
        return scope

    def requirements(self, value: Any, where: str) -> tuple[Requirement, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(where, "must be a non-empty list of requirements")
        return tuple(self.requirement(item, where) for item in value)

    def requirement(self, value: Any, where: str) -> Requirement:
        obj = self.object(value, where)
        kind = obj.get("type")
        if kind not in REQUIREMENT_TYPES:
            raise self.fail(where, f"unknown policy requirement type {kind!r}")
        if kind in (ACCEPT, REJECT):
            self.only(obj, ("type",), f"{where} {kind}")
            return Requirement(kind)
        if kind == SIGNED_BY:  # read as strictly as containers/image; refused when it applies
            self.signed_by(obj, f"{where} {kind}")
            return Requirement(kind)
        if kind == SIGNED_BASE_LAYER:
            here = f"{where} {kind}"
            self.only(obj, ("type", "baseLayerIdentity"), here)
            if "baseLayerIdentity" not in obj:
                raise self.fail(here, '"baseLayerIdentity" is missing')
            self.identity(obj["baseLayerIdentity"], here)
            return Requirement(kind)
        return self.sigstore(obj, f"{where} {kind}")

    def signed_by(self, obj: Mapping[str, Any], where: str) -> None:
        """containers/image's ``prSignedBy``: a known keyType, exactly one key source, a valid
        ``signedIdentity``."""
        self.only(obj, ("type", "keyType", "keyPath", "keyPaths", "keyData", "signedIdentity"), where)
        if obj.get("keyType") not in SIGNED_BY_KEY_TYPES:
            raise self.fail(where, f"unknown keyType {obj.get('keyType')!r}")
        sources = [k for k in ("keyPath", "keyPaths", "keyData") if k in obj]
        if len(sources) != 1:
            raise self.fail(where, "exactly one of keyPath, keyPaths and keyData must be given "
                                   f"(found {', '.join(sources) or 'none'})")
        if "keyPaths" in obj:
            listed = obj["keyPaths"]
            if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
                raise self.fail(where, '"keyPaths" must be a list of paths')
        elif not isinstance(obj[sources[0]], str):
            raise self.fail(where, f'"{sources[0]}" must be a string')
        self.identity(obj.get("signedIdentity"), where)

    def sigstore(self, obj: Mapping[str, Any], where: str) -> Requirement:
        key_fields = ("keyPath", "keyPaths", "keyData", "keyDatas")
        rekor_fields = ("rekorPublicKeyPath", "rekorPublicKeyPaths", "rekorPublicKeyData", "rekorPublicKeyDatas")
        self.only(obj, ("type", *key_fields, *rekor_fields, "fulcio", "pki", "signedIdentity"), where)
        sources = [k for k in (*key_fields, "fulcio", "pki") if k in obj]
        if len(sources) != 1:
            raise self.fail(where, "exactly one of keyPath, keyPaths, keyData, keyDatas, fulcio and pki "
                                   f"must be given (found {', '.join(sources) or 'none'})")
        rekor = [k for k in rekor_fields if k in obj]
        if len(rekor) > 1:
            raise self.fail(where, f"more than one Rekor key source ({', '.join(rekor)})")
        keys = self.key_material(obj, *key_fields, where=where) if sources[0] in key_fields else ()
        rekor_keys = self.key_material(obj, *rekor_fields, where=where) if rekor else ()
        fulcio = pki = None
        if "fulcio" in obj:
            fulcio = self.object(obj["fulcio"], f"{where} fulcio")
            self.only(fulcio, ("caPath", "caData", "oidcIssuer", "subjectEmail"), f"{where} fulcio")
            if not rekor:
                raise self.fail(where, "fulcio needs a Rekor public key (rekorPublicKeyPath or rekorPublicKeyData)")
        if "pki" in obj:
            pki = self.object(obj["pki"], f"{where} pki")
            if rekor:
                raise self.fail(where, "pki cannot be combined with a Rekor public key")
        return Requirement(SIGSTORE_SIGNED, keys, rekor_keys, fulcio, pki,
                           self.identity(obj.get("signedIdentity"), where))

    def key_material(self, obj: Mapping[str, Any], path: str, paths: str, data: str, datas: str, *,
                     where: str) -> tuple[KeySource, ...]:
        if path in obj:
            return (self.read_key(self.string(obj, path, where), where),)
        if paths in obj:
            listed = obj[paths]
            if not isinstance(listed, list) or not listed or not all(isinstance(p, str) and p for p in listed):
                raise self.fail(where, f'"{paths}" must be a non-empty list of paths')
            return tuple(self.read_key(p, where) for p in listed)
        if data in obj:
            return (KeySource(f"{data} of {self.path}", data=self.decode(obj[data], data, where)),)
        listed = obj[datas]
        if not isinstance(listed, list) or not listed:
            raise self.fail(where, f'"{datas}" must be a non-empty list')
        return tuple(KeySource(f"{datas}[{i}] of {self.path}", data=self.decode(v, datas, where))
                     for i, v in enumerate(listed))

    def read_key(self, path: str, where: str) -> KeySource:
        return KeySource(path, path=path)

    def decode(self, value: Any, key: str, where: str) -> bytes:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f'"{key}" must be base64 text')
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise self.fail(where, f'"{key}" is not base64') from None

    def identity(self, value: Any, where: str) -> IdentityRule:
        if value is None:
            return IdentityRule()
        obj = self.object(value, f"{where} signedIdentity")
        kind = obj.get("type")
        here = f"{where} signedIdentity"
        if kind not in IDENTITY_TYPES:
            raise self.fail(here, f"unknown type {kind!r}")
        if kind == "exactReference":
            self.only(obj, ("type", "dockerReference"), here)
            ref = self.string(obj, "dockerReference", here)
            if self.name(ref, here).name_only:
                raise self.fail(here, f"dockerReference {ref!r} has neither a tag nor a digest")
            return IdentityRule(kind, docker_reference=ref)
        if kind == "exactRepository":
            self.only(obj, ("type", "dockerRepository"), here)
            repo = self.string(obj, "dockerRepository", here)
            self.name(repo, here)
            return IdentityRule(kind, docker_repository=repo)
        if kind == "remapIdentity":
            self.only(obj, ("type", "prefix", "signedPrefix"), here)
            return IdentityRule(kind, prefix=self.prefix(self.string(obj, "prefix", here), here),
                                signed_prefix=self.prefix(self.string(obj, "signedPrefix", here), here))
        self.only(obj, ("type",), here)
        return IdentityRule(kind)

    def prefix(self, text: str, where: str) -> str:
        """A remapIdentity prefix, its host in canonical form as the names it is compared with."""
        try:
            return canonical_scope(text)
        except OddHost as e:
            raise self.fail(where, str(e)) from None

    def name(self, text: str, where: str) -> DockerName:
        try:
            return DockerName.parse(text)
        except InvalidReference as e:
            raise self.fail(where, str(e)) from None
