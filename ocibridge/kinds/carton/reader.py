"""Read a ``.carton`` into a neutral model package, without extracting it.

Checked up front: the zip (see zipread), MANIFEST against the archive's entries (every file
listed, nothing unlisted, missing files covered by LINKS), symlinks (only inside ``model/``,
resolving to a listed file with the same hash), ``carton.toml``. Small entries are hashed
against MANIFEST right away (a total of ``eager_verify_bytes``), so a bad file in a small
carton fails before anything is copied; larger entries are hashed while the copy streams them
(each byte read once) and fail with the same carton-specific error.

Every file carries its MANIFEST sha256 as its digest, so the builder never re-hashes a raw layer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.confined import resolve_inside
from ocibridge.core.fsutil import link_stays_inside
from ocibridge.core.streams import BackgroundHasher, Reader
from ocibridge.errors import DigestMismatch, UnsafePath
from ocibridge.kinds.carton.carton_toml import CartonToml, parse_carton_toml
from ocibridge.kinds.carton.errors import CartonError, CartonMismatch
from ocibridge.kinds.carton.links import LinkFetcher
from ocibridge.kinds.carton.manifest import (
    LINKS_NAME,
    MANIFEST_NAME,
    TOML_NAME,
    CartonLinks,
    CartonManifest,
    parse_links,
    parse_manifest,
)
from ocibridge.kinds.carton.mapping import annotations_of, config_of, descriptor_of
from ocibridge.kinds.carton.zipread import (
    DEFAULT_LIMITS,
    CartonEntry,
    CartonLimits,
    EntryReader,
    link_target,
    read_entry_bytes,
)
from ocibridge.model.classify import classify
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.digest import VerifyingReader
from ocibridge.oci.mediatypes import Kind

SOURCE_FORMAT = "carton"
MODEL_DIR = "model"
#: Entries are hashed in read_carton while their total stays under this many bytes.
EAGER_VERIFY_BYTES = 64 << 20
#: Files from this size on are hashed on a separate thread while they stream.
BACKGROUND_HASH_BYTES = 8 << 20
KIND_BY_DIR = {MODEL_DIR: Kind.WEIGHT, "tensor_data": Kind.DATASET, "misc": Kind.DOC}


def _kind(path: str, size: int) -> Kind:
    if path in (TOML_NAME, MANIFEST_NAME):
        return Kind.WEIGHT_CONFIG
    top = path.split("/", 1)[0] if "/" in path else ""
    return KIND_BY_DIR.get(top) or classify(path, size)


class _CheckedFile(VerifyingReader):
    """A carton file (zip entry or cached LINKS download) hashed as it is read; a mismatch is
    reported against MANIFEST. A big file is hashed on a thread of its own, in parallel with its
    decompression and with the destination's writing."""

    def __init__(self, raw: Reader, digest: str, size: int, what: str):
        super().__init__(raw, digest, size, what)
        if size >= BACKGROUND_HASH_BYTES:
            self._hasher = BackgroundHasher(self._algorithm)

    def close(self) -> None:
        try:
            if isinstance(self._hasher, BackgroundHasher):
                self._hasher.close()
        finally:
            super().close()

    def verify(self) -> None:
        try:
            super().verify()
        except DigestMismatch:
            raise CartonMismatch(
                f"{self.what}: content sha256 {self.digest.partition(':')[2]} "
                f"({self.size} bytes) does not match MANIFEST ({self.expected_digest.partition(':')[2]})"
            ) from None


def _read_small(archive: Path, entry: CartonEntry, limits: CartonLimits) -> bytes:
    return read_entry_bytes(archive, entry, limits.max_small_file)


def _resolve_links(archive: Path, links: dict[str, str], manifest: CartonManifest) -> None:
    """Links stay in ``model/`` and end at a listed file whose hash the link's MANIFEST line repeats
    (Carton records a link under its final target's sha256)."""
    for path in links:
        if not path.startswith(MODEL_DIR + "/"):
            raise UnsafePath(f"{archive}: symlink {path!r} outside {MODEL_DIR}/")
        if not link_stays_inside(path, links[path], MODEL_DIR):  # the plain case, named plainly
            raise UnsafePath(f"{archive}: symlink {path!r} → {links[path]!r} points outside {MODEL_DIR}/")
        try:  # followed through the other links, as an unpacker's kernel would (confined.py)
            current = resolve_inside(path, links.get, what="symlink")
        except UnsafePath as e:
            if "links to follow" in str(e):
                raise CartonError(f"{archive}: symlink {path!r} is part of a loop") from None
            raise UnsafePath(f"{archive}: symlink {path!r} → {links[path]!r} points outside {MODEL_DIR}/") from None
        if not current.startswith(MODEL_DIR + "/"):
            raise UnsafePath(f"{archive}: symlink {path!r} → {links[path]!r} points outside {MODEL_DIR}/")
        if current not in manifest.entries:
            raise CartonError(f"{archive}: symlink {path!r} points at {current!r}, which MANIFEST does not list")
        if manifest.entries[current] != manifest.entries[path]:
            raise CartonMismatch(
                f"{archive}: symlink {path!r}: MANIFEST hash differs from that of its target {current!r}"
            )


def _verify_eagerly(archive: Path, files: list[tuple[CartonEntry, str]], budget: int) -> None:
    for entry, sha in sorted(files, key=lambda item: (item[0].size, item[0].path)):
        if entry.size > budget:
            break
        budget -= entry.size
        with EntryReader(archive, entry, expect_sha256=sha) as r:
            while r.read(1 << 20):
                pass


def _entry_opener(archive: Path, entry: CartonEntry, sha: str) -> Callable[[], BinaryIO]:
    """The entry checked against MANIFEST as it streams. The check is a VerifyingReader, so the
    destination store reuses it instead of hashing every byte a second time."""

    def opener() -> BinaryIO:
        raw = EntryReader(archive, entry, sha256_checked_by_caller=True)
        return _CheckedFile(raw, "sha256:" + sha, entry.size, what=f"{archive}: {entry.path}")  # type: ignore[return-value]  # a verifying read()-stream where ModelFile openers name BinaryIO

    return opener


def _link_opener(fetcher: LinkFetcher, sha: str, urls: list[str], what: str, size: int) -> Callable[[], BinaryIO]:
    def opener() -> BinaryIO:
        raw = fetcher.open(sha, urls, what, size)
        return _CheckedFile(raw, "sha256:" + sha, size, what=what)  # type: ignore[return-value]  # a verifying read()-stream where ModelFile openers name BinaryIO

    return opener


def _scan(archive: Path, limits: CartonLimits) -> tuple[dict[str, CartonEntry], CartonManifest, bytes, CartonLinks]:
    from ocibridge.kinds.carton.zipread import scan_entries

    entries = scan_entries(archive, limits)
    by_path = {e.path: e for e in entries}
    for name in (MANIFEST_NAME, TOML_NAME):
        if name not in by_path or by_path[name].is_link:
            raise CartonError(f"{archive}: not a carton: no {name} file at its root")
    manifest_bytes = _read_small(archive, by_path[MANIFEST_NAME], limits)  # its errors name the archive
    links_bytes = _read_small(archive, by_path[LINKS_NAME], limits) if LINKS_NAME in by_path else None
    try:
        manifest = parse_manifest(manifest_bytes)
        links = parse_links(links_bytes) if links_bytes is not None else CartonLinks()
    except (CartonError, UnsafePath) as e:
        raise type(e)(f"{archive}: {e}") from None
    toml_bytes = _read_small(archive, by_path[TOML_NAME], limits)
    return by_path, manifest, toml_bytes, links


def _parse_toml(archive: Path, data: bytes, manifest: CartonManifest) -> CartonToml:
    import hashlib

    if TOML_NAME not in manifest.entries:
        raise CartonError(f"{archive}: MANIFEST does not list {TOML_NAME}")
    if hashlib.sha256(data).hexdigest() != manifest.entries[TOML_NAME]:
        raise CartonMismatch(f"{archive}: {TOML_NAME} does not match its MANIFEST sha256")
    try:
        return parse_carton_toml(data)
    except CartonError as e:
        raise CartonError(f"{archive}: {e}") from None


def read_carton(
    path: str | os.PathLike[str],
    *,
    links_fetcher: LinkFetcher | None = None,
    limits: CartonLimits = DEFAULT_LIMITS,
    eager_verify_bytes: int | None = None,
) -> ModelPackage:
    """A ``.carton`` as a model package: model/ → weight, tensor_data/ → dataset, misc/ → doc,
    carton.toml and MANIFEST verbatim as weight.config, symlinks as links. Fails with one
    :class:`CartonError` (or :class:`UnsafePath`) line naming the archive and the entry."""
    archive = Path(path)
    by_path, manifest, toml_bytes, links = _scan(archive, limits)
    toml = _parse_toml(archive, toml_bytes, manifest)
    for name in by_path:
        if name not in manifest.entries and name not in (MANIFEST_NAME, LINKS_NAME):
            raise CartonError(f"{archive}: entry {name!r} is not listed in MANIFEST")
    symlinks = {p: link_target(archive, e) for p, e in by_path.items() if e.is_link}
    _resolve_links(archive, symlinks, manifest)

    model_hash = manifest.model_hash
    files: list[ModelFile] = []
    to_verify: list[tuple[CartonEntry, str]] = []
    fetcher = links_fetcher
    for rel, sha in manifest.entries.items():
        entry = by_path.get(rel)
        if entry is not None and entry.is_link:
            files.append(ModelFile(path=rel, kind=Kind.WEIGHT, size=0, link_target=symlinks[rel]))
            continue
        if entry is not None:
            to_verify.append((entry, sha))
            files.append(
                ModelFile(
                    path=rel,
                    kind=_kind(rel, entry.size),
                    size=entry.size,
                    opener=_entry_opener(archive, entry, sha),
                    mode=entry.mode,
                    digest="sha256:" + sha,
                    checked=True,
                )
            )
            continue
        urls = links.urls.get(sha)
        if not urls:
            raise CartonError(f"{archive}: MANIFEST lists {rel!r}, which is neither in the archive nor in LINKS")
        fetcher = fetcher or LinkFetcher()
        what = f"{archive}: {rel}"
        size = fetcher.size_of(sha, urls)
        if size is None:  # no URL tells the size without a download: fetch it now (cached)
            size = fetcher.fetch(sha, urls, what).stat().st_size
        files.append(
            ModelFile(
                path=rel,
                kind=_kind(rel, size),
                size=size,
                opener=_link_opener(fetcher, sha, urls, what, size),
                digest="sha256:" + sha,
                checked=True,
            )
        )
    manifest_entry = by_path[MANIFEST_NAME]
    files.append(
        ModelFile(
            path=MANIFEST_NAME,
            kind=Kind.WEIGHT_CONFIG,
            size=manifest_entry.size,
            opener=_entry_opener(archive, manifest_entry, model_hash),
            mode=manifest_entry.mode,
            digest="sha256:" + model_hash,
        )
    )
    budget = EAGER_VERIFY_BYTES if eager_verify_bytes is None else eager_verify_bytes
    _verify_eagerly(archive, to_verify, budget)
    files.sort(key=lambda f: f.path.encode())
    return ModelPackage(
        files=files,
        descriptor=descriptor_of(toml),
        config=config_of(toml),
        annotations=annotations_of(toml, model_hash),
        source_format=SOURCE_FORMAT,
    )
