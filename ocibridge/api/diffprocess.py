"""serve's compare diffs, made in a child process.

Parsing two safetensors headers of 200,000 tensors holds the interpreter lock for seconds (the
event loop's ``/healthz`` waited 2.7 s) and leaves hundreds of MiB of fragmented memory in the
process that parsed them. In a child (spawned, one diff each, at most :data:`AT_ONCE` at a time),
serve keeps answering and the memory goes back with the child; only the diff comes back.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.lazyread.diff import ModelDiff

#: diffs made at the same time (each child holds two parsed headers)
AT_ONCE = 2

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


def diff_in_child(old: str, new: str, transfer: TransferOptions, max_read: int) -> ModelDiff:
    """``ocibridge diff old new`` with ``max_read``, made in a child process (see the module)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = _new_pool()
        pool = _pool
    try:
        return pool.submit(_diff, old, new, transfer, max_read).result()
    except BrokenProcessPool:
        with _lock:
            if _pool is pool:
                _pool = None  # the next diff starts a new pool
        raise OcibridgeError("the process making the diff ended before it was made") from None


def _new_pool() -> ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")  # serve has threads: no fork
    if sys.version_info >= (3, 11):
        return ProcessPoolExecutor(AT_ONCE, mp_context=context, max_tasks_per_child=1)
    return ProcessPoolExecutor(AT_ONCE, mp_context=context)  # 3.10: children kept (their memory too)


def _diff(old: str, new: str, transfer: TransferOptions, max_read: int) -> ModelDiff:
    from ocibridge.api.browse import diff

    return diff(old, new, transfer=transfer, warn=_quiet, max_read=max_read)


def _quiet(message: str) -> None:
    """A whole read within the budget: nothing to warn of on serve's stderr (the page says what it read)."""
