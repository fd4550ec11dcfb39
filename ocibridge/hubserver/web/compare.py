"""The compare page's data (``/{repo}/compare/{a}...{b}``): ``ocibridge diff`` of two revisions,
made by the same public function (``ocibridge.diff``), which the API layer hands to serve as
:data:`Diff` (serve is below the API: it never imports it). It reads registries only: a layout
source gets a page saying so.

Anyone who may read may ask for any pair of versions, again and again, so a page costs what it
shows (docs/security.md, "Page budgets"):

- the files (by digest and size) need no reads; the configs and tensors are read under a
  budget: :data:`PAGE_BUDGET` a page, and :data:`CLIENT_BUDGET` a client (its address) per
  :data:`CLIENT_WINDOW`; past it the diff says which tensors it did not compare and the page
  names the command that compares them all;
- one comparison is made once whichever order it is asked in (kept by the two digests sorted;
  the other order is the same diff reversed, nothing read), one at a time per pair, and at
  most :data:`AT_ONCE` diffs are made at once;
- the diffs kept are bounded by their size (:data:`KEPT_BYTES`), not their number: one of
  200,000 tensors weighs what 10,000 small ones do.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.settings import COMPARE_BUDGET
from ocibridge.lazyread.budget import ReadBudget
from ocibridge.oci.reference import RegistryReference

if TYPE_CHECKING:
    from ocibridge.lazyread.diff import ModelDiff

#: ``ocibridge.diff`` with serve's registry options: (old reference, new reference, the read
#: budget) -> the diff
Diff = Callable[[str, str, ReadBudget], "ModelDiff"]
#: what one page's diff may read from registries (configs and tensors; serve's --compare-budget)
PAGE_BUDGET = COMPARE_BUDGET
#: what the diffs one client asks for may read together within :data:`CLIENT_WINDOW` seconds
CLIENT_BUDGET = 512 * 1024 * 1024
CLIENT_WINDOW = 3600.0
#: clients whose reads are remembered (the oldest forgotten first)
CLIENTS_KEPT = 10_000
#: what the diffs kept may weigh together (an estimate of their size in memory)
KEPT_BYTES = 64 * 1024 * 1024
#: diffs made at the same time (each holds two parsed headers while it is made)
AT_ONCE = 2


@dataclass(frozen=True)
class Comparison:
    """Two revisions and their diff; ``diff`` None with ``why`` when none can be made here;
    ``command``: the ``ocibridge diff`` that compares everything (named where the page did not)."""

    repo_id: str
    old: Resolved
    new: Resolved
    diff: ModelDiff | None
    why: str | None = None
    command: str | None = None


class ClientReads:
    """The bytes each client's diffs read within the window; thread-safe."""

    def __init__(self, budget: int = CLIENT_BUDGET, window: float = CLIENT_WINDOW,
                 clock: Callable[[], float] = time.monotonic):
        self.budget, self.window, self.clock = budget, window, clock
        self._reads: OrderedDict[str, list[tuple[float, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def left(self, client: str) -> int:
        with self._lock:
            return self.budget - sum(n for _, n in self._recent(client))

    def charge(self, client: str, size: int) -> None:
        with self._lock:
            self._reads[client] = [*self._recent(client), (self.clock(), size)]
            self._reads.move_to_end(client)
            while len(self._reads) > CLIENTS_KEPT:
                self._reads.popitem(last=False)

    def _recent(self, client: str) -> list[tuple[float, int]]:
        since = self.clock() - self.window
        return [(t, n) for t, n in self._reads.get(client, ()) if t > since]


class Compare:
    """The compare page's data: both revisions resolved as every read is (the policy checked),
    then ``ocibridge diff`` of their digests under the budgets (the module's docstring)."""

    def __init__(self, catalog: Catalog, diff: Diff | None, *, page_budget: int = PAGE_BUDGET,
                 clients: ClientReads | None = None, kept_bytes: int = KEPT_BYTES):
        self.catalog = catalog
        self.diff = diff
        self.page_budget = page_budget
        self.clients = clients or ClientReads()
        self.kept_bytes = kept_bytes
        self._kept: OrderedDict[tuple[str, str], tuple[ModelDiff, int]] = OrderedDict()
        self._weight = 0
        self._changed = threading.Condition()
        self._making: set[tuple[str, str]] = set()
        self._at_once = threading.BoundedSemaphore(AT_ONCE)

    def __call__(self, repo_id: str, old: str, new: str, client: str = "") -> Comparison:
        a = self.catalog.resolve(repo_id, old)
        b = self.catalog.resolve(repo_id, new)
        refs = {r.top.digest: _registry_ref(r) for r in (a, b)}
        if self.diff is None:
            return Comparison(repo_id, a, b, None, "this server was started without ocibridge's diff")
        command = f"ocibridge diff {refs[a.top.digest]} {refs[b.top.digest]}"
        if None in refs.values():
            return Comparison(repo_id, a, b, None, "the diff reads registries: this model is in a layout "
                              "('ocibridge diff' compares HOST/REPO:TAG references)")
        key = (min(a.top.digest, b.top.digest), max(a.top.digest, b.top.digest))
        made = self._made(key, refs, client)
        shown = made if made.old_digest == a.top.digest else made.reversed()
        return Comparison(repo_id, a, b, shown, command=None if shown.complete else command)

    def _made(self, key: tuple[str, str], refs: dict[str, str | None], client: str) -> ModelDiff:
        """The diff of the pair ``key`` (in its order), kept, or made now: once, while every
        other asker of the same pair waits for it."""
        assert self.diff is not None
        with self._changed:
            while key in self._making:
                self._changed.wait()
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return kept[0]
            self._making.add(key)
        try:
            limit = min(self.page_budget, max(0, self.clients.left(client)))
            with self._at_once:
                made = self.diff(str(refs[key[0]]), str(refs[key[1]]), ReadBudget(limit))
            self.clients.charge(client, made.bytes_read)
        finally:
            with self._changed:
                self._making.discard(key)
                self._changed.notify_all()
        if limit == self.page_budget:  # one cut short by a client's own budget is not kept for others
            self._keep(key, made)
        return made

    def _keep(self, key: tuple[str, str], made: ModelDiff) -> None:
        weight = weight_of(made)
        with self._changed:
            if weight > self.kept_bytes:
                return
            self._kept[key] = (made, weight)
            self._weight += weight
            while self._weight > self.kept_bytes:
                _, (_, gone) = self._kept.popitem(last=False)
                self._weight -= gone

    @property
    def kept_weight(self) -> int:
        with self._changed:
            return self._weight


def weight_of(diff: ModelDiff) -> int:
    """About what ``diff`` takes in memory: a few hundred bytes an entry and its text."""
    weight = 1024
    for f in diff.files:
        weight += 512 + len(f.path) + len(f.unread or "")
        for t in f.tensors or ():
            weight += 200 + len(t.name) + len(t.old or "") + len(t.new or "")
    for c in diff.config:
        weight += 256 + len(c.field) + len(json.dumps([c.old, c.new], default=str))
    return weight


def _registry_ref(resolved: Resolved) -> str | None:
    """The revision as the reference ``ocibridge diff`` takes: ``HOST/REPO@DIGEST``."""
    base = resolved.repo.base
    if not isinstance(base, RegistryReference):
        return None
    return f"{base.registry}/{base.repository}@{resolved.top.digest}"
