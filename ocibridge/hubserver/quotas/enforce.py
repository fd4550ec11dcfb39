"""The quotas enforced on every write route, before the bytes are taken: a namespace at its
limit, or one a write would take past it, is answered the Hub's 403 (what huggingface.co answers
a full storage: ``403 Forbidden: ... storage limit reached``, which huggingface_hub raises as
``HfHubHTTPError`` with the message), and nothing of the write is written.

Where each route is decided (:class:`Quotas`): ``create_repo`` by the repository count;
``preupload`` by the sizes it announces; the LFS batch by the objects the namespace does not hold
yet; a Xet write grant, xorb and shard when the namespace is at its limit already; every commit
(create_commit's inline files and LFS pointers, a Xet upload's, a new repository's first) in the
one commit path, by the blobs of its tree the namespace does not hold, before anything is pushed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocibridge.core.terminal import human_size
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.quotas.quotafile import EVERY, Limit, QuotaFile, QuotaRules
from ocibridge.hubserver.quotas.usage import Usage, Used, namespace_of


class QuotaExceeded(OcibridgeError):
    """A write past its namespace's quota: the Hub's 403, nothing written."""


class Quotas:
    """The rules of ``--quotas`` over what the registry holds (``usage``)."""

    def __init__(self, file: QuotaFile, usage: Usage):
        self.file = file
        self.usage = usage
        usage.ingests = lambda: self.rules().upstream.namespace

    def rules(self) -> QuotaRules:
        return self.file.rules()

    def _limit(self, key: str) -> tuple[str, Limit | None]:
        namespace = self.usage.owner(key)
        return namespace, self.rules().limit_of(namespace)

    def room(self, key: str) -> None:
        """:class:`QuotaExceeded` when ``key``'s namespace is at its byte limit already."""
        self.namespace_adding(self.usage.owner(key), 0)

    def namespace_adding(self, namespace: str, size: int) -> None:
        """:class:`QuotaExceeded` when ``namespace`` is at its byte limit, or ``size`` more would pass it."""
        limit = self.rules().limit_of(namespace)
        if limit is None or limit.bytes is None:
            return
        used = self.usage.of(namespace).bytes
        if used >= limit.bytes or used + size > limit.bytes:
            raise QuotaExceeded(_full(namespace, used, limit.bytes, size))

    def adding_blobs(self, key: str, blobs: Mapping[str, int]) -> None:
        """:class:`QuotaExceeded` when the blobs (digest -> size) the namespace does not hold yet
        would take it past its limit."""
        namespace, limit = self._limit(key)
        if limit is None or limit.bytes is None:
            return
        held = self.usage.holds(namespace)
        self.namespace_adding(namespace, sum(size for digest, size in blobs.items() if digest not in held))

    def new_repo(self, key: str, first: Mapping[str, int]) -> None:
        """:class:`QuotaExceeded` when ``key`` is a new repository and its namespace has as many as
        it may, or the blobs of its first commit (``first``: digest -> size) would take it past its
        bytes; an existing one (a create answered 409) is not refused."""
        namespace, limit = self._limit(key)
        if limit is None or self.usage.exists(key):
            return
        count = self.usage.of(namespace).repos
        if limit.repos is not None and count >= limit.repos:
            raise QuotaExceeded(f"Repository limit reached: the namespace {namespace} has {count} of its "
                                f"{limit.repos} repositories (serve --quotas); delete one or ask the operator for more")
        self.adding_blobs(key, first)

    def landed(self, key: str, digest: str) -> None:
        """A commit of ``key`` landed: its blobs count from now."""
        self.usage.landed(key, digest)

    def recount(self) -> None:
        """A repository was deleted, squashed or moved: every one counted again when next asked."""
        self.usage.forget()

    def report(self) -> list[tuple[str, Used, Limit | None]]:
        """Each namespace the registry holds or the rules name: what it takes, and its quota."""
        return usage_rows(self.usage, self.rules())


def usage_rows(usage: Usage, rules: QuotaRules) -> list[tuple[str, Used, Limit | None]]:
    """Each namespace the registry holds a repository of, or the rules name: what it holds, its quota."""
    seen = usage.namespaces()
    for name in rules.namespaces:
        if name != EVERY and name not in seen:
            seen[name] = usage.of(name)
    return [(name, used, rules.limit_of(name)) for name, used in sorted(seen.items())]


def _full(namespace: str, used: int, limit: int, adding: int) -> str:
    more = f"; this write would add {human_size(adding)}" if adding else ""
    return (f"Storage limit reached: the namespace {namespace} uses {human_size(used)} of its "
            f"{human_size(limit)} (serve --quotas){more}. Free some space or ask the operator for more")


__all__ = ["QuotaExceeded", "Quotas", "namespace_of"]
