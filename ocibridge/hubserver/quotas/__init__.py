"""serve's quotas (``--quotas FILE``, docs/quotas.md): bytes and repositories per namespace,
enforced on every write route before its bytes are taken (:mod:`.enforce`), counted from what
the registry holds (:mod:`.usage`), and what the proxy's clients may have it fetch
(:mod:`.ingests`). Without the file nothing is counted: :data:`UNLIMITED` answers every check."""

from __future__ import annotations

from ocibridge.hubserver.repo.ports import UNLIMITED, QuotaCheck, Unlimited

__all__ = ["UNLIMITED", "QuotaCheck", "Unlimited"]


