"""A door's one call: scan what is about to be let in, attach the report, and say whether to
refuse it (``refuse``), let it in flagged (``quarantine``: stored with its flagged report, which
the clean-scan policy refuses every use of), or just report (``report``). For serve's doors (a
commit pushed by digest, judged before its branch's tag moves) as for push's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.errors import UsageError
from ocibridge.scanning.report import ScanReport

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.signing.keys import PrivateKey
    from ocibridge.stores.base import WritableStore

MODES = ("refuse", "quarantine", "report")


@dataclass(frozen=True)
class DoorVerdict:
    """What the door decided: the ``report``, the referrer it was attached as (None: not
    attached), and whether the thing is ``refused`` or let in ``quarantined``."""

    report: ScanReport
    referrer: str | None
    refused: bool
    quarantined: bool

    def line(self) -> str:
        """The refusal as one line: file, finding, scanner (empty when clean)."""
        return self.report.refusal()


def judge_stored(store: WritableStore, subject: Descriptor, *, mode: str = "refuse", key: PrivateKey | None = None,
                 identity: str = "", attach: bool = True) -> DoorVerdict:
    """Scan the model manifest ``subject`` that ``store`` holds (pushed by digest, not yet
    tagged), attach its report (signed with ``key``; a refused one too: the reason stays beside
    the digest), and decide as ``mode`` says. Needs ``ocibridge[scan]``."""
    from ocibridge.scanning.artifact import scan_stored
    from ocibridge.scanning.stored import attach_report

    if mode not in MODES:
        raise UsageError(f"scan mode {mode!r}: one of {', '.join(MODES)}")
    report = scan_stored(store, subject)
    referrer = attach_report(store, subject, report, key, identity)[0].digest if attach else None
    flagged = bool(report.flagged)
    return DoorVerdict(report, referrer, flagged and mode == "refuse", flagged and mode == "quarantine")
