"""Finding, reading and checking the containers policy file (``containers-policy.json(5)``), as
containers/image reads it (``signature/policy_config.go``), into what :mod:`.containers_policy`
says a policy is. Standard library only, as that module (the CLI reads the file before it knows
whether anything must be verified).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.hosts import OddHost
from ocibridge.core.smallfile import read_small
from ocibridge.errors import InvalidReference, TooLarge
from ocibridge.oci.digest import is_digest
from ocibridge.signing.containers_policy import (
    ACCEPT,
    CLEAN_SCAN,
    IDENTITY_TYPES,
    MAX_POLICY_BYTES,
    NO_SCOPE_TRANSPORTS,
    PATH_TRANSPORTS,
    REJECT,
    REQUIREMENT_TYPES,
    SIGNED_BASE_LAYER,
    SIGNED_BY,
    SIGNED_BY_KEY_TYPES,
    SIGSTORE_SIGNED,
    ContainersPolicy,
    DockerName,
    IdentityRule,
    KeySource,
    PolicyFileError,
    Requirement,
    canonical_scope,
    path_scope_error,
)
from ocibridge.signing.policy_place import find_policy_file


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
        doc = boundedjson.loads(data, object_pairs_hook=_unique_keys)
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
        if kind == CLEAN_SCAN:
            return self.clean_scan(obj, f"{where} {kind}")
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

    def clean_scan(self, obj: Mapping[str, Any], where: str) -> Requirement:
        """ocibridge's ``ocibridgeCleanScan``: exactly one source of the keys that sign scan reports."""
        key_fields = ("keyPath", "keyPaths", "keyData", "keyDatas")
        self.only(obj, ("type", *key_fields), where)
        sources = [k for k in key_fields if k in obj]
        if len(sources) != 1:
            raise self.fail(where, "exactly one of keyPath, keyPaths, keyData and keyDatas must be given "
                                   f"(found {', '.join(sources) or 'none'})")
        return Requirement(CLEAN_SCAN, self.key_material(obj, *key_fields, where=where))

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
