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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.core import environment
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.oci.models import Descriptor
    from ocibridge.scanning.stored import StoredReport
    from ocibridge.signing.keys import PrivateKey, PublicKey
    from ocibridge.stores.base import Store

#: seconds a manifest's quarantine state is kept before its reports are read again
KEPT_FOR = 5.0
#: states kept at most (the oldest go first): a server asked for many manifests stays bounded
KNOWN_MAX = 4096

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


@dataclass(frozen=True)
class Deciding:
    """The scan report the quarantine follows for a model manifest, and the newer ones it does not."""

    report: StoredReport | None  # None: none decides (none trusted, none flagged): the model is not held
    trusted: bool  # signed by a trusted key; False: none is, and the newest flagged one holds the model
    passed_over: tuple[StoredReport, ...] = ()  # newer than ``report``: unsigned, or signed by another key


def deciding_report(store: Store, model: Descriptor, keys: TrustedKeys) -> Deciding:
    """The one choice of the report that decides: the quarantine holds by it, the model page shows
    it, both reading reports within the one bound (``stored.REPORT_MAX``), however large a page
    may show."""
    from ocibridge.scanning.report import FLAGGED
    from ocibridge.scanning.stored import newest, stored_reports

    every = stored_reports(store, model)
    signed = any(r.signed for r in every)  # else none can be trusted: not read again
    trusted = newest(stored_reports(store, model, list(keys))) if signed else None
    found = trusted or newest([r for r in every if r.report.verdict == FLAGGED])
    if found is None:
        return Deciding(None, False)
    at = _order(found)
    return Deciding(found, trusted is not None, tuple(r for r in every if _order(r) > at))


def _order(found: StoredReport) -> tuple[str, str]:
    """Where a report stands among its manifest's reports (as ``stored_reports`` sorts them)."""
    return found.report.scanned_at, found.referrer.digest


class QuarantineBook:
    """The quarantine state of the model manifests serve has been asked for, each in its
    repository, kept ``kept_for`` seconds."""

    def __init__(self, keys: TrustedKeys, kept: float | None = None):
        self.keys = keys
        if kept is None:
            kept = environment.seconds_at_most(environment.SERVE_STATE_KEEP, KEPT_FOR)
        self.kept_for = kept
        self._known: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def held(self, resolved: Resolved) -> str | None:
        """Why the revision's model is quarantined (its finding), None when it is not."""
        # by repository too: one manifest pushed to two holds the reports of each (referrers are a repository's)
        key, now = f"{resolved.repo.shown}@{resolved.model.digest}", time.monotonic()
        with self._lock:
            known = self._known.get(key)
        if known is not None and now - known[0] < self.kept_for:
            return known[1]
        why = self._why(resolved)
        with self._lock:
            self._known.pop(key, None)  # to the end: the dict stays in the order states were read
            self._known[key] = (now, why)
            while len(self._known) > KNOWN_MAX:
                del self._known[next(iter(self._known))]
        return why

    def _why(self, resolved: Resolved) -> str | None:
        from ocibridge.scanning.report import FLAGGED

        decides = deciding_report(resolved.repo.store, resolved.model, self.keys)
        if decides.report is None or decides.report.report.verdict != FLAGGED:
            return None
        why = decides.report.report.refusal()
        return why if decides.trusted else f"{why} (no scan report signed by a key serve trusts releases it)"
