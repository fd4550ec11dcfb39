"""Which commits ``serve --scan quarantine`` holds back: a model manifest whose newest *trusted*
scan report is flagged is stored and served to its owners only, until a newer trusted report
releases it (a clean rescan, or ``ocibridge scan REF --release``, whose verdict is ``released``).

Trusted: signed by a key serve is given (``--scan-verify-key``, and the key serve signs its own
reports with). Anyone who may push can attach a report; an unsigned one, or one signed by another
key, is their word and decides nothing: the newest trusted one does. With no trusted report at
all, a model any report flags stays held (what serve itself flagged without a key it trusts is
never let out by someone else's word). The state is read once per manifest and kept a few
seconds, so that reads do not ask the registry for referrers on every request."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ocibridge.core import environment
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.signing.keys import PrivateKey, PublicKey

#: seconds a manifest's quarantine state is kept before its reports are read again
KEPT_FOR = 5.0

TrustedKeys = tuple[tuple[str, "PublicKey"], ...]
#: how a page names serve's own key among them (the key its own reports are signed with)
OWN_KEY = "serve’s own key (--attest-key, else --sign-key)"


def trusted_keys(paths: Sequence[str], own: PrivateKey | None) -> TrustedKeys:
    """The keys whose reports release a model, each named as its flag names it: the public keys
    at ``paths`` and the public half of ``own`` (the key serve signs its reports with). None at
    all is a usage error: a model would be released by whoever attaches a report."""
    from ocibridge.signing import keys

    found = [(f"--scan-verify-key {path}", keys.load_public_key(path)) for path in paths]
    if own is not None:
        found.append((OWN_KEY, own.public_key()))
    if not found:
        raise UsageError("--scan quarantine releases a model on a signed scan report only: give serve "
                         "--scan-verify-key PUB (the key of whoever may release, repeatable) or --sign-key KEY "
                         "(its own reports signed and trusted)")
    return tuple(found)


class QuarantineBook:
    """The quarantine state of the model manifests serve has been asked for, kept ``kept_for`` seconds."""

    def __init__(self, keys: TrustedKeys, kept: float | None = None):
        self.keys = keys
        if kept is None:
            kept = environment.seconds_at_most(environment.SERVE_STATE_KEEP, KEPT_FOR)
        self.kept_for = kept
        self._known: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def held(self, resolved: Resolved) -> str | None:
        """Why the revision's model is quarantined (its finding), None when it is not."""
        digest, now = resolved.model.digest, time.monotonic()
        with self._lock:
            known = self._known.get(digest)
        if known is not None and now - known[0] < self.kept_for:
            return known[1]
        why = self._why(resolved)
        with self._lock:
            self._known[digest] = (now, why)
        return why

    def _why(self, resolved: Resolved) -> str | None:
        from ocibridge.scanning.report import FLAGGED
        from ocibridge.scanning.stored import newest, stored_reports

        store, model = resolved.repo.store, resolved.model
        found = newest(stored_reports(store, model, list(self.keys)))
        if found is not None:
            return found.report.refusal() if found.report.verdict == FLAGGED else None
        flagged = [r for r in stored_reports(store, model) if r.report.verdict == FLAGGED]
        if not flagged:
            return None
        return f"{flagged[-1].report.refusal()} (no scan report signed by a key serve trusts releases it)"
