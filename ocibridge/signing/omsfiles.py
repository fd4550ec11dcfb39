"""The files a model manifest holds, with their SHA-256: what an OMS statement lists.

A raw layer is one file whose blob digest *is* the file's SHA-256, so a model of any size is
listed from its manifest without reading a byte of weights. A tar layer is read through the one
layer reader (verified, bounded) and each regular file in it hashed as it streams. Files the OMS
tools ignore (git's, ``model.sig``) are left out, as ``model_signing`` leaves them out.
"""

from __future__ import annotations

import hashlib

from ocibridge.core.fsutil import is_root_entry, safe_relpath
from ocibridge.core.streams import open_tar_stream
from ocibridge.errors import SignatureError
from ocibridge.layers.reader import open_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK, split_digest
from ocibridge.oci.layerinfo import raw_file_path
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.signing.oms import GIT_PATHS, SIGNATURE_FILE, is_ignored
from ocibridge.stores.base import Store


def manifest_files(store: Store, subject: Descriptor, data: bytes | None = None) -> dict[str, str]:
    """path -> sha256 hex of every file the manifest ``subject`` holds (git's files left out).

    Refused: an index, a layer without a path, a raw layer not addressed by sha256, symlinks
    or special files in a tar layer (OMS signs regular files only), a path given twice, and a
    file named ``model.sig`` at the root (the signature's own place).
    """
    node = parse_manifest_bytes(data if data is not None else store.fetch_bytes(subject), subject.mediaType)
    if not isinstance(node, Manifest):
        raise SignatureError(f"{subject.digest} is an index; sign one model manifest by digest")
    files: dict[str, str] = {}
    for layer in node.layers:
        name = raw_file_path(layer, SignatureError)
        if name is not None:
            algorithm, hexpart = split_digest(layer.digest)
            if algorithm != "sha256":
                raise SignatureError(f"layer {layer.digest}: OMS needs sha256 file digests")
            _add(files, safe_relpath(name, "layer file path"), hexpart)
        else:
            for rel, hexpart in _tar_files(store, layer):
                _add(files, rel, hexpart)
    return {path: digest for path, digest in files.items() if not is_ignored(path, GIT_PATHS)}


def _add(files: dict[str, str], rel: str, hexdigest: str) -> None:
    if rel in files:
        raise SignatureError(f"duplicate path in artifact: {rel}")
    if rel == SIGNATURE_FILE:
        raise SignatureError(f"the model holds a file {SIGNATURE_FILE}, where its OMS signature goes")
    files[rel] = hexdigest


def _tar_files(store: Store, layer: Descriptor) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
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
            src = tar.extractfile(member)
            assert src is not None
            h = hashlib.sha256()
            while chunk := src.read(CHUNK):
                h.update(chunk)
            found.append((rel, h.hexdigest()))
        while stream.read(CHUNK):  # to EOF: the layer's digest is verified there
            pass
    return found
