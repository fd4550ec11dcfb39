"""Which commits ``serve --scan quarantine`` holds back: a model manifest whose newest scan report
is flagged is stored and served to its owners only, until a newer report releases it (a clean
rescan, or ``ocibridge scan REF --release``, whose verdict is ``released``). The newest report is
read once per manifest and kept a few seconds, so that reads do not ask the registry for
referrers on every request."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved

#: seconds a manifest's quarantine state is kept before its reports are read again
KEPT_FOR = 5.0


class QuarantineBook:
    """The quarantine state of the model manifests serve has been asked for, kept ``kept_for`` seconds."""

    def __init__(self, kept_for: float = KEPT_FOR):
        self.kept_for = kept_for
        self._known: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def held(self, resolved: Resolved) -> str | None:
        """Why the revision's model is quarantined (its newest report's finding), None when it is not."""
        from ocibridge.scanning.report import FLAGGED
        from ocibridge.scanning.stored import newest, stored_reports

        digest, now = resolved.model.digest, time.monotonic()
        with self._lock:
            known = self._known.get(digest)
        if known is not None and now - known[0] < self.kept_for:
            return known[1]
        found = newest(stored_reports(resolved.repo.store, resolved.model))
        why = found.report.refusal() if found is not None and found.report.verdict == FLAGGED else None
        with self._lock:
            self._known[digest] = (now, why)
        return why
