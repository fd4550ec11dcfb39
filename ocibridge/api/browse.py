"""Browsing a registry as API calls, as oras and skopeo users do: :func:`list_repositories`
(``oras repo ls``), :func:`fetch_manifest` (``oras manifest fetch``, ``skopeo inspect --raw``)
and :func:`diff` (two models: files, config fields, tensors).

Light at import: the registry client and the lazy readers load inside the calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.api.options import TransferOptions
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.lazyread.budget import ReadBudget
    from ocibridge.lazyread.diff import FileChange as FileChange  # diff's result types, named here for the CLI
    from ocibridge.lazyread.diff import ModelDiff as ModelDiff
    from ocibridge.lazyread.model import Warn
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locate import Locator

__all__ = ["FetchedManifest", "RepositoryList", "diff", "fetch_manifest", "list_repositories"]


@dataclass(frozen=True)
class RepositoryList:
    """The repositories of a registry's catalog under ``prefix``, named as ``oras repo ls``
    prints them: relative to the prefix."""

    registry: str
    prefix: str
    repositories: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"registry": self.registry, "prefix": self.prefix, "repositories": list(self.repositories)}


def list_repositories(target: str, *, transfer: TransferOptions | None = None,
                      max_pages: int | None = None) -> RepositoryList:
    """The repositories ``REGISTRY[/PREFIX]`` holds (the catalog, every page, filtered by the
    prefix; ``max_pages``: at most that many, then a RegistryError). Raises
    :class:`ocibridge.errors.RegistryError` when the registry refuses its catalog (many allow it
    only to an admin)."""
    from ocibridge.places.locate import registry_text
    from ocibridge.stores.registry.client import RegistryClient
    from ocibridge.stores.registry.credentials import credential_function
    from ocibridge.stores.registry.v2catalog import MAX_PAGES, list_catalog

    text = registry_text(target, "repo ls takes REGISTRY[/PREFIX] (a layout's models: ocibridge ls oci:PATH)")
    text = text.rstrip("/")
    host, _, prefix = text.partition("/")
    if not host or "@" in text or " " in text or ":" in prefix:
        raise UsageError(f"repo ls takes REGISTRY or REGISTRY/PREFIX, not {target!r}")
    options = (transfer or TransferOptions()).registry_options()
    client = RegistryClient(host, options, credentials=credential_function(options))
    try:
        names = list_catalog(client, prefix, max_pages=max_pages or MAX_PAGES)
    finally:
        client.close()
    head = f"{prefix}/" if prefix else ""
    return RepositoryList(host, prefix, tuple(name[len(head):] for name in names))


@dataclass(frozen=True)
class FetchedManifest:
    """A manifest's exact bytes as the store holds them (verified against ``descriptor``'s digest)."""

    reference: str
    descriptor: Descriptor
    content: bytes

    def as_dict(self) -> dict[str, Any]:
        """The descriptor (what ``--descriptor`` and ``--json`` print)."""
        return self.descriptor.model_dump(exclude_none=True)


def fetch_manifest(ref: str | Locator, *, transfer: TransferOptions | None = None) -> FetchedManifest:
    """The manifest (or index) ``ref`` names, byte for byte: checked against the digest ``ref``
    names, else the one the registry sends (``Docker-Content-Digest``)."""
    from ocibridge.api.opening import open_located
    from ocibridge.places.locate import Role, text_of
    from ocibridge.stores.base import resolve_and_read

    located, target = open_located(ref, transfer, role=Role.LOCAL).parts
    desc, data = resolve_and_read(target.store, target.reference)
    return FetchedManifest(text_of(located), desc, data)


def diff(old: str | Locator, new: str | Locator, *, transfer: TransferOptions | None = None,
         warn: Warn | None = None, max_read: int | ReadBudget | None = None) -> ModelDiff:
    """What changed from model ``old`` to model ``new`` (registry references): files added,
    removed and changed (by layer digest, with sizes), config fields changed, and for a changed
    safetensors file its tensors added, removed and changed: unchanged when the chunk digests
    covering a tensor agree (nothing read), else by its bytes, every byte read verified.
    ``warn``: told when a file is read whole for want of a chunk table (default: stderr).
    ``max_read``: the bytes the configs' and tensors' reads may take (a number or a shared
    :class:`ReadBudget`; None: no cap); past it, a file says which of its tensors were not
    compared (:attr:`FileChange.unread`), and files and sizes are there all the same."""
    from ocibridge.lazyread.budget import ReadBudget
    from ocibridge.lazyread.diff import diff_models
    from ocibridge.lazyread.model import RemoteModel, warn_stderr
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.places.locate import Role, locate, text_of
    from ocibridge.stores.base import close_store
    from ocibridge.stores.registry import open_repository

    options = (transfer or TransferOptions()).registry_options()
    located = [locate(ref, Role.REGISTRY) for ref in (old, new)]
    registries = [where for where in located if isinstance(where, RegistryReference)]
    if len(registries) != 2:
        raise UsageError("diff compares two registry models (HOST/REPO:TAG or @DIGEST)")
    opened = []
    try:
        for where in registries:
            opened.append(open_repository(where, options))
        models = [RemoteModel(store, where.reference, warn=warn or warn_stderr)
                  for store, where in zip(opened, registries, strict=True)]
        try:
            budget = ReadBudget(max_read) if isinstance(max_read, int) else max_read
            return diff_models(models[0], models[1], text_of(registries[0]), text_of(registries[1]), budget)
        finally:
            for model in models:
                model.close()
    finally:
        for store in opened:
            close_store(store)
