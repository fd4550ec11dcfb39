"""The Python API of whole-model loads: every tensor of a registry model's safetensors files,
from the registry straight into memory, verified chunk by chunk, nothing written to disk
(docs/lazy.md, "Loading a whole model")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocibridge.api.lazy_ops import LazyModel, opened_model
from ocibridge.api.missing import explaining_missing
from ocibridge.api.options import TransferOptions
from ocibridge.chunks.chunktable import DEFAULT_THRESHOLD
from ocibridge.core.capacity import cpu_workers
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.framework_choice import framework_named
from ocibridge.lazyread.model import Warn, warn_stderr
from ocibridge.lazyread.tensorfiles import choose
from ocibridge.lazyread.tensorload import CONCURRENCY, LONG_SPAN, SPAN, LoadFile, TensorStream
from ocibridge.oci.digest import verify_bytes
from ocibridge.places.locate import Locator

if TYPE_CHECKING:
    from ocibridge.api.policy import Verification

#: iter_tensors' default bound on the tensors allocated and not yet handed over
WORKING_SET = 256 * 1024 * 1024
#: the largest shard index read (DeepSeek-V3's is 9 MB)
MAX_INDEX = 64 * 1024 * 1024
#: the fewest requests in flight by default: one is received while another's chunks are checked
MIN_REQUESTS = 2


def default_requests() -> int:
    """Requests in flight when the caller names none: CONCURRENCY, or one per CPU this process may
    use where it has fewer (each request's thread receives and checks its own chunks: on two CPUs,
    four of them only took turns, with more system time)."""
    return max(MIN_REQUESTS, cpu_workers(CONCURRENCY))


def iter_tensors(ref: str | Locator, *, files: str | tuple[str, ...] | list[str] | None = None,
                 framework: str = "numpy", device: str | None = None, concurrency: int | None = None,
                 max_bytes: int | None = WORKING_SET, transfer: TransferOptions | None = None,
                 verify: Verification | None = None, warn: Warn | None = warn_stderr,
                 through_cache: bool = False) -> TensorStream:
    """``(name, tensor)`` for every tensor of model ``ref``'s safetensors files, each as soon as
    all its bytes have arrived and matched the chunk table (close it, or ``with``, to stop
    early). At most ``max_bytes`` of tensors are held that were not yet handed over (None: no
    bound), passed only by one tensor when a single one is larger, or by a file that has no
    chunk table (checked whole: its tensors all come once its last byte matched its digest).
    Otherwise as :func:`load_tensors` (but in ranges of ``transfer.part_size``, default 32 MiB)."""
    return _stream(ref, files=files, framework=framework, device=device, concurrency=concurrency, max_bytes=max_bytes,
                   transfer=transfer, verify=verify, warn=warn, through_cache=through_cache, long_ranges=False)


@explaining_missing  # a name the registry lacks: its nearest names, as pull says them
def _stream(ref: str | Locator, *, files: str | tuple[str, ...] | list[str] | None, framework: str,
            device: str | None, concurrency: int | None, max_bytes: int | None, transfer: TransferOptions | None,
            verify: Verification | None, warn: Warn | None, through_cache: bool, long_ranges: bool) -> TensorStream:
    """The stream of :func:`iter_tensors`; ``long_ranges``: ranges up to LONG_SPAN where the caller
    named no part size (tensors are then handed over later: for a caller who takes them all at once)."""
    chosen = (files,) if isinstance(files, str) else tuple(files) if files is not None else None
    engine = framework_named(framework, device)  # (a missing framework: said before any request)
    requests = concurrency or (transfer.parts_in_flight if transfer is not None else None) or default_requests()
    model = opened_model(ref, transfer=transfer, verify=verify, warn=warn, cache=False, pool_size=requests,
                         through_cache=through_cache)
    try:
        loads = _files(model, chosen, warn)
        part_size = transfer.part_size if transfer is not None else None
        longest = LONG_SPAN if long_ranges and part_size is None else None
        return TensorStream(model.store, loads, engine, concurrency=requests, span=part_size or SPAN,
                            working_set=max_bytes, longest_span=longest, where=model.store.describe(),
                            on_close=model.close)
    except BaseException:
        model.close()
        raise


def load_tensors(ref: str | Locator, *, files: str | tuple[str, ...] | list[str] | None = None,
                 framework: str = "numpy", device: str | None = None, concurrency: int | None = None,
                 transfer: TransferOptions | None = None, verify: Verification | None = None,
                 warn: Warn | None = warn_stderr, through_cache: bool = False) -> dict[str, Any]:
    """Every tensor of model ``ref``'s safetensors files, by name (in file order), as numpy
    arrays (``framework="torch"``: torch tensors, on ``device`` if given), read from the
    registry straight into their memory and never written to disk. ``files``: globs choosing
    the files (default: those a shard index names, else every ``*.safetensors``).
    ``concurrency`` Range requests in flight (default ``transfer.parts_in_flight``, else 4, or one
    per CPU this process may use where it has fewer, 2 at least),
    of ``transfer.part_size`` bytes (default: 32 MiB, or longer, up to 128 MiB, for a large file
    with a chunk table, while each request in flight still gets four of its ranges; once nothing is
    left to ask, an idle request takes the unstarted half of a range still in flight). Every chunk
    is checked against the chunk table as it lands (a file without one: against its digest, once all of it is in);
    a wrong one raises :class:`~ocibridge.lazyread.tensorload.TensorMismatch` naming the file
    and its tensors, and nothing is returned. ``verify`` and the containers policy file are
    obeyed as by :func:`open_model`: a model they refuse is refused before any of its files
    is read. Memory: the tensors' bytes, plus what is in flight; on a ``device``, the tensors
    there and a ring of host memory per request in flight (16 MiB, pinned for CUDA), where each
    chunk is checked before it is copied to the device (docs/lazy.md, "On a device").
    ``through_cache``: each blob is fetched once into the model cache (``path``'s, locked: the
    processes of one node loading one model, such as tensor-parallel ranks, fetch it once between
    them) and its bytes read from there, checked as the registry's are."""
    with _stream(ref, files=files, framework=framework, device=device, concurrency=concurrency, max_bytes=None,
                 transfer=transfer, verify=verify, warn=warn, through_cache=through_cache, long_ranges=True) as stream:
        got = dict(stream)
        order = stream.order
    return {name: got[name] for name in order}


def _files(model: LazyModel, patterns: tuple[str, ...] | None, warn: Warn | None) -> list[LoadFile]:
    """The files to load, each with its entry of the trusted chunk table."""
    def read_index(path: str) -> bytes:
        layer = model.file(path).layer
        if layer.size > MAX_INDEX:
            raise OcibridgeError(f"{path}: a shard index of {layer.size} bytes is over {MAX_INDEX}")
        with model.store.open_blob(layer) as reader:
            data = reader.read()
        return verify_bytes(data, layer.digest, layer.size, what=path)

    chosen = choose(model.files, patterns, read_index)
    chain = model.chain
    loads = []
    for item in chosen:
        layer = model.file(item.path).layer
        chunks = chain.table.for_layer(layer) if chain.table is not None else None
        if chunks is None and layer.size >= DEFAULT_THRESHOLD and warn is not None:
            why = chain.how if chain.table is None else f"the chunk table has no entry for {layer.digest}"
            warn(f"{item.path}: {why}; its tensors are checked by the file's digest, once all of it has arrived")
        loads.append(LoadFile(item.path, layer, chunks, chain.table.chunk_size if chain.table is not None else 0,
                              item.expected))
    return loads
