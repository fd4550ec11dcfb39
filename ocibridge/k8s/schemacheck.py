"""The documents the ``k8s`` commands print, checked offline against the OpenAPI schema of a
chosen Kubernetes version (``--validate [VERSION]``), as ``kubectl apply --dry-run=client`` cannot
without a server.

The schemas and the validator are kubernetes-validate's (the maintained package that ships the
JSON schemas of every Kubernetes release's OpenAPI definitions, 1.25 on, and checks with
jsonschema; the ``k8s`` extra installs it), used in its strict form: a field the version does not
know is refused, as the API server's field validation refuses it (``kubectl apply
--validate=strict``, the default since 1.27). A custom resource (Kyverno's ClusterPolicy,
policy-controller's ClusterImagePolicy, KServe's InferenceService) is not in Kubernetes' schema:
it is named as not checked."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ocibridge.core.asdict import FieldsAsDict
from ocibridge.errors import OcibridgeError, UsageError

#: API groups whose kinds are Kubernetes' own (the rest are custom resources)
_BUILT_IN_GROUPS = ("apps/", "batch/", "policy/", "rbac.authorization.k8s.io/", "networking.k8s.io/",
                    "storage.k8s.io/", "autoscaling/")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


class SchemaViolation(OcibridgeError):
    """A document the chosen Kubernetes version's schema refuses."""


@dataclass(frozen=True)
class DocumentCheck(FieldsAsDict):
    """One document: ``checked`` against the schema (False: a custom resource)."""

    kind: str
    name: str
    checked: bool


@dataclass(frozen=True)
class SchemaCheck:
    """Every document valid for ``version`` (the schema used: the newest release not newer than
    the one asked for), or a :class:`SchemaViolation` was raised."""

    version: str
    documents: tuple[DocumentCheck, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"kubernetesVersion": self.version, "documents": [d.as_dict() for d in self.documents]}


def _validator() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        raise OcibridgeError("--validate needs kubernetes-validate: pip install 'ocibridge[k8s]'") from None
    return kubernetes_validate


def schema_version(asked: str | None) -> str:
    """The schema release for ``asked`` (``1.33``, ``v1.33.2``; None: the newest there is)."""
    kv = _validator()
    known = sorted({_minor(v) for v in kv.utils.all_versions()})
    if asked is None:
        return _shown(known[-1])
    match = _VERSION.match(asked.strip())
    if match is None:
        raise UsageError(f"--validate {asked}: not a Kubernetes version (1.33, v1.33.2)")
    wanted = (int(match.group(1)), int(match.group(2)))
    older = [v for v in known if v <= wanted]
    if not older or wanted > known[-1]:
        raise UsageError(f"--validate {asked}: the schemas installed cover Kubernetes "
                         f"{_shown(known[0])} to {_shown(known[-1])}")
    return _shown(older[-1])


def _shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def check_documents(documents: Sequence[Mapping[str, Any]], version: str | None = None) -> SchemaCheck:
    """Check each document against the schema of ``version``; raises :class:`SchemaViolation`
    naming the first document refused, where in it, and why."""
    kv = _validator()
    release = schema_version(version)
    checks: list[DocumentCheck] = []
    for doc in documents:
        kind, api = str(doc.get("kind", "")), str(doc.get("apiVersion", ""))
        name = str((doc.get("metadata") or {}).get("name", ""))
        built_in = api == "v1" or api.startswith(_BUILT_IN_GROUPS)
        if not built_in:
            checks.append(DocumentCheck(kind, name, False))
            continue
        try:
            kv.validate(dict(doc), f"{release}.0", strict=True)
        except kv.ValidationError as e:
            where = _path(e.absolute_path)
            raise SchemaViolation(f"Kubernetes {release} refuses {kind} {name}: {where}{e.message}") from None
        except kv.SchemaNotFoundError:
            raise SchemaViolation(f"Kubernetes {release} has no {kind} in {api}") from None
        checks.append(DocumentCheck(kind, name, True))
    return SchemaCheck(release, tuple(checks))


def _path(parts: Sequence[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return f"{text}: " if text else ""
