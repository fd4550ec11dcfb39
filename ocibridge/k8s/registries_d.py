"""A node's ``registries.d`` (containers-registries.d(5)): whether CRI-O reads sigstore
signatures for a reference at all (``k8s check --node-registries-d DIR``).

A ``sigstoreSigned`` requirement is met only by signatures the node reads, and containers/image
reads sigstore attachments (cosign's ``sha256-….sig`` tags) only where ``registries.d`` sets
``use-sigstore-attachments: true`` for the repository, a namespace above it or
``default-docker``; it is off by default, and then every ``sigstoreSigned`` pull is refused
whatever the registry holds (``docker/registries_d.go useSigstoreAttachments``). Read as
containers/image merges it: every ``*.yaml`` file of the directory; ``default-docker`` in two
files, or one ``docker`` namespace in two files, is an error. Namespaces are looked up as the
policy's scopes are (the identity, then its namespaces, most specific first), in canonical
form, and an entry that does not set the key passes the question to the next one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibridge.core.asdict import FieldsAsDict
from ocibridge.core.hosts import OddHost
from ocibridge.core.smallfile import read_small
from ocibridge.errors import TooLarge, UsageError
from ocibridge.signing.containers_policy import Scope, canonical_scope

SYSTEM_DIR = "/etc/containers/registries.d"
#: the file ``check`` proposes when no file of the node names the namespace yet
PROPOSED_FILE = "ocibridge-sigstore.yaml"
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 1000
KEY = "use-sigstore-attachments"


@dataclass(frozen=True)
class NodeFile(FieldsAsDict):
    """A file to write on every node (its absolute path there) and its whole content."""

    path: str
    content: str


@dataclass(frozen=True)
class RegistriesD:
    """The merged configuration: ``default-docker``'s setting and each namespace's, with the
    file that set it (for the file to change)."""

    directory: str
    default: bool | None = None
    namespaces: dict[str, bool | None] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # namespace -> file name
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)  # file name -> its YAML

    def sigstore_attachments(self, scope: Scope) -> tuple[bool, str]:
        """(whether the node reads sigstore attachments for ``scope``, which entry says so)."""
        for key in (scope.identity, *scope.namespaces):
            value = self.namespaces.get(key)
            if value is not None:
                return value, f'{self.files[key]} (docker "{key}")'
        if self.default is not None:
            return self.default, f"{self.directory} (default-docker)"
        return False, f"{self.directory} (not set: off by default)"


def read_registries_d(directory: str | os.PathLike[str]) -> RegistriesD:
    """Every ``*.yaml`` of ``directory`` merged as containers/image merges them; a directory
    that does not exist is an empty one (as on a node without it). One error line otherwise."""
    import yaml

    where = Path(directory)
    try:
        names = sorted(n for n in os.listdir(where) if n.endswith(".yaml"))
    except FileNotFoundError:
        return RegistriesD(str(where))
    except OSError as e:
        raise UsageError(f"--node-registries-d {where}: {e.strerror or e}") from None
    if len(names) > MAX_FILES:
        raise UsageError(f"--node-registries-d {where}: more than {MAX_FILES} files")
    merged = RegistriesD(str(where))
    for name in names:
        path = where / name
        try:
            doc = yaml.safe_load(read_small(path, MAX_FILE_BYTES, "registries.d file", error=UsageError))
        except (FileNotFoundError, TooLarge, yaml.YAMLError) as e:
            raise UsageError(f"registries.d file {path}: {str(e).splitlines()[0] if str(e) else e}") from None
        except RecursionError:  # PyYAML's composer recurses once per level of nesting
            raise UsageError(f"registries.d file {path}: nested too deeply to read") from None
        doc = {} if doc is None else doc
        if not isinstance(doc, dict):
            raise UsageError(f"registries.d file {path}: not a mapping")
        merged.documents[str(path)] = doc
        if doc.get("default-docker") is not None:
            if any("default-docker" in d for p, d in merged.documents.items() if p != str(path)):
                raise UsageError(f"registries.d file {path}: \"default-docker\" is defined in another file too")
            merged = _with_default(merged, _setting(doc["default-docker"], path, "default-docker"))
        for namespace, settings in (_mapping(doc.get("docker"), path, "docker") or {}).items():
            key = _canonical(str(namespace))
            if key in merged.namespaces:
                raise UsageError(f"registries.d file {path}: docker namespace {namespace!r} is defined in "
                                 f"{merged.files[key]} too")
            merged.namespaces[key] = _setting(settings, path, f"docker {namespace!r}")
            merged.files[key] = str(path)
    return merged


def _with_default(merged: RegistriesD, value: bool | None) -> RegistriesD:
    return RegistriesD(merged.directory, value, merged.namespaces, merged.files, merged.documents)


def _canonical(namespace: str) -> str:
    try:
        return canonical_scope(namespace)
    except OddHost:
        return namespace


def _mapping(value: Any, path: Path, where: str) -> dict[Any, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"registries.d file {path}: {where} is not a mapping")
    return value


def _setting(value: Any, path: Path, where: str) -> bool | None:
    settings = _mapping(value, path, where) or {}
    found = settings.get(KEY)
    if found is not None and not isinstance(found, bool):
        raise UsageError(f"registries.d file {path}: {where}: {KEY} must be true or false")
    return found


def proposed_file(registries: RegistriesD | None, scope: Scope) -> tuple[NodeFile, str]:
    """(the file that turns sigstore attachments on for ``scope`` on the node, the namespace it
    sets): the node's own file holding the most specific namespace of the scope, with the key
    set there (the same namespace in a second file would be an error), else a new file of its
    own in ``/etc/containers/registries.d`` for the scope's repository."""
    from ocibridge.core.yamldocs import dump_all

    assert scope.docker is not None
    namespace = scope.docker.name
    if registries is not None:
        namespace = next((k for k in (scope.identity, *scope.namespaces) if k in registries.files), namespace)
    if registries is not None and namespace in registries.files:
        path = registries.files[namespace]
        doc = dict(registries.documents[path])
        docker = dict(doc.get("docker") or {})
        written = next(k for k in docker if _canonical(str(k)) == namespace)
        docker[written] = {**(docker[written] or {}), KEY: True}
        doc["docker"] = docker
        return NodeFile(f"{SYSTEM_DIR}/{Path(path).name}", dump_all([doc])), namespace
    return NodeFile(f"{SYSTEM_DIR}/{PROPOSED_FILE}", dump_all([{"docker": {namespace: {KEY: True}}}])), namespace
