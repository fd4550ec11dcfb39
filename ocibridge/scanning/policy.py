"""The use policy's clean-scan requirement (``ocibridgeCleanScan`` in the containers policy
file): the newest scan report of the manifest that one of the requirement's keys signed must be
clean. Missing or flagged, the use is refused naming the file, the finding and the scanner.
Reads reports only: the scanner library is not needed to obey the policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.errors import SignatureError

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.signing.containers_policy import Requirement
    from ocibridge.stores.base import Store


def require_clean_scan(store: Store, subject: Descriptor, requirement: Requirement) -> None:
    """Raise :class:`SignatureError` (one line: why) unless the newest report of ``subject``
    signed by a key of ``requirement`` is clean (the reports' modules imported here: every use
    of a model passes this judge, and only a policy that asks for a clean scan calls it)."""
    from ocibridge.scanning.stored import newest, stored_reports
    from ocibridge.signing import keys

    public = [(k.name, keys.public_key_from_pem(k.read(), k.name)) for k in requirement.keys]
    found = newest(stored_reports(store, subject, public))
    if found is None:
        names = " or ".join(name for name, _ in public)
        raise SignatureError(f"no scan report of {subject.digest} signed by {names} (ocibridge scan REF --key KEY "
                             "attaches one)")
    report = found.report
    if report.flagged:
        raise SignatureError(f"the newest scan report ({report.scanned_at}) is flagged: {report.refusal()}")
