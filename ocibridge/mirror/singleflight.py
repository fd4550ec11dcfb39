"""One upload per blob when several artifacts are copied into the same target at once.

Artifacts of one repository share blobs (a base model, a tokenizer). Copied concurrently,
two copies would both see a shared blob missing and both send it. This target wrapper makes
the first ``exists`` that answers "missing" claim the blob; other copies asking about it wait
until the claimant has pushed or mounted it (then see it present) or given up (then claim it
themselves). The graph copy itself is unchanged: it only sees a store.
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO

from ..oci.models import Descriptor
from ..stores.base import Store, is_manifest

WAIT_SLICE = 0.2  # seconds between checks that a claimant is still working on its blob


class SingleFlightTarget:
    """Wraps a target store; everything but blob existence checks and pushes passes through."""

    def __init__(self, inner: Store):
        self.inner = inner
        self._cond = threading.Condition()
        self._claims: dict[str, threading.Thread] = {}  # digest → thread sending it
        self._held: dict[threading.Thread, str] = {}  # thread → digest it claimed
        self._done: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def describe(self) -> str:
        return self.inner.describe()

    # -- claims ---------------------------------------------------------------------------------
    def _release(self, digest: str, done: bool) -> None:
        with self._cond:
            owner = self._claims.pop(digest, None)
            if owner is not None:
                self._held.pop(owner, None)
            if done:
                self._done.add(digest)
            self._cond.notify_all()

    def exists(self, desc: Descriptor) -> bool:
        if is_manifest(desc):
            return self.inner.exists(desc)
        me = threading.current_thread()
        with self._cond:
            stale = self._held.pop(me, None)  # this thread moved on: its last claim was abandoned
            if stale is not None:
                self._claims.pop(stale, None)
                self._cond.notify_all()
            while True:
                if desc.digest in self._done:
                    return True
                owner = self._claims.get(desc.digest)
                if owner is None or not owner.is_alive():
                    break
                self._cond.wait(WAIT_SLICE)
            self._claims[desc.digest] = me
            self._held[me] = desc.digest
        try:
            present = self.inner.exists(desc)
        except BaseException:
            self._release(desc.digest, False)
            raise
        if present:
            self._release(desc.digest, True)
        return present

    # -- writes ---------------------------------------------------------------------------------
    def mount_from(self, desc: Descriptor, src: object) -> bool:
        mount = getattr(self.inner, "mount_from", None)
        if mount is None:
            return False
        try:
            mounted = bool(mount(desc, src))
        except BaseException:
            self._release(desc.digest, False)
            raise
        if mounted:
            self._release(desc.digest, True)
        return mounted

    def push_blob(self, desc: Descriptor, reader: BinaryIO) -> None:
        ok = False
        try:
            self.inner.push_blob(desc, reader)
            ok = True
        finally:
            self._release(desc.digest, ok)

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        self.inner.push_manifest(desc, data, tag)

    def tag(self, desc: Descriptor, tag: str) -> None:
        self.inner.tag(desc, tag)

    def resolve(self, reference: str) -> Descriptor:
        return self.inner.resolve(reference)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        return self.inner.open_blob(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        return self.inner.fetch_bytes(desc)

    def tags(self) -> list[str]:
        return self.inner.tags()

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return self.inner.referrers(desc, artifact_type)
