"""A model pushed with its chunk table bound, and a look-alike of its manifest binding a forged
table under which one flipped byte verifies: what the tests of an attack on a table are made of
(tests/signing/test_signing_coverage.py, tests/signing/test_signed_table_pull.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import ocibridge
from ocibridge.chunks import hashes
from ocibridge.chunks.attach import attach_table
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ANNOTATION_SIZE, LayerChunks, build_table
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import WritableStore as Store


def push_chunked(registry, directory: Path, repo: str, size: int, chunk: int) -> bytes:
    """``size`` random bytes as ``directory/weights.bin``, pushed to ``repo:v1`` with a table of
    ``chunk``-byte chunks bound; the bytes."""
    directory.mkdir()
    data = os.urandom(size)
    (directory / "weights.bin").write_bytes(data)
    ocibridge.push(str(directory), f"{registry.host}/{repo}:v1",
                   options=ocibridge.PushOptions(chunk_size=chunk, chunk_threshold=chunk))
    return data


def push_lookalike(store: Store, layer: str, data: bytes, flip_at: int, chunk: int, algorithm: str,
                   resign: Callable[[Store, Descriptor, Descriptor], None]) -> tuple[Descriptor, bytes]:
    """Tag ``evil`` in ``store``: ``v1``'s manifest with its table binding replaced by a table
    (of ``algorithm``) under which ``data`` with byte ``flip_at`` flipped verifies, the table
    attached where the registry serves it; ``resign(store, subject, evil)`` carries a signature
    of the subject over. (the look-alike's descriptor, the forged bytes)"""
    forged = bytearray(data)
    forged[flip_at] ^= 0xFF
    chunks = tuple(hashes.hexdigest(algorithm, bytes(forged[i:i + chunk])) for i in range(0, len(data), chunk))
    table = build_table([LayerChunks(layer, len(data), chunks, algorithm)], chunk)
    subject = store.resolve("v1")
    doc = json.loads(store.fetch_bytes(subject))
    doc["annotations"][ANNOTATION_DIGEST] = table.descriptor().digest
    doc["annotations"][ANNOTATION_SIZE] = str(table.descriptor().size)
    manifest = json.dumps(doc).encode()
    evil = Descriptor.for_bytes(OCI_MANIFEST, manifest)
    store.push_manifest(evil, manifest, "evil")
    attach_table(store, evil, table)
    resign(store, subject, evil)
    return evil, bytes(forged)
