"""A model on a registry as files by path, each read lazily and verified (see ``chain``)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ocibridge.chunks.chain import BoundCheck, Chain, ReferrerCheck, find_chain
from ocibridge.chunks.chunktable import DEFAULT_THRESHOLD, PUSH_THRESHOLD
from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.lazyread.chunkstore import ChunkStore
from ocibridge.lazyread.stall import StallBound
from ocibridge.model.paths import ArtifactPaths, RawFile, judge_tar_layers
from ocibridge.oci.cnaidraft import is_draft_layer
from ocibridge.oci.layerinfo import layer_path
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import resolve_and_read

if TYPE_CHECKING:  # (imported by open(): load_tensors reads no file through it, and loads none of its cache code)
    from ocibridge.lazyread.blobreader import VerifiedBlob
    from ocibridge.lazyread.rangeless import LazySource

Warn = Callable[[str], None]


def warn_stderr(message: str) -> None:
    print(f"ocibridge: {message}", file=sys.stderr)


class RemoteModel:
    """The files of one resolved model manifest; ``open(path)`` reads one lazily."""

    def __init__(self, store: LazySource, reference: str, *, verify_referrer: ReferrerCheck | None = None,
                 warn: Warn | None = warn_stderr, chunk_store: ChunkStore | None = None,
                 stall: StallBound | None = None):
        self.store = store
        #: how long a read waits on a fetch that hears nothing (None: as long as the client does)
        self.stall = stall or StallBound()
        self.chunk_store = chunk_store
        self.reference = reference
        self._warn = warn
        self.descriptor, data = resolve_and_read(store, reference)
        parsed = parse_manifest_bytes(data, self.descriptor.mediaType)
        if not isinstance(parsed, Manifest):
            raise OcibridgeError(f"{store.describe()}:{reference} is an index: name one model manifest "
                                 "(by its digest) to read its files")
        self.manifest = parsed
        #: the artifact's paths judged as pull judges them (model.paths): what pull refuses is
        #: refused here, before a byte is read
        self.paths = ArtifactPaths(parsed)
        self.files = self.paths.files
        self.packed: dict[str, Descriptor] = {}  # what tar layers are named (no byte ranges there)
        for layer in [*self.paths.tars, *self.paths.changesets]:
            path = layer_path(layer)
            if path:
                self.packed[path.strip("/")] = layer
        self._packed_judged = not self.paths.tars
        self._chain: Chain | None = None
        self._finding: tuple[Future[Chain], float] | None = None  # the chain on its way, and since when
        self._verify_referrer = verify_referrer
        #: set by a caller that verified signatures: may the table the manifest binds be used?
        self.trust_bound: BoundCheck | None = None
        self._lock = threading.Lock()
        self._judging = threading.Lock()
        self._open: dict[str, VerifiedBlob] = {}

    @property
    def chain(self) -> Chain:
        """The chunk table trusted for this manifest, found on first use (with a stall bound:
        on a thread of its own, waited for within it; a failure leaves the next use to look again)."""
        if self.stall.seconds is None:
            with self._lock:
                if self._chain is None:
                    self._chain = self._find_chain()
                return self._chain
        with self._lock:
            if self._chain is not None:
                return self._chain
            if self._finding is None:
                future: Future[Chain] = Future()
                self._finding = (future, time.monotonic())
                threading.Thread(target=self._look_for_chain, args=(future,), name="chunk-table", daemon=True).start()
            future, asked = self._finding
        return self.stall.wait(future, lambda: asked, self.store.describe())

    def _find_chain(self) -> Chain:
        return find_chain(self.store, self.descriptor, self.manifest, verify_referrer=self._verify_referrer,
                          trust_bound=self.trust_bound)

    def _look_for_chain(self, future: Future[Chain]) -> None:
        try:
            found = self._find_chain()
        except BaseException as e:  # noqa: BLE001  # handed to the readers waiting
            with self._lock:
                self._finding = None
            future.set_exception(e)
            return
        with self._lock:
            self._chain = found
        future.set_result(found)

    def file(self, path: str) -> RawFile:
        key = path.strip("/")
        if key in self.files:
            return self.files[key]
        if key in self.packed and is_draft_layer(self.packed[key]):
            raise OcibridgeError(f"{key} is in a layer of the early CNAI draft (a filesystem changeset, "
                                 f"{self.packed[key].mediaType}): lazy reads need raw layers "
                                 "(ocibridge convert --to modelpack writes one per file)")
        if key in self.packed:
            raise OcibridgeError(f"{key} is packed in a tar layer ({self.packed[key].mediaType}): lazy reads "
                                 "need raw layers (push with --layer KIND=raw)")
        raise NotFound(f"{self.store.describe()}:{self.reference}: no file {key!r} in the model")

    def judge_packed(self) -> None:
        """Judge the tar layers' entries too (``paths``), once: their blobs are read whole
        (verified; kept where the store keeps blobs), as pull would unpack them. No file of an
        artifact pull refuses is read, a raw file that a tar layer holds again included."""
        with self._judging:
            if not self._packed_judged:  # (a judge of its own: a scan cut short leaves no path behind)
                judge_tar_layers(self.store, ArtifactPaths(self.manifest))  # (refused: again at the next open)
                self._packed_judged = True

    def packed_judged(self) -> None:
        """Say that the tar layers were judged already (unpacked by pull's own code: a mount)."""
        with self._judging:
            self._packed_judged = True

    def open(self, path: str) -> VerifiedBlob:
        """The verified reader of one file (shared: a second open reuses its cached chunks)."""
        from ocibridge.lazyread.blobreader import VerifiedBlob

        entry = self.file(path)
        self.judge_packed()
        with self._lock:
            known = self._open.get(entry.path)
        if known is not None:
            return known
        chain = self.chain
        chunks = chain.table.for_layer(entry.layer) if chain.table is not None else None
        chunk_size = chain.table.chunk_size if chain.table is not None else 0
        blob = VerifiedBlob(self.store, entry.layer, chunks, chunk_size, on_fallback=self.fallback_notice(entry),
                            store=self.chunk_store, stall=self.stall)
        with self._lock:
            return self._open.setdefault(entry.path, blob)

    def fallback_notice(self, entry: RawFile) -> Callable[[], None] | None:
        """What a reader of ``entry`` calls before it reads the whole blob (the ``warn`` given),
        where a table would have helped and was expected: no table at all from 16 MiB; a table
        without this layer only from a push's 64 MiB (below it a push leaves files out). None:
        nothing to say."""
        chain = self.chain
        if chain.table is not None and chain.table.for_layer(entry.layer) is not None:
            return None
        if entry.layer.size < (DEFAULT_THRESHOLD if chain.table is None else PUSH_THRESHOLD):
            return None
        why = chain.how if chain.table is None else f"the chunk table has no entry for {entry.layer.digest}"
        return self._fallback_notice(entry, why)

    def _fallback_notice(self, entry: RawFile, why: str) -> Callable[[], None]:
        def notice() -> None:
            if self._warn is not None:
                self._warn(f"{entry.path}: {why}; reading the whole blob ({entry.layer.size} bytes), "
                           "verified by its digest, instead of byte ranges")
        return notice

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        return self.open(path).read(start, end)

    @property
    def bytes_fetched(self) -> int:
        with self._lock:
            return sum(b.bytes_fetched for b in self._open.values())

    def close(self) -> None:
        with self._lock:
            for blob in self._open.values():
                blob.close()
            self._open.clear()

