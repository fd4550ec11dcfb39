"""Air-gap bundles: several models, with their signatures and referrers, in one file.

A bundle is an OCI image layout in a plain tar (what ``skopeo copy oci-archive:`` and
``podman load`` read), plus ``ocibridge-bundle.json`` naming each model's original reference,
its tag in the layout and its digest. ``save`` plans the layout (manifests and tags only) and
streams every blob from its source into the tar, reproducibly (sorted entries, fixed metadata):
the same models give the same bytes, and no blob is staged. ``load`` reads a bundle as
untrusted input (only the layout's own files, every blob verified by the copy) and copies
each model under a destination prefix, keeping its repository path and tag.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ocibridge.api.copy import TransferOptions
from ocibridge.api.opening import locate_destination, open_at, open_checked
from ocibridge.core import boundedjson
from ocibridge.core.asdict import FieldsAsDict
from ocibridge.core.fsutil import check_output_file, write_sliced
from ocibridge.core.textlists import one_or_many
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import LayoutReference, RegistryReference
from ocibridge.places.locate import Role, locate
from ocibridge.places.targets import closes_its_stores, default_store_path
from ocibridge.signing.attach import SignatureCompanions
from ocibridge.stores.base import Store, is_manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import CopyHooks, copy

if TYPE_CHECKING:
    from ocibridge.api.policy import Verification
    from ocibridge.transfer.progress import ProgressFn

BUNDLE_FILE = "ocibridge-bundle.json"
BUNDLE_VERSION = 1
#: Entries a bundle may hold besides blobs; blobs only under blobs/sha256/<hex>.
_LAYOUT_FILES = {"oci-layout", "index.json", BUNDLE_FILE}
_BLOB_NAME = re.compile(r"blobs/sha256/[0-9a-f]{64}\Z")
#: ``ocibridge-bundle.json`` and ``index.json`` are small; a larger one is refused.
MAX_LISTING_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class BundleEntry(FieldsAsDict):
    """One model of a bundle: as the user named it, its tag in the bundle's layout, its digest."""

    reference: str
    tag: str
    digest: str


@dataclass(frozen=True)
class BundleResult:
    """What ``save`` wrote or ``load`` copied (``destinations``: where each entry went)."""

    path: str
    entries: tuple[BundleEntry, ...]
    destinations: tuple[str, ...] = ()
    signatures: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "models": [e.as_dict() for e in self.entries],
                               "signatures": self.signatures}
        if self.destinations:
            out["destinations"] = list(self.destinations)
        return out


class _PlanLayout(LayoutStore):
    """The bundle's layout, planned: manifests and tags are written (small), blobs are not.

    The copy asks whether each blob is here; this layout says yes and notes the blob and the
    store it will be read from, so no blob is staged: :func:`_write_tar` streams each one from
    its source into the tar, verified on the way."""

    def __init__(self, root: Path):
        super().__init__(root, create=True)
        self.source: Store | None = None
        self.planned: dict[str, tuple[Descriptor, Store]] = {}

    def exists(self, desc: Descriptor) -> bool:
        if is_manifest(desc) or self.source is None:
            return super().exists(desc)
        self.planned.setdefault(desc.digest, (desc, self.source))
        return True


@closes_its_stores
def save(refs: str | Sequence[str], output: str | os.PathLike[str], *, transfer: TransferOptions | None = None,
         verify: Verification | None = None, progress: ProgressFn | None = None) -> BundleResult:
    """Write the models ``refs`` name (each with its signatures and referrers) into the bundle
    ``output``; with ``verify``, only signed ones, and each bundled by the digest verified.

    Streamed: the manifests are planned first (a copy into a layout that takes no blob), then
    the tar is written with every blob read from its source store, its size known from the
    descriptor and its digest checked as it passes; the output is written beside ``output``
    and renamed into place only when whole (a mismatch removes it)."""
    refs = one_or_many(refs)
    if not refs:
        raise UsageError("name at least one model to bundle")
    transfer = transfer or TransferOptions()
    out = Path(output)
    if out.is_dir():
        raise UsageError(f"{out} is a directory; a bundle is one file (e.g. models.tar)")
    check_output_file(out)
    entries: list[BundleEntry] = []
    signatures = 0
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent}: no such directory")
    with tempfile.TemporaryDirectory(prefix=".ocibridge-bundle-", dir=out.parent) as tmp:
        layout = _PlanLayout(Path(tmp) / "layout")
        for number, ref in enumerate(refs):
            located = locate(ref, Role.MODEL)  # the edge: once each
            source = open_checked(located, verify, transfer)
            tag = f"m{number}"
            layout.source = source.store
            stats = copy(source.store, source.reference, layout, tag, concurrency=transfer.concurrency,
                         referrers=True, progress=None, hooks=CopyHooks(companions=SignatureCompanions()))
            assert stats.root is not None
            signatures += len(stats.signatures)
            entries.append(BundleEntry(ref, tag, stats.root.digest))
        listing = {"version": BUNDLE_VERSION, "models": [e.as_dict() for e in entries]}
        (layout.root / BUNDLE_FILE).write_bytes(json.dumps(listing, indent=2, sort_keys=True).encode() + b"\n")
        staged = Path(tmp) / "bundle.tar"
        _write_tar(layout.root, layout.planned, staged, progress)
        os.replace(staged, out)
    return BundleResult(str(out), tuple(entries), signatures=signatures)


def _write_tar(root: Path, planned: dict[str, tuple[Descriptor, Store]], out: Path,
               progress: ProgressFn | None = None) -> None:
    """The layout as a tar with sorted entries and fixed metadata: same content, same bytes.
    Blobs come first (``blobs/`` sorts before ``index.json``); a planned blob is streamed from
    its source store and must be, byte for byte, what its descriptor says."""
    files: dict[str, Path | Descriptor] = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel in _LAYOUT_FILES or rel in ("blobs", "blobs/sha256") or _BLOB_NAME.match(rel):
            files[rel] = path  # not the layout's lock file or anything else of ocibridge's own
    for digest, (desc, _) in planned.items():
        files.setdefault("blobs/" + digest.replace(":", "/"), desc)
    if progress:
        for item in files.values():
            if isinstance(item, Descriptor):
                progress("plan", item, 0)
    with open(out, "wb") as sink, tarfile.open(fileobj=sink, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in sorted(files):
            item = files[rel]
            is_dir = isinstance(item, Path) and item.is_dir()
            info = tarfile.TarInfo(rel + ("/" if is_dir else ""))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if is_dir:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(item, Path):
                info.mode, info.size = 0o644, item.stat().st_size
                with open(item, "rb") as f:
                    tar.addfile(info, f)
            else:
                info.mode, info.size = 0o644, item.size
                _stream_blob(tar, info, item, planned[item.digest][1], progress)


def _stream_blob(tar: tarfile.TarFile, info: tarfile.TarInfo, desc: Descriptor, store: Store,
                 progress: ProgressFn | None) -> None:
    """One blob from ``store`` into ``tar``: exactly ``desc.size`` bytes of digest ``desc.digest``."""
    if progress:
        progress("start", desc, 0)
    try:
        with store.open_blob(desc) as raw:
            reader = _Checked(raw, desc, progress)
            tar.addfile(info, reader)  # read() is all tarfile calls
            reader.finish(store)
    except OSError as e:  # tarfile's "unexpected end of data": the source was short
        raise OcibridgeError(f"blob {desc.digest} from {store.describe()}: {e}; "
                             "the bundle is not written") from None
    except OcibridgeError as e:  # the store's own reader, or _Checked, found other bytes
        raise OcibridgeError(f"{e}; the bundle is not written") from None
    if progress:
        progress("done", desc, desc.size)


class _Checked:
    """Hashes and counts what passes, so a blob that is not what its descriptor says stops the save."""

    def __init__(self, raw: BinaryIO, desc: Descriptor, progress: ProgressFn | None):
        self.raw, self.desc, self.progress = raw, desc, progress
        self.hash = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.hash.update(data)
        self.count += len(data)
        if self.progress and data:
            self.progress("bytes", self.desc, len(data))
        return data

    def finish(self, store: Store) -> None:
        extra = self.raw.read(1)
        if extra or self.count != self.desc.size or "sha256:" + self.hash.hexdigest() != self.desc.digest:
            raise OcibridgeError(f"blob {self.desc.digest} from {store.describe()} is not what its descriptor "
                                 "says (size or digest)")


@contextlib.contextmanager
def opened(bundle: str | os.PathLike[str]) -> Iterator[tuple[LayoutStore, list[BundleEntry]]]:
    """The bundle's layout (unpacked into a temporary directory, removed afterwards) and its
    models. Untrusted: only the layout's own files, regular, at their names; blobs are
    verified when read."""
    path = Path(bundle)
    if not path.is_file():
        raise UsageError(f"{path}: no such bundle file")
    with tempfile.TemporaryDirectory(prefix=".ocibridge-bundle-") as tmp:
        root = Path(tmp) / "layout"
        (root / "blobs" / "sha256").mkdir(parents=True)
        try:
            with open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r:") as tar:
                size = os.fstat(raw.fileno()).st_size  # measured: members are written from these bytes only
                for member in tar_members(tar, what=f"{path}", archive_size=size):
                    _unpack(tar, member, root, path)
        except tarfile.TarError as e:
            raise OcibridgeError(f"{path}: not a bundle (not a tar: {e})") from None
        if not (root / BUNDLE_FILE).is_file() or not (root / "index.json").is_file():
            raise OcibridgeError(f"{path}: not an ocibridge bundle (no {BUNDLE_FILE} or index.json)")
        entries = _entries(root / BUNDLE_FILE, path)
        yield LayoutStore(root), entries


def _unpack(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path, bundle: Path) -> None:
    name = member.name.rstrip("/")
    if member.isdir() and name in ("blobs", "blobs/sha256"):
        return
    if not member.isfile() or not (name in _LAYOUT_FILES or _BLOB_NAME.match(name)):
        raise OcibridgeError(f"{bundle}: unexpected entry {name!r} (a bundle holds an OCI layout only)")
    if name in _LAYOUT_FILES and member.size > MAX_LISTING_BYTES:
        raise OcibridgeError(f"{bundle}: {name} is {member.size} bytes, more than {MAX_LISTING_BYTES}")
    source = tar.extractfile(member)
    assert source is not None
    with open(root / name, "xb") as sink:  # x: an entry twice is refused
        while chunk := source.read(1024 * 1024):
            write_sliced(sink, chunk)


def _entries(listing: Path, bundle: Path) -> list[BundleEntry]:
    try:
        doc = boundedjson.loads(listing.read_bytes())
        if doc.get("version") != BUNDLE_VERSION:
            raise ValueError(f"version {doc.get('version')!r}, this ocibridge reads {BUNDLE_VERSION}")
        entries = [BundleEntry(str(m["reference"]), str(m["tag"]), str(m["digest"])) for m in doc["models"]]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise OcibridgeError(f"{bundle}: {BUNDLE_FILE} unreadable: {e}") from None
    return entries


def list_bundle(bundle: str | os.PathLike[str]) -> BundleResult:
    """The models a bundle holds (each checked to be in its layout by the digest listed)."""
    with opened(bundle) as (layout, entries):
        for entry in entries:
            if layout.resolve(entry.tag).digest != entry.digest:
                raise OcibridgeError(f"{bundle}: {entry.reference} is listed as {entry.digest}, "
                                     f"but its tag names another manifest")
    return BundleResult(str(bundle), tuple(entries))


def destination_of(entry: BundleEntry, prefix: str) -> str:
    """Where a model goes under ``prefix``: a registry prefix keeps the model's repository path
    and tag (``reg.internal/mirror`` + ``ghcr.io/org/m:v1`` -> ``reg.internal/mirror/org/m:v1``);
    ``oci:DIR`` keeps the tag."""
    ref = locate(entry.reference, Role.JOB)  # the bundle's own text: a store, never a path
    if isinstance(ref, RegistryReference):
        repository, tag = ref.repository, ref.tag
    elif isinstance(ref, LayoutReference):
        repository, tag = Path(ref.path).name or "model", ref.tag
    else:
        repository, tag = "model", None
    tag = tag or entry.tag
    if prefix.startswith("oci:"):
        return f"{prefix.rstrip(':')}:{tag}"
    return f"{prefix.rstrip('/')}/{repository}:{tag}"


def local_destination(entry: BundleEntry) -> str:
    """Where a model goes in the local store: ``NAME:TAG``, NAME the last part of its
    repository (a local model's own NAME), so ``ls`` lists it as it is typed."""
    return named_in_layout(entry, f"oci:{default_store_path()}")


def named_in_layout(entry: BundleEntry, layout: str) -> str:
    """``layout`` (``oci:DIR``) with the model as ``NAME:TAG`` in it, as the local store names
    models (NAME the last part of its repository)."""
    from ocibridge.stores.local_names import sanitized, split_local_name, stored_name

    ref = locate(entry.reference, Role.JOB)
    if isinstance(ref, RegistryReference):
        name, tag = ref.repository.rsplit("/", 1)[-1], ref.tag
    elif isinstance(ref, LayoutReference):
        name, tag = Path(ref.path).name or "model", ref.tag
        if ref.tag and ":" in ref.tag:  # saved from a local store: NAME:TAG
            name, tag = split_local_name(ref.tag) or (name, tag)
    else:
        name, tag = "model", None
    return f"{layout.rstrip(':')}:{stored_name(*sanitized(name, tag or 'latest'))}"


def destinations_of(entries: Sequence[BundleEntry], prefix: str | None) -> list[str]:
    """Where each model goes. Into a layout (``oci:DIR``) a model keeps its tag; models
    sharing a tag are named ``NAME:TAG`` there instead, as the local store names them. Two that
    would still meet are refused, naming them and how to load them apart."""
    if prefix is None:
        named = [local_destination(e) for e in entries]
    else:
        named = [destination_of(e, prefix) for e in entries]
        if prefix.startswith("oci:"):
            shared = {n for n in named if named.count(n) > 1}
            named = [named_in_layout(e, prefix) if n in shared else n for e, n in zip(entries, named, strict=True)]
    for n in named:
        meeting = [e.reference for e, m in zip(entries, named, strict=True) if m == n]
        if len(meeting) > 1:
            where = "the local store" if prefix is None else prefix
            raise UsageError(
                f"{' and '.join(meeting)} would both be {n}: load the bundle under a registry prefix "
                f"(ocibridge load FILE HOST/PATH keeps each repository), or save them in bundles of "
                f"their own (into {where} one at a time)")
    return named


@closes_its_stores
def load(bundle: str | os.PathLike[str], prefix: str | None = None, *, transfer: TransferOptions | None = None,
         progress: ProgressFn | None = None, verify: Verification | None = None) -> BundleResult:
    """Copy every model of ``bundle`` (with its signatures and referrers) under ``prefix``;
    without one, into the local store (:func:`local_destination`). Every model is first
    checked, under the reference it was saved from, against the containers policy file that
    applies and the keys of ``verify``, with the signatures the bundle carries: one refused,
    nothing is loaded."""
    transfer = transfer or TransferOptions()
    destinations: list[str] = []
    signatures = 0
    with opened(bundle) as (layout, entries):
        named = destinations_of(entries, prefix)
        from ocibridge.scanning.policy import require_clean_scan
        from ocibridge.signing.use import check_before_use

        checked: list[Descriptor] = []
        for entry in entries:
            desc = layout.resolve(entry.tag)
            if desc.digest != entry.digest:
                raise OcibridgeError(f"{bundle}: {entry.reference} is listed as {entry.digest}, "
                                     f"but its tag names {desc.digest}")
            check_before_use(layout, desc, locate(entry.reference, Role.JOB), verify, entry.reference,
                             clean_scan=require_clean_scan)
            checked.append(desc)
        located = [locate_destination(dest) for dest in named]  # before anything is written
        for desc, dest, place in zip(checked, named, located, strict=True):
            target = open_at(place, transfer, for_write=True)
            stats = copy(layout, desc, target.store, target.tag, concurrency=transfer.concurrency,
                         referrers=True, progress=progress,
                         hooks=CopyHooks(undo_on_failure=True, companions=SignatureCompanions()))
            signatures += len(stats.signatures)
            destinations.append(f"{dest}@{desc.digest}")
    return BundleResult(str(bundle), tuple(entries), tuple(destinations), signatures)
