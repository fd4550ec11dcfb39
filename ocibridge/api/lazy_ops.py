"""The Python API of lazy reads: a registry model's files, verified chunk by chunk (docs/lazy.md)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.api.options import TransferOptions, caller_stacklevel
from ocibridge.chunks.chain import ReferrerCheck, bound_table_descriptor
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, DEFAULT_THRESHOLD
from ocibridge.lazyread.model import RemoteModel, Warn, warn_stderr
from ocibridge.lazyread.stall import StallBound
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import RegistryReference
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.stores.base import close_store
from ocibridge.stores.tombstones import refuse_tombstone

if TYPE_CHECKING:  # (the lazy reader and the tensor files: open_tensors imports them, load_tensors needs neither)
    from ocibridge.api.policy import Verification
    from ocibridge.lazyread.gguf import RemoteGGUF
    from ocibridge.lazyread.rangeless import LazySource
    from ocibridge.lazyread.safetensors import RemoteSafetensors
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy


class LazyModel(RemoteModel):
    """A :class:`RemoteModel` that owns its registry connection (``with``/``close``)."""

    def close(self) -> None:
        super().close()
        close_store(self.store)

    def __enter__(self) -> LazyModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _store(parsed: RegistryReference, transfer: TransferOptions | None, stall: StallBound | None = None,
           pool_size: int | None = None, blob_homes_on_disk: bool = True) -> tuple[LazySource, str]:
    """The registry repository; with ``stall``, every piece of a blob received is told to it,
    and no request waits longer than its bound for an answer (each attempt: a fetch silent
    past a read's bound is asked again no later); ``pool_size``: at least as many connections
    (as requests in flight: load_tensors); ``blob_homes_on_disk``: as RegistryOptions'."""
    from ocibridge.stores.registry import open_repository

    options = (transfer or TransferOptions()).registry_options()
    if not blob_homes_on_disk:
        options = options.updated({"blob_homes_on_disk": False})
    if pool_size is not None and pool_size > options.pool_size:  # as many connections as requests in flight
        options = options.updated({"pool_size": pool_size})
    if stall is None or stall.seconds is None:
        return open_repository(parsed, options), parsed.reference
    options = options.updated({"read_timeout": min(options.read_timeout, stall.seconds),
                               "connect_timeout": min(options.connect_timeout, stall.seconds)})
    return open_repository(parsed, options, on_bytes=stall.received), parsed.reference


def _referrer_check(store: LazySource, keys: VerifyPolicy | None) -> ReferrerCheck | None:
    if keys is None:
        return None
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.verify import verify_artifact

    def check(desc: Descriptor) -> None:
        verify_artifact(store, desc, keys, trusts=Trusted.REFERRER)

    return check


#: open_model's keyword arguments before ``verify=`` (one release more, with a DeprecationWarning)
DEPRECATED_OPEN_KEYWORDS = ("verify_key", "policy")


def _verify_of(verify: Verification | None, deprecated: dict[str, Any]) -> Verification | None:
    """``verify``, or what open_model's former ``verify_key=``/``policy=`` asked for, each
    warned about by the keyword that replaces it; an unknown keyword is Python's TypeError."""
    unknown = sorted(set(deprecated) - set(DEPRECATED_OPEN_KEYWORDS))
    if unknown:
        raise TypeError(f"open_model() got an unexpected keyword argument {unknown[0]!r}")
    if not deprecated:
        return verify
    for name in deprecated:
        warnings.warn(f"open_model({name}=...) is deprecated: pass verify=ocibridge.verification(keys=..., "
                      "policy=...)", DeprecationWarning, stacklevel=caller_stacklevel())
    if verify is not None:
        raise TypeError("open_model(): give verify= or the deprecated verify_key=/policy=, not both")
    from ocibridge.api.policy import verification

    return verification(keys=deprecated.get("verify_key") or (), policy=deprecated.get("policy"))


def open_model(ref: str | Locator, *, transfer: TransferOptions | None = None, verify: Verification | None = None,
               warn: Warn | None = warn_stderr, cache: bool = True, keep_blobs: bool = False,
               read_timeout: float | None = None, **deprecated: Any) -> LazyModel:
    """The model ``ref`` names, its files read lazily. ``verify`` (:func:`ocibridge.verification`,
    as pull's): with keys, one of them must have signed the model (the digest its tag named
    when read, used from then on) and, for a chunk table the manifest does not bind, its
    referrer; the containers policy file (``verify``'s, else the one found) must accept that
    digest too. ``cache``: keep verified chunks in the model cache
    (``$OCIBRIDGE_CACHE/models/chunks``), so a range read again moves nothing. Close it (or
    ``with``). ``keep_blobs`` (with ``cache``): blobs read whole (the chunk table, a file no
    table covers) go into the model cache's blobs too, so no later reader, ``path`` included,
    fetches them again (``ocibridge mount``). ``read_timeout`` (seconds): a read fails
    (:class:`~ocibridge.lazyread.stall.Stalled`) once what it waits for has heard nothing from
    the registry for that long, retries included (None: it waits as long as the client's own
    timeouts and retries do, minutes). The former ``verify_key=``/``policy=`` still work, with
    a DeprecationWarning, for one release."""
    return opened_model(ref, transfer=transfer, verify=_verify_of(verify, deprecated), warn=warn, cache=cache,
                        keep_blobs=keep_blobs, read_timeout=read_timeout)


def opened_model(ref: str | Locator, *, transfer: TransferOptions | None = None, verify: Verification | None = None,
                 warn: Warn | None = warn_stderr, cache: bool = True, keep_blobs: bool = False,
                 read_timeout: float | None = None, pool_size: int | None = None,
                 through_cache: bool = False) -> LazyModel:
    """:func:`open_model` for the API's other readers (``load_tensors``): every check the same,
    with a connection pool of at least ``pool_size``. ``through_cache``: every blob is fetched
    into the model cache once and read from there (the processes of a node share the fetch).
    Neither it nor ``cache``: a read into memory that writes nothing to disk, so where its
    manifests say blobs live is kept in this process, not in the on-disk index of mount sources."""
    from ocibridge.signing.policy_place import find_policy_file

    checked = verify is not None or find_policy_file() is not None  # (else nothing to check: no policy code loads)
    parsed = locate(ref, Role.REGISTRY)
    assert isinstance(parsed, RegistryReference)
    keys, use = _use_policy(verify, parsed) if checked else (None, None)
    stall = StallBound(read_timeout)  # (refuses a bound of 0 or less before anything is opened)
    store, reference = _store(parsed, transfer, stall, pool_size, blob_homes_on_disk=cache or through_cache)
    try:
        chunk_store = None
        reader: LazySource = store
        if through_cache:
            from ocibridge.cache.landedblobs import LandedBlobs

            reader = LandedBlobs(store, checking=stall.heard)
        elif cache:
            from ocibridge.cache.chunks import CacheChunks
            from ocibridge.cache.modelcache import model_cache_root

            chunk_store = CacheChunks(model_cache_root())
            if keep_blobs:
                from ocibridge.cache.keptblobs import KeptBlobs

                reader = KeptBlobs(store, checking=stall.heard)  # (hashing a cached blob is no stall)
        model = LazyModel(reader, reference, verify_referrer=_referrer_check(store, keys), warn=warn,
                          chunk_store=chunk_store, stall=stall)
        try:  # a tag serve deleted names its tombstone: refused as that, not mounted as no files
            refuse_tombstone(store, model.descriptor, text_of(parsed))
        except BaseException:
            model.close()
            raise
        if keys is not None:  # as pull's --verify-key: the model itself must be signed, by the digest read
            from ocibridge.signing.coverage import Trusted, require_cover
            from ocibridge.signing.verify import verify_artifact

            try:  # files read whole are checked by their layer digests: a signature of the files will do
                verified = verify_artifact(store, model.descriptor, keys, trusts=Trusted.FILES)
            except BaseException:
                model.close()
                raise
            subject = model.descriptor.digest

            def covered() -> None:  # ranges checked by a table the manifest binds: a signature must cover it
                require_cover(verified, Trusted.CHUNK_TABLE, subject)

            model.trust_bound = covered
        if use is not None:
            from ocibridge.scanning.policy import require_clean_scan
            from ocibridge.signing.use import check_before_use

            try:  # the digest read is the one checked, and the one every range is read from
                check_before_use(store, model.descriptor, parsed, use, text_of(parsed), clean_scan=require_clean_scan)
            except BaseException:
                model.close()
                raise
        return model
    except BaseException:
        close_store(store)
        raise


def _use_policy(verify: Verification | None, parsed: RegistryReference) -> tuple[VerifyPolicy | None, UsePolicy]:
    """What must hold before ``parsed`` is used: the keys of ``verify`` (checked by the caller,
    trusting the files only) and the policy file here, whose refusals whatever the registry
    holds are made before anything is opened."""
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.use import as_use_policy, refuse_before_opening

    asked = as_use_policy(verify)
    use = UsePolicy(file=asked.file)
    refuse_before_opening(parsed, use, text_of(parsed))
    return asked.keys, use


def open_tensors(ref: str | Locator, file: str, **kw: Any) -> RemoteSafetensors | RemoteGGUF:
    """The safetensors or GGUF ``file`` of model ``ref`` (told apart by the GGUF magic): its
    header is read at once, a tensor's bytes only when asked (``get_bytes``, ``get_tensor``);
    every byte verified. ``kw``: as open_model."""
    from ocibridge.lazyread.formats import is_gguf
    from ocibridge.lazyread.gguf import RemoteGGUF
    from ocibridge.lazyread.safetensors import RemoteSafetensors

    model = open_model(ref, **kw)
    try:
        blob = model.open(file)
        if is_gguf(blob):
            return RemoteGGUF(blob, file)
        return RemoteSafetensors(blob, file)
    except BaseException:
        model.close()
        raise


def cat(ref: str | Locator, path: str, start: int = 0, end: int | None = None, **kw: Any) -> bytes:
    """Bytes ``[start, end)`` of one file of model ``ref``, verified."""
    with open_model(ref, **kw) as model:
        return model.read(path, start, end)


@dataclass(frozen=True)
class ChunksResult:
    """The chunk table ``attach_chunks`` computed and attached (``referrer``: the artifact that
    carries it, in ``repository``, ``host/path``)."""

    subject: str
    referrer: str
    table: str
    layers: int
    bound: bool  # whether the manifest's own annotation names this table
    repository: str = ""  # where the referrer is: sign it there (not in --json)

    def as_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "referrer": self.referrer, "table": self.table,
                "layers": self.layers, "bound": self.bound}


def attach_chunks(ref: str | Locator, *, transfer: TransferOptions | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  threshold: int = DEFAULT_THRESHOLD) -> ChunksResult:
    """Compute the chunk tables of an existing model's large raw layers (reading each blob once,
    verified) and attach them as a referrer. The manifest does not bind such a table: readers
    use it only when the referrer is signed by a key they trust (``ocibridge sign`` it)."""
    from ocibridge.chunks.attach import attach_table, table_from_store

    parsed = locate(ref, Role.REGISTRY)  # once: read, then named in the result
    assert isinstance(parsed, RegistryReference)
    with open_model(parsed, transfer=transfer, warn=None) as model:
        table = table_from_store(model.store, model.manifest, chunk_size=chunk_size, threshold=threshold)
        referrer = attach_table(model.store, model.descriptor, table)  # type: ignore[arg-type]  # a registry store writes
        bound = bound_table_descriptor(model.manifest)
        return ChunksResult(model.descriptor.digest, referrer.digest, table.descriptor().digest,
                            len(table.layers), bound is not None and bound.digest == table.descriptor().digest,
                            f"{parsed.registry}/{parsed.repository}")
