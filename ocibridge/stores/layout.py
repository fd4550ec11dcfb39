"""The OCI image layout store: the embedded default, readable by skopeo, oras and crane.

``oci-layout``, ``index.json`` (tags as ``org.opencontainers.image.ref.name``) and
``blobs/<alg>/<hex>``. Blobs are written under a temporary name, verified, then renamed;
``index.json`` is replaced atomically under a lock so concurrent writers do not lose tags.
A push that fails part-way removes the blobs it added that nothing tagged uses and no other
live writer claimed (:meth:`LayoutStore.removing_new_blobs_on_failure`, :mod:`.leases`), and the
layout directory itself when the push created it and nothing ended up in it. Each manifest is
listed in ``index.json`` once: a tagged entry replaces the untagged one, as oras-go does, so
``skopeo copy oci:DIR`` (no tag) works on a layout holding one artifact.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.fsutil import atomic_write_bytes, atomic_writer, shared_file_mode, write_sliced
from ocibridge.core.stale import locked_tempfile, remove_stale
from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError, TooLarge
from ocibridge.oci.digest import (
    CHUNK,
    Hasher,
    HashingReader,
    VerifyingReader,
    is_digest,
    split_digest,
    verified,
    verify_bytes,
)
from ocibridge.oci.models import Descriptor, Index, parse_manifest_bytes
from ocibridge.oci.reference import check_ref_name
from ocibridge.stores import indexfile, layoutentries, layoutgraph
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Reopen
from ocibridge.stores.inorder_hash import Frontier
from ocibridge.stores.leases import LEASE_DIR, Leases
from ocibridge.stores.partial import PARTIAL_PREFIX, download
from ocibridge.stores.ranged import ByteCount, RangedBlobSource

LAYOUT_FILE = "oci-layout"
LAYOUT_VERSION = {"imageLayoutVersion": "1.0.0"}
LOCK_FILE = ".ocibridge.lock"


class LayoutStore(ClosesOnExit):
    """An OCI image layout directory. ``create=True`` makes it on first use."""

    def __init__(self, path: str | os.PathLike[str], create: bool = False):
        self.root = Path(path)
        self._created: set[str] | None = None  # blobs added inside removing_new_blobs_on_failure
        self._listed: set[str] = set()  # manifests it listed untagged in index.json meanwhile
        self._fresh = False  # whether this object wrote the layout's skeleton
        self._made: Path | None = None  # the topmost directory this object created, if any
        self._writing = create  # opened to write: blobs found present are touched (see exists)
        self._swept = False  # orphaned temporary files of dead runs removed (once)
        self._leases = Leases(self.root, self.root / LOCK_FILE)  # blobs this writer relies on
        if (self.root / LAYOUT_FILE).is_file():
            return
        if not create:
            why = f"no {LAYOUT_FILE}" if self.root.is_dir() else "no such directory"
            raise NotFound(f"{self.root} is not an OCI image layout ({why})")
        if self.root.exists() and not self.root.is_dir():
            raise OcibridgeError(f"{self.root} exists and is not a directory")
        self._fresh, self._made = True, _topmost_missing(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        if not (self.root / indexfile.INDEX_FILE).exists():
            indexfile.write(self.root, Index())
        atomic_write_bytes(self.root / LAYOUT_FILE, json.dumps(LAYOUT_VERSION).encode())

    def describe(self) -> str:
        return f"oci:{self.root}"

    def close(self) -> None:
        """End this writer's lease (see :mod:`.leases`): its artifacts are listed by now."""
        self._leases.release()

    # -- blobs -------------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        algorithm, hexpart = split_digest(digest)
        return self.root / "blobs" / algorithm / hexpart

    def exists(self, desc: Descriptor) -> bool:
        """Whether the blob is here. A writer that finds it here will reference it: it claims
        it in its lease (so another writer's undo keeps it, see :mod:`.leases`) and refreshes
        its mtime (so a concurrent ``prune``, which spares recent blobs, keeps it too)."""
        if not self._writing:
            return self._present(desc)
        return self._claimed_present(desc)

    def _present(self, desc: Descriptor) -> bool:
        try:
            return self.blob_path(desc.digest).stat().st_size == desc.size
        except FileNotFoundError:
            return False

    def _claimed_present(self, desc: Descriptor) -> bool:
        """Claim ``desc`` for this writer, then say whether it is here: one step under the
        lock, so a failing writer's undo either sees the claim or happened before the look."""
        with self._locked():
            self._leases.claim(desc.digest)
            present = self._present(desc)
        if present:
            with contextlib.suppress(OSError):
                os.utime(self.blob_path(desc.digest))
        return present

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        """The blob as a verifying reader. A file whose size is not the descriptor's is refused
        before a byte is read: nothing downstream may size a limit on a claim the file belies."""
        try:
            raw = open(self.blob_path(desc.digest), "rb")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            raise NotFound(f"{self.describe()}: blob {desc.digest} not found") from None
        actual = os.fstat(raw.fileno()).st_size
        if actual != desc.size:
            raw.close()
            raise DigestMismatch(f"{self.describe()}: blob {desc.digest} holds {actual} bytes, its descriptor "
                                 f"says {desc.size}")
        return VerifyingReader(raw, desc.digest, desc.size)  # type: ignore[return-value]  # a verifying read()-stream where the Store protocol still names BinaryIO

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.size > MAX_MANIFEST_BYTES:
            raise TooLarge(f"{desc.digest}: {desc.size} bytes is too large to read whole")
        try:
            with open(self.blob_path(desc.digest), "rb") as f:
                data = f.read(desc.size + 1)  # one byte more tells a longer file, and no more is read
        except FileNotFoundError:
            raise NotFound(f"{self.describe()}: {desc.digest} not found") from None
        if len(data) > desc.size:
            raise DigestMismatch(f"{self.describe()}: {desc.digest} is larger than the {desc.size} bytes "
                                 "its descriptor gives")
        return verify_bytes(data, desc.digest, desc.size)

    def _sweep_once(self) -> None:
        """Before the first write: remove what killed runs left (see :mod:`..stale`)."""
        if not self._swept:
            self._swept = True
            remove_stale(self.root / "blobs" / "sha256", PARTIAL_PREFIX)

    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        """``reopen`` is not needed: a local write that fails fails the copy."""
        if self._claimed_present(desc):
            return
        self._sweep_once()
        final = self.blob_path(desc.digest)
        with atomic_writer(final) as out:
            checked = verified(reader, desc.digest, desc.size)
            while chunk := checked.read(CHUNK):
                write_sliced(out, chunk)
            checked.verify()
        self._note_created(desc.digest)

    def download_blob(self, desc: Descriptor, source: RangedBlobSource,
                      on_bytes: ByteCount | None = None, on_hashed: Frontier | None = None,
                      hasher_for: Callable[[], Hasher] | None = None) -> None:
        """Fetch a blob that can be resumed: kept partial when interrupted, continued with
        Range by the next run, in parts at once when large (see :mod:`.partial`); ``on_hashed``
        follows the verified-as-it-comes prefix (a server sends it on at once); ``hasher_for``
        checks it otherwise than by its digest (a chunk table's check)."""
        if self._claimed_present(desc):
            return
        self._sweep_once()
        download(self.blob_path(desc.digest), desc, source, on_bytes=on_bytes, on_hashed=on_hashed,
                 hasher_for=hasher_for)
        self._note_created(desc.digest)

    def ingest_sends_unasked(self) -> bool:
        return False  # a local write: no network, nothing to ask first

    def ingest_blob(self, reader: BinaryIO, *, reopen: Reopen | None = None,
                    source_path: Path | None = None) -> tuple[str, int]:
        """Store a blob whose digest is not known yet, hashing while writing (one pass); a
        local write is not resumed (``source_path`` is not used)."""
        hashing = HashingReader(reader)
        digest = self._place_stream(iter(functools.partial(hashing.read, CHUNK), b""), lambda: hashing.digest)
        return digest, hashing.size

    def ingest_vouched(self, desc: Descriptor, reader: BinaryIO) -> None:
        """A blob whose stream checks ``desc``'s digest at its end: written without hashing
        (the stream raises before the rename when its content is not ``desc``'s)."""
        written = 0

        def pieces() -> Iterator[bytes]:
            nonlocal written
            while chunk := reader.read(CHUNK):  # (the last, empty read is where it checks)
                written += len(chunk)
                if written > desc.size:
                    raise DigestMismatch(f"{desc.digest}: more than the expected {desc.size} bytes")
                yield chunk

        def checked() -> str:
            if written != desc.size:
                raise DigestMismatch(f"{desc.digest}: got {written} bytes, expected {desc.size}")
            return desc.digest

        self._place_stream(pieces(), checked)

    def _place_stream(self, pieces: Iterable[bytes], digest_of: Callable[[], str]) -> str:
        """Write ``pieces`` to a temporary file beside the blobs, then put it in place under
        ``digest_of()`` (asked once they are all written: it may raise), claimed in one step
        (see _claimed_present); nothing is left when anything raises. The digest."""
        tmp_dir = self.root / "blobs" / "sha256"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = locked_tempfile(tmp_dir)
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in pieces:
                    write_sliced(out, chunk)
            digest = digest_of()
            os.chmod(tmp, shared_file_mode())
            final = self.blob_path(digest)
            with self._locked():
                self._leases.claim(digest)
                existed = final.exists()
                os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if not existed:
            self._note_created(digest)
        return digest

    def _note_created(self, digest: str) -> None:
        if self._created is not None:
            self._created.add(digest)

    @contextlib.contextmanager
    def removing_new_blobs_on_failure(self) -> Iterator[None]:
        """If the block fails, delete the blobs it added that no artifact listed in
        ``index.json`` uses, so a failed push leaves the layout's blob set as it found it; a
        layout this object created is removed again (with the parents it made) if it is still
        empty, so a failed push into a new layout leaves no directory behind.

        Blobs present before the block are never touched, nor those another live writer
        claimed (found present, or is writing: :mod:`.leases`). The check and the deletion
        hold the index lock, so an artifact tagged meanwhile keeps its blobs, and a writer
        that looks for a blob after the deletion finds it missing and writes it again.
        """
        if self._created is not None:
            raise OcibridgeError("removing_new_blobs_on_failure does not nest")
        self._created = created = set[str]()
        self._listed = set()
        try:
            yield
        except KeyboardInterrupt:
            raise  # interrupted, not failed: verified blobs stay, so the rerun skips them
        except BaseException:
            self._unlist(self._listed)  # (a ModelCar export lists its untagged ModelPack form first)
            self._remove_unreferenced(created)
            self._leases.release()
            self._remove_if_made_and_empty()
            raise
        finally:
            self._created = None
            self._listed = set()
            self._leases.release()  # done: what this writer relied on is listed, or given up

    def _remove_if_made_and_empty(self) -> None:
        """Undo the creation of a layout nobody has put anything in (no manifest listed, no
        blob): its files, then the directories up to the topmost one this object made."""
        if not self._fresh:
            return
        with self._locked():
            if self.read_index().manifests or self._leases.others_alive() or any(
                    f.is_file() for f in (self.root / "blobs").rglob("*")):
                return
            with contextlib.suppress(OSError):
                (self.root / LEASE_DIR).rmdir()
            for name in (indexfile.INDEX_FILE, LAYOUT_FILE, LOCK_FILE):
                with contextlib.suppress(FileNotFoundError):
                    (self.root / name).unlink()
        blobs = self.root / "blobs"
        for sub in [*sorted(blobs.rglob("*"), reverse=True), blobs]:
            with contextlib.suppress(OSError):
                sub.rmdir()
        self._fresh = False
        here = self.root.absolute()
        while self._made is not None and here.is_relative_to(self._made):
            try:
                here.rmdir()
            except OSError:
                return  # not empty (someone else's files) or already gone
            here = here.parent

    def _unlist(self, digests: set[str]) -> None:
        """Drop the untagged index entries of ``digests`` (a tag given to one meanwhile keeps it)."""
        if not digests:
            return
        with self._locked():
            index = self.read_index()
            kept = [e for e in index.manifests if e.digest not in digests or indexfile.ref_name(e)]
            if len(kept) != len(index.manifests):
                index.manifests = kept
                indexfile.write(self.root, index)

    def _remove_unreferenced(self, digests: set[str]) -> None:
        if not digests:
            return
        with self._locked():
            used = self._referenced()
            if used is None:
                return  # an artifact whose blobs cannot be listed: keep everything
            used |= self._leases.held_by_others()
            for digest in digests - used:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.blob_path(digest))

    def _referenced(self) -> set[str] | None:
        """Every digest reachable from ``index.json``, or None (:func:`.layoutgraph.reachable`)."""
        return layoutgraph.reachable(self.read_index().manifests, self.fetch_bytes)

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Store a manifest only if this layout's own reader will read it back: right digest, at
        most MAX_MANIFEST_BYTES, and a manifest or index of the media type it is listed under."""
        verify_bytes(data, desc.digest, desc.size, what="manifest")
        if desc.size > MAX_MANIFEST_BYTES:
            raise OcibridgeError(f"manifest {desc.digest}: {desc.size} bytes is more than a reader takes "
                                 f"({MAX_MANIFEST_BYTES})")
        parse_manifest_bytes(data, desc.mediaType)  # raises on anything the reader would refuse
        if not self._claimed_present(desc):
            atomic_write_bytes(self.blob_path(desc.digest), data)
            self._note_created(desc.digest)
        if tag is not None:
            self.tag(desc, tag)
        else:
            self._update_index(desc, None)

    # -- index -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._leases.locked():
            yield

    def read_index(self) -> Index:
        """``index.json``, read up to its cap (``$OCIBRIDGE_MAX_INDEX_BYTES``, :mod:`.indexfile`)."""
        return indexfile.read(self.root)

    def _update_index(self, desc: Descriptor, tag: str | None) -> None:
        """Add ``desc`` to index.json; with a tag, the tag moves to it (old entry replaced), one
        entry per manifest (:mod:`.layoutentries`)."""
        with self._locked():
            index = self.read_index()
            entries = layoutentries.listing(index.manifests, desc, tag)
            if entries is None:
                return  # already listed
            if tag is None and self._created is not None:
                self._listed.add(desc.digest)
            index.manifests = entries
            indexfile.write(self.root, index)

    def tag(self, desc: Descriptor, tag: str) -> None:
        """Name ``desc`` ``tag``: a layout's names follow the OCI ref.name grammar, so they may
        hold ':' and '/' (the local store's ``NAME:TAG``), unlike a registry's tags."""
        check_ref_name(tag)
        if not self.exists(desc):
            raise NotFound(f"{self.describe()}: cannot tag {desc.digest}: manifest not found")
        self._update_index(desc, tag)

    def tags(self) -> list[str]:
        return indexfile.names(self.read_index().manifests)

    def resolve(self, reference: str) -> Descriptor:
        index = self.read_index()
        if is_digest(reference):
            for entry in index.manifests:
                if entry.digest == reference:
                    return layoutentries.strip_ref_name(entry)
            path = self.blob_path(reference)
            if not path.is_file():
                raise NotFound(f"{self.describe()}@{reference}: not found")
            data = path.read_bytes() if path.stat().st_size <= MAX_MANIFEST_BYTES else b""
            parsed = parse_manifest_bytes(verify_bytes(data, reference, what="manifest"))
            media_type = parsed.mediaType or ("application/vnd.oci.image.manifest.v1+json")
            return Descriptor(mediaType=media_type, digest=reference, size=len(data))
        for entry in index.manifests:
            if indexfile.ref_name(entry) == reference:
                return layoutentries.strip_ref_name(entry)
        known = ", ".join(self.tags()) or "none"
        raise NotFound(f"{self.describe()}:{reference}: tag not found (tags: {known})")

    def delete_manifest(self, desc: Descriptor) -> None:
        """Drop every ``index.json`` entry of this manifest (all its tags); its blobs stay
        until :meth:`unreferenced_blobs` is pruned."""
        with self._locked():
            index = self.read_index()
            kept = [e for e in index.manifests if e.digest != desc.digest]
            if len(kept) == len(index.manifests):
                raise NotFound(f"{self.describe()}@{desc.digest}: not listed in index.json")
            index.manifests = kept
            indexfile.write(self.root, index)

    def untag(self, tag: str) -> Descriptor:
        """Remove ``tag``; the manifest stays listed only if another tag still names it."""
        with self._locked():
            index = self.read_index()
            named = [e for e in index.manifests if indexfile.ref_name(e) == tag]
            if not named:
                raise NotFound(f"{self.describe()}:{tag}: tag not found (tags: {', '.join(self.tags()) or 'none'})")
            index.manifests = [e for e in index.manifests if e not in named]
            indexfile.write(self.root, index)
        return layoutentries.strip_ref_name(named[0])

    def rename(self, renames: dict[str, str]) -> list[str]:
        """Give entries other names in one write of ``index.json`` (same digest, other
        annotations kept): each ``old -> new`` whose ``old`` is still listed and whose ``new``
        names nothing yet, so a name another writer took meanwhile is never overwritten.
        Returns the old names renamed (:func:`.indexfile.rename`)."""
        with self._locked():
            index = self.read_index()
            done = indexfile.rename(index.manifests, renames)
            if done:
                indexfile.write(self.root, index)
        return done

    def unreferenced_blobs(self) -> list[Path]:
        """Blob files nothing reachable from ``index.json`` uses (temporary files excluded).
        Call under :meth:`locked` so no tag lands between the walk and the removal."""
        used = self._referenced()
        if used is None:
            raise OcibridgeError(f"{self.describe()}: a listed manifest cannot be read; not pruning")
        return layoutgraph.blobs_outside(self.root / "blobs", used)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """The index lock, for a caller that reads and changes the layout as one step."""
        return self._locked()

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return layoutgraph.referrers_in(self.read_index().manifests, self.fetch_bytes, desc, artifact_type)


def _topmost_missing(path: Path) -> Path | None:
    """The highest ancestor of ``path`` (or ``path`` itself) that does not exist yet."""
    missing = None
    for candidate in [path.absolute(), *path.absolute().parents]:
        if candidate.exists():
            break
        missing = candidate
    return missing
