"""A mirror's door: each copy scanned at the target, pushed by digest and not yet tagged, its
report attached beside it (signed with the entry's ``scan_key``); ``refuse`` leaves a flagged
copy untagged, ``quarantine`` lets it be tagged with its flagged report, which a policy asking
for a clean scan refuses every use of (docs/scanning.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:
    from ocibridge.mirror.planned import EntryPlan
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import WritableStore


class MirrorScanRefused(OcibridgeError):
    """A copy the scan flagged under ``scan = "refuse"``: its tag is never written."""


def scan_copy(plan: EntryPlan, target: WritableStore, subject: Descriptor) -> dict[str, Any]:
    """Scan ``subject`` where the copy put it (its files read by ranges), attach the report and
    judge as the entry's ``scan`` says; what the run's report says of it. Raises
    :class:`MirrorScanRefused` (file, finding, scanner) for a refused one."""
    from ocibridge.scanning.screening import judge_stored

    assert plan.settings.scan is not None and plan.target is not None
    identity = plan.target.name if plan.target.host is not None else str(target.describe())
    verdict = judge_stored(target, subject, mode=plan.settings.scan, key=plan.scan_key, identity=identity)
    if verdict.refused:
        raise MirrorScanRefused(f"refused by the scan: {verdict.line()} (report {verdict.referrer})")
    flagged = verdict.report.flagged
    return {"verdict": verdict.report.verdict, "report": verdict.referrer, "signed": plan.scan_key is not None,
            "quarantined": verdict.quarantined, **({"finding": flagged[0].line()} if flagged else {})}
