"""A failed conversion into a store that can take back what it added leaves it as it was."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from ocibridge.stores.base import Transactional


def undone_on_failure(store: object) -> AbstractContextManager[None]:
    """Around several writes into one store (a ModelCar export: the ModelPack form, then the
    image): a :class:`Transactional` store (an OCI layout) takes back the blobs a failure added.
    A single copy says it with ``CopyHooks(undo_on_failure=True)`` instead."""
    return store.removing_new_blobs_on_failure() if isinstance(store, Transactional) else nullcontext()
