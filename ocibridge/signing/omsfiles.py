"""The files a model manifest holds, with their digests: what an OMS statement lists.

A raw layer is one file whose blob digest *is* the file's SHA-256, so a model of any size is
listed (whole files, SHA-256) from its manifest without reading a byte of weights; another
hash or shards read each blob once, verified. A tar layer is read through the one
layer reader (verified, bounded) and each regular file in it hashed as it streams. Files the OMS
tools ignore (git's, ``model.sig``) are left out, as ``model_signing`` leaves them out.
"""

from __future__ import annotations

from ocibridge.core.fsutil import is_root_entry, safe_relpath
from ocibridge.core.streams import open_tar_stream
from ocibridge.errors import SignatureError
from ocibridge.layers.reader import open_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK, split_digest
from ocibridge.oci.empty import is_empty_layer
from ocibridge.oci.layerinfo import raw_file_path
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.signing.oms import GIT_PATHS, SHA256_FILES, SIGNATURE_FILE, Hashing, OmsStatement, is_ignored
from ocibridge.signing.omshash import hash_stream, hasher_factory
from ocibridge.stores.base import Store


class ManifestListing:
    """A manifest's resources, listed once per hashing for every OMS signature a verify or a
    pull meets, and never more of them than the signature asked about lists."""

    def __init__(self, store: Store, subject: Descriptor) -> None:
        self.store, self.subject = store, subject
        self._listed: dict[Hashing, dict[str, str]] = {}

    def of(self, statement: OmsStatement) -> dict[str, str]:
        if statement.hashing not in self._listed:
            shards = statement.hashing.shard_size is not None  # whole files: one resource each, no more
            self._listed[statement.hashing] = manifest_files(self.store, self.subject, hashing=statement.hashing,
                                                             limit=len(statement.files) if shards else None)
        return self._listed[statement.hashing]


def manifest_files(store: Store, subject: Descriptor, data: bytes | None = None,
                   hashing: Hashing = SHA256_FILES, limit: int | None = None) -> dict[str, str]:
    """The OMS resources (name -> hex digest, as ``hashing`` says) of every file the manifest
    ``subject`` holds, git's files left out. With SHA-256 over whole files a raw layer is its
    blob digest and no weight byte is read; another hash, or shards, reads every layer once.

    Refused: more than ``limit`` resources (shards), an index, a layer without a path, a raw
    layer not addressed by sha256, symlinks or special files in a tar layer (OMS signs regular
    files only), a path given twice, and a file named ``model.sig`` at the root (the
    signature's own place).
    """
    node = parse_manifest_bytes(data if data is not None else store.fetch_bytes(subject), subject.mediaType)
    if not isinstance(node, Manifest):
        raise SignatureError(f"{subject.digest} is an index; sign one model manifest by digest")
    hasher_factory(hashing.hash_type)  # a missing blake3 is one line, before any layer is read
    files: dict[str, dict[str, str]] = {}
    budget = _Budget(limit)
    for layer in node.layers:
        if is_empty_layer(layer):
            continue  # a model of no files (oci/empty.py): nothing to sign but the manifest
        name = raw_file_path(layer, SignatureError)
        if name is not None:
            algorithm, hexpart = split_digest(layer.digest)
            if algorithm != "sha256":
                raise SignatureError(f"layer {layer.digest}: OMS needs sha256 file digests")
            rel = safe_relpath(name, "layer file path")
            if is_ignored(rel, GIT_PATHS):
                _add(files, rel, {})  # left out of every signature: not hashed
            elif hashing == SHA256_FILES:
                _add(files, rel, budget.spend({rel: hexpart}))
            else:
                _add(files, rel, budget.spend(_raw_resources(store, layer, rel, hashing, budget.left())))
        else:
            for rel, resources in _tar_files(store, layer, hashing, budget):
                _add(files, rel, resources)
    return {name: digest for resources in files.values() for name, digest in resources.items()}


def _add(files: dict[str, dict[str, str]], rel: str, resources: dict[str, str]) -> None:
    if rel in files:
        raise SignatureError(f"duplicate path in artifact: {rel}")
    if rel == SIGNATURE_FILE:
        raise SignatureError(f"the model holds a file {SIGNATURE_FILE}, where its OMS signature goes")
    files[rel] = resources


class _Budget:
    """How many more resources a listing may hold (None: no bound)."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.used = limit, 0

    def left(self) -> int | None:
        return None if self.limit is None else self.limit - self.used

    def spend(self, resources: dict[str, str]) -> dict[str, str]:
        self.used += len(resources)
        if self.limit is not None and self.used > self.limit:
            raise SignatureError(f"the model's files make more than the {self.limit} resources the OMS "
                                 "signature lists")
        return resources


def _raw_resources(store: Store, layer: Descriptor, rel: str, hashing: Hashing, limit: int | None) -> dict[str, str]:
    with open_layer(store, layer) as stream:
        return hash_stream(stream.read, rel, hashing, limit)  # to EOF: the layer's digest is verified there


def _tar_files(store: Store, layer: Descriptor, hashing: Hashing, budget: _Budget) -> list[tuple[str, dict[str, str]]]:
    found: list[tuple[str, dict[str, str]]] = []
    with open_layer(store, layer) as stream, open_tar_stream(stream) as tar:
        for member in tar_members(tar):
            if member.isdir():
                continue
            if is_root_entry(member.name):
                continue
            rel = safe_relpath(member.name, "tar entry")
            if not member.isfile():
                raise SignatureError(f"{rel}: OMS signs regular files only (symlink or special file in "
                                     f"layer {layer.digest[:19]})")
            if is_ignored(rel, GIT_PATHS):
                found.append((rel, {}))  # left out of every signature: not hashed
                continue
            src = tar.extractfile(member)
            assert src is not None
            found.append((rel, budget.spend(hash_stream(src.read, rel, hashing, budget.left()))))
        while stream.read(CHUNK):  # to EOF: the layer's digest is verified there
            pass
    return found
