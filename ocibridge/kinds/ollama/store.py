"""The local Ollama store (``$OLLAMA_MODELS``) as a Store bound to one model name.

``manifests/<host>/<namespace>/<model>/<tag>`` holds manifest files, ``blobs/sha256-<hex>``
the blobs. Ollama keeps no manifest blobs, so a manifest's digest is the digest of its file.
Blobs are written under a temporary name, verified, then renamed; a manifest file is written
last and atomically, and only when every blob it names is present. ``removing_new_blobs_on_failure()`` removes
the blobs a failed export added, so a failure leaves the store as it was: all but those another
live writer claimed (:mod:`ocibridge.stores.leases`) or a manifest of the store names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.fsutil import TEMP_PREFIX, atomic_write_bytes, atomic_writer, write_sliced
from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError, TooLarge
from ocibridge.kinds.ollama.destcheck import check_blob, check_manifest
from ocibridge.kinds.ollama.manifest import manifest_blobs, parse_ollama_manifest
from ocibridge.oci.digest import (
    CHUNK,
    VerifyingReader,
    is_digest,
    sha256_bytes,
    split_digest,
    verified,
    verify_bytes,
)
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES, DOCKER_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import OLLAMA_TAG_RE, OllamaName
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Reopen
from ocibridge.stores.leases import Leases

MODELS_ENV = "OLLAMA_MODELS"


def default_models_dir() -> Path:
    """``$OLLAMA_MODELS``, else ``~/.ollama/models`` (where Ollama keeps its store)."""
    value = os.environ.get(MODELS_ENV)
    return Path(value).expanduser() if value else Path.home() / ".ollama" / "models"


#: models a refusal names at most (a store may hold hundreds)
MODELS_SHOWN = 10


def models_in(root: Path) -> list[str]:
    """Every model a models directory holds, as Ollama shows them (``tiny:latest``,
    ``host/ns/model:tag`` off the defaults), sorted: what a name that is not there may have meant."""
    found = []
    for tag_file in sorted((root / "manifests").glob("*/*/*/*")):
        host, namespace, model, tag = tag_file.relative_to(root / "manifests").parts
        if tag_file.is_file() and not tag.startswith(TEMP_PREFIX) and OLLAMA_TAG_RE.match(tag):
            found.append(OllamaName(host, namespace, model, tag).display)
    return found


class OllamaStore(ClosesOnExit):
    """One model (host/namespace/model) of an Ollama models directory; tags are its tags."""

    def __init__(self, root: str | os.PathLike[str], name: OllamaName, create: bool = False,
                 label: str | None = None):
        self.root = Path(root).expanduser()
        self.name = name
        self.label = label or f"ollama:{name.display}"  # how the user wrote it, for messages
        if not create and not (self.root / "manifests").is_dir():
            raise NotFound(f"{self.root} is not an Ollama models directory (no manifests/)")
        self._pending: dict[str, bytes] = {}  # manifests pushed without a tag yet
        self._created: list[Path] | None = None
        self._leases = Leases(self.root, self.root)  # the models directory itself is the lock

    def describe(self) -> str:
        return f"ollama:{self.name.display_model} ({self.root})"

    def close(self) -> None:
        """End this writer's lease (see :mod:`ocibridge.stores.leases`)."""
        self._leases.release()

    # -- paths -------------------------------------------------------------------------------
    @property
    def model_dir(self) -> Path:
        """Exact case for writing; an existing directory that differs only in case is used as
        it is, since Ollama compares names case-insensitively (and some versions lowercase)."""
        n = self.name
        exact = self.root / "manifests" / n.host / n.namespace / n.model
        if exact.is_dir():
            return exact
        found = self.root / "manifests"
        for part in (n.host, n.namespace, n.model):
            child = _case_insensitive_child(found, part)
            if child is None:
                return exact
            found = child
        return found

    def manifest_path(self, tag: str) -> Path:
        if not OLLAMA_TAG_RE.match(tag):
            raise OcibridgeError(f"invalid Ollama tag {tag!r}")
        folder = self.model_dir
        exact = folder / tag
        if exact.exists():
            return exact
        return _case_insensitive_child(folder, tag) or exact

    def blob_path(self, digest: str) -> Path:
        algorithm, hexpart = split_digest(digest)
        if algorithm != "sha256":
            raise OcibridgeError(f"Ollama stores only sha256 blobs, not {digest}")
        return self.root / "blobs" / f"sha256-{hexpart}"

    # -- manifests ---------------------------------------------------------------------------
    def _read_manifest_file(self, tag: str) -> bytes:
        path = self.manifest_path(tag)
        try:
            if path.stat().st_size > MAX_MANIFEST_BYTES:
                raise TooLarge(f"{path}: manifest larger than {MAX_MANIFEST_BYTES} bytes")
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            known = self.tags()
            if known:
                raise NotFound(f"{self.describe()}: no model tagged {tag!r} (tags: {', '.join(known)})") from None
            there = models_in(self.root)
            shown = ", ".join(there[:MODELS_SHOWN]) + (f" and {len(there) - MODELS_SHOWN} more"
                                                       if len(there) > MODELS_SHOWN else "")
            raise NotFound(f"{self.describe()}: no such model; the store holds "
                           f"{shown or 'none'} (ollama list names them)") from None

    def _find_manifest(self, digest: str) -> bytes | None:
        if digest in self._pending:
            return self._pending[digest]
        for tag in self.tags():
            data = self._read_manifest_file(tag)
            if sha256_bytes(data) == digest:
                return data
        return None

    def resolve(self, reference: str) -> Descriptor:
        if is_digest(reference):
            data = self._find_manifest(reference)
            if data is None:
                raise NotFound(f"{self.describe()}: no manifest with digest {reference}")
        else:
            data = self._read_manifest_file(reference)
        return Descriptor.for_bytes(DOCKER_MANIFEST, data)

    def tags(self) -> list[str]:
        try:
            entries = list(os.scandir(self.model_dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            e.name for e in entries
            if e.is_file(follow_symlinks=False) and not e.name.startswith(TEMP_PREFIX)
            and OLLAMA_TAG_RE.match(e.name)
        )

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Only Ollama-shaped manifests: a ModelPack artifact goes in through export_ollama."""
        verify_bytes(data, desc.digest, desc.size, what="manifest")
        check_manifest(self.label, desc.digest, data)
        self._pending[desc.digest] = data
        if tag is not None:
            self.tag(desc, tag)

    def tag(self, desc: Descriptor, tag: str) -> None:
        data = self._find_manifest(desc.digest)
        if data is None:
            raise NotFound(f"{self.describe()}: cannot tag {desc.digest}: manifest not found")
        manifest = parse_ollama_manifest(data, where=f"manifest {desc.digest}")
        for blob in manifest_blobs(manifest):
            blob_desc = Descriptor(mediaType=blob.mediaType, digest=blob.digest, size=blob.size)
            if not self.exists(blob_desc):
                raise NotFound(
                    f"{self.describe()}: refusing to write {tag}: blob {blob.digest} is missing"
                )
        path = self.manifest_path(tag)
        try:
            if path.read_bytes() == data:
                return
        except (FileNotFoundError, NotADirectoryError):
            pass
        atomic_write_bytes(path, data, mode=0o644)

    # -- blobs -------------------------------------------------------------------------------
    def exists(self, desc: Descriptor) -> bool:
        if desc.mediaType in ALL_MANIFEST_TYPES:
            return self._find_manifest(desc.digest) is not None
        return self._look(desc)

    def _look(self, desc: Descriptor) -> bool:
        """Inside :meth:`removing_new_blobs_on_failure` (every export): claimed, then looked
        for; outside it nothing is claimed, so no lease file appears in Ollama's directory."""
        return self._present(desc) if self._created is None else self._claimed_present(desc)

    def _present(self, desc: Descriptor) -> bool:
        try:
            return self.blob_path(desc.digest).stat().st_size == desc.size
        except (FileNotFoundError, OcibridgeError):
            return False

    def _claimed_present(self, desc: Descriptor) -> bool:
        """Claim the blob for this writer and look for it, as one step under the store's lock:
        a failing writer's undo either sees the claim or happened before the look."""
        self.blob_path(desc.digest)  # an unsupported digest fails here, before any lock file
        self.root.mkdir(parents=True, exist_ok=True)
        with self._leases.locked():
            self._leases.claim(desc.digest)
            return self._present(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        data = self._find_manifest(desc.digest) if desc.mediaType in ALL_MANIFEST_TYPES else None
        if data is not None:
            import io

            return io.BytesIO(data)
        try:
            raw = open(self.blob_path(desc.digest), "rb")  # noqa: SIM115 (closed by the caller)
        except FileNotFoundError:
            raise NotFound(f"{self.describe()}: blob {desc.digest} not found") from None
        actual = os.fstat(raw.fileno()).st_size
        if actual != desc.size:  # refused at once: no limit downstream is sized on a false claim
            raw.close()
            raise DigestMismatch(f"{self.describe()}: blob {desc.digest} holds {actual} bytes, its descriptor "
                                 f"says {desc.size}")
        return VerifyingReader(raw, desc.digest, desc.size,  # type: ignore[return-value]  # a verifying read()-stream where the Store protocol still names BinaryIO
                               what=f"{self.describe()}: blob")

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.size > MAX_MANIFEST_BYTES:
            raise TooLarge(f"{desc.digest}: {desc.size} bytes is too large to read whole")
        data = self._find_manifest(desc.digest) if desc.mediaType in ALL_MANIFEST_TYPES else None
        if data is None:
            try:
                with open(self.blob_path(desc.digest), "rb") as f:
                    data = f.read(desc.size + 1)  # a longer file shows as one byte more, and no more is read
            except FileNotFoundError:
                raise NotFound(f"{self.describe()}: blob {desc.digest} not found") from None
        return verify_bytes(data, desc.digest, desc.size)

    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        """Ollama-typed blobs only, so a copy of anything else stops before writing a byte."""
        check_blob(self.label, desc)
        if self._look(desc):
            return
        final = self.blob_path(desc.digest)
        with atomic_writer(final, mode=0o644) as out:
            checked = verified(reader, desc.digest, desc.size)
            while chunk := checked.read(CHUNK):
                write_sliced(out, chunk)
            checked.verify()
        if self._created is not None:
            self._created.append(final)

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []

    @contextlib.contextmanager
    def removing_new_blobs_on_failure(self) -> Iterator[None]:
        """On failure, remove the blobs written inside the block (they were not there before)
        but those another live writer claimed or a manifest names, and the folders it created."""
        self._created = []
        new_dirs = [d for d in (self.root / "blobs", self.root) if not d.exists()]
        try:
            yield
        except BaseException:
            self._remove_unclaimed(self._created)
            self._leases.release()
            for folder in new_dirs:  # made by this export: remove them again if left empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        finally:
            self._created = None
            self._leases.release()

    def _remove_unclaimed(self, paths: list[Path]) -> None:
        if not paths:
            return
        with self._leases.locked():
            keep = self._leases.held_by_others() | self._named_by_manifests()
            for path in paths:
                if "sha256:" + path.name.removeprefix("sha256-") in keep:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _named_by_manifests(self) -> set[str]:
        """Blob digests named by any manifest file of the store (every model, every tag): a
        writer that finished meanwhile holds no lease, but its manifest names what it needs."""
        named: set[str] = set()
        for path in (self.root / "manifests").rglob("*"):
            if path.name.startswith(TEMP_PREFIX) or not path.is_file() or path.is_symlink():
                continue
            try:
                if path.stat().st_size > MAX_MANIFEST_BYTES:
                    continue
                manifest = parse_ollama_manifest(path.read_bytes(), where=str(path))
            except (OSError, OcibridgeError):
                continue
            named.update(blob.digest for blob in manifest_blobs(manifest))
        return named


def _case_insensitive_child(folder: Path, name: str) -> Path | None:
    """The entry of ``folder`` whose name equals ``name`` ignoring case (not a link), if any."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return None
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name.lower() == name.lower() and not entry.is_symlink():
            return Path(entry.path)
    return None
