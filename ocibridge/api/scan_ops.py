"""Scanning models from Python: a stored artifact (:func:`scan`, the ``scan`` command), its
report attached as a signed referrer; what stored artifacts under a prefix hold now, by the
current scanner (:func:`rescan`); a directory before it is pushed (:func:`scan_path`); and the
reports already attached (:func:`scan_reports`). docs/scanning.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.api.opening import open_located
from ocibridge.api.options import TransferOptions
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.oci.reference import LayoutReference, RegistryReference
from ocibridge.places.locate import Locator, text_of
from ocibridge.places.targets import closes_its_stores
from ocibridge.scanning.report import ScanReport as ScanReport  # what the results hold (public here)

if TYPE_CHECKING:
    from ocibridge.scanning.stored import StoredReport
    from ocibridge.signing.keys import PrivateKey
    from ocibridge.stores.base import WritableStore


@dataclass(frozen=True)
class ScanResult:
    """The scan of the manifest ``digest`` at ``reference``: the ``report``, and the referrer it
    was attached as (None: not attached), signed or not. ``skipped``: a rescan found the newest
    report already by this scanner version and scanned nothing (``report``: that one)."""

    reference: str
    digest: str
    report: ScanReport
    attached: str | None = None
    signed: bool = False
    skipped: bool = False

    @property
    def flagged(self) -> bool:
        return bool(self.report.flagged)

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "digest": self.digest, "report": self.report.as_dict(),
                "attached": self.attached, "signed": self.signed, "skipped": self.skipped}


@dataclass(frozen=True)
class RescanResult:
    prefix: str
    results: tuple[ScanResult, ...] = field(default_factory=tuple)

    @property
    def flagged(self) -> bool:
        return any(r.flagged for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "results": [r.as_dict() for r in self.results]}


def scan_path(path: str | os.PathLike[str]) -> ScanReport:
    """Scan a directory (every file under it) or one file on disk; nothing is attached."""
    from ocibridge.scanning import scan_directory

    if not os.path.exists(path):
        raise UsageError(f"{os.fspath(path)}: no such file or directory")
    return scan_directory(path)


@closes_its_stores
def scan(reference: str | Locator, *, key: str | os.PathLike[str] | None = None, identity: str | None = None,
         attach: bool = True, transfer: TransferOptions | None = None,
         password: str | bytes | None = None) -> ScanResult:
    """Scan every file of the model ``reference`` names and (``attach``) attach the report to
    its manifest: signed with ``key`` as an in-toto attestation naming ``identity`` (default:
    where it is), else unsigned. Needs ``ocibridge[scan]``."""
    from ocibridge.scanning import scanner

    scanner()  # (the library looked for, and the key read, before a byte of the model moves)
    private = _private(key, password)
    located, target = open_located(reference, transfer, for_write=attach).parts
    subject = target.store.resolve(target.reference)
    return _scan_one(target.store, subject, text_of(located), private, identity or _identity(located, target.store),
                     attach)


@closes_its_stores
def rescan(prefix: str, *, key: str | os.PathLike[str] | None = None, identity: str | None = None,
           transfer: TransferOptions | None = None, password: str | bytes | None = None,
           every: bool = False) -> RescanResult:
    """Scan again each model stored under ``prefix`` (``REGISTRY/PREFIX``: its catalog; an
    ``oci:DIR`` layout: its tags) whose newest report is not by this scanner version (``every``:
    all of them), and attach the new report: the newest report is the one the policy obeys."""
    from ocibridge.scanning import scanner
    from ocibridge.scanning.stored import newest, stored_reports

    current = scanner()
    private = _private(key, password)
    done: list[ScanResult] = []
    seen: set[tuple[str, str]] = set()
    for shown in _references(prefix, transfer):
        located, target = open_located(shown, transfer, for_write=True).parts
        subject = target.store.resolve(target.reference)
        place = _identity(located, target.store)
        if (place, subject.digest) in seen:
            continue
        seen.add((place, subject.digest))
        last = newest(stored_reports(target.store, subject))
        if not every and last is not None and last.report.scanner == current:
            done.append(ScanResult(text_of(located), subject.digest, last.report, last.referrer.digest, last.signed,
                                   skipped=True))
            continue
        done.append(_scan_one(target.store, subject, text_of(located), private, identity or place, True))
    return RescanResult(prefix, tuple(done))


@closes_its_stores
@closes_its_stores
def release_scan(reference: str | Locator, *, key: str | os.PathLike[str], identity: str | None = None,
                 transfer: TransferOptions | None = None, password: str | bytes | None = None) -> ScanResult:
    """Release the model ``reference`` names from ``serve --scan quarantine``: its newest flagged
    report attached again with the verdict ``released`` (findings kept), signed with ``key``. A
    newer report not signed by ``key`` hides nothing (serve counts only the keys it trusts).
    :class:`UsageError` when no report is flagged, or ``key`` released or cleared it since:
    nothing to release."""
    from dataclasses import replace

    from ocibridge.scanning.files import now
    from ocibridge.scanning.report import FLAGGED
    from ocibridge.scanning.stored import attach_report, newest, stored_reports

    private = _private(key, password)
    assert private is not None  # key is required
    located, target = open_located(reference, transfer, for_write=True).parts
    subject = target.store.resolve(target.reference)
    every = stored_reports(target.store, subject)
    found = newest([r for r in every if r.report.verdict == FLAGGED])
    mine = newest(stored_reports(target.store, subject, [("key", private.public_key())]))
    if found is None or mine is not None and mine.report.verdict != FLAGGED \
            and mine.report.scanned_at > found.report.scanned_at:
        last = mine if found is not None else newest(every)
        verdict = "no scan report" if last is None else f"its newest scan report is {last.report.verdict}"
        raise UsageError(f"{text_of(located)}: nothing to release: {verdict}")
    released = replace(found.report, scanned_at=now(), released=True)
    desc, _ = attach_report(target.store, subject, released, private, identity or _identity(located, target.store))
    return ScanResult(text_of(located), subject.digest, released, desc.digest, True)


def scan_reports(reference: str | Locator, *, transfer: TransferOptions | None = None) -> list[StoredReport]:
    """The scan reports attached to the manifest ``reference`` names, oldest first (unverified:
    the use policy verifies the ones it counts)."""
    from ocibridge.scanning.stored import stored_reports

    located, target = open_located(reference, transfer).parts
    return stored_reports(target.store, target.store.resolve(target.reference))


def _scan_one(store: WritableStore, subject: Any, shown: str, key: PrivateKey | None, identity: str,
              attach: bool) -> ScanResult:
    from ocibridge.scanning.artifact import scan_stored
    from ocibridge.scanning.stored import attach_report

    report = scan_stored(store, subject, shown)
    if not attach:
        return ScanResult(shown, subject.digest, report)
    desc, _ = attach_report(store, subject, report, key, identity)
    return ScanResult(shown, subject.digest, report, desc.digest, key is not None)


def _private(key: str | os.PathLike[str] | None, password: str | bytes | None) -> PrivateKey | None:
    if key is None:
        return None
    from ocibridge.signing import keys

    return keys.load_private_key(key, password.encode() if isinstance(password, str) else password)


def _identity(located: Locator, store: Any) -> str:
    if isinstance(located, RegistryReference):
        return f"{located.registry}/{located.repository}"
    return str(store.describe())


def _references(prefix: str, transfer: TransferOptions | None) -> Iterator[str]:
    """Every tagged reference under ``prefix``: a layout's tags, or a registry catalog's repositories' tags."""
    from ocibridge.api.browse import list_repositories
    from ocibridge.api.inspect_ops import tags
    from ocibridge.places.locate import Role, locate

    if prefix.startswith("oci:"):
        located = locate(prefix, Role.MODEL)
        if not isinstance(located, LayoutReference):
            raise UsageError(f"{prefix}: --rescan takes REGISTRY/PREFIX or oci:DIR")
        for tag in tags(f"oci:{located.path}", transfer=transfer):
            yield f"oci:{located.path}:{tag}"
        return
    listed = list_repositories(prefix, transfer=transfer)
    base = f"{listed.registry}/{listed.prefix}/" if listed.prefix else f"{listed.registry}/"
    for repository in listed.repositories:
        for tag in tags(f"{base}{repository}", transfer=transfer):
            yield f"{base}{repository}:{tag}"


# -- push's door: the source scanned before a byte is sent ------------------------------------

SCAN_MODES = ("off", "refuse", "quarantine")


class ScanRefused(OcibridgeError):
    """A push's source the scan flagged, refused before anything is written (exit 1)."""


@dataclass(frozen=True)
class DoorScan:
    """A push source's scan, made before a byte is sent, and the key its report is signed with."""

    mode: str
    report: ScanReport
    key: PrivateKey | None


def scan_before_push(source: Locator, mode: str, key: str | os.PathLike[str] | None) -> DoorScan | None:
    """Scan a push's ``source`` (a directory or a file) as ``mode`` says: ``refuse`` raises
    :class:`ScanRefused` (file, finding, scanner) when it is flagged; ``quarantine`` lets it
    through, its flagged report to be attached (a policy asking for a clean scan then refuses
    every use of it); ``off``: None, nothing read."""
    from ocibridge.oci.reference import PathReference

    if mode not in SCAN_MODES:
        raise UsageError(f"--scan {mode!r}: one of {', '.join(SCAN_MODES)}")
    if mode == "off":
        if key is not None:
            raise UsageError("--scan-key signs the report of --scan refuse or --scan quarantine")
        return None
    if not isinstance(source, PathReference):
        raise UsageError(f"{text_of(source)}: push --scan reads a directory or a file; scan a stored model with "
                         "ocibridge scan REF")
    private = _private(key, None)  # (read before the source: a wrong key costs no scan)
    report = scan_path(source.path)
    if report.flagged and mode == "refuse":
        raise ScanRefused(f"{source.path}: refused by the scan: {report.refusal()}")
    return DoorScan(mode, report, private)


def attach_after_push(door: DoorScan, where: Locator | None, digest: str, transfer: TransferOptions) -> dict[str, Any]:
    """Attach the door's report to the pushed manifest ``digest`` at ``where`` (None: the local
    store); what ``PushResult.extra["scan"]`` says."""
    import dataclasses

    from ocibridge.api.opening import open_at, store_reference
    from ocibridge.scanning.stored import attach_report

    place = where if where is not None else store_reference(None)
    store = open_at(place, transfer, for_write=True).store
    subject = store.resolve(digest)
    report = dataclasses.replace(door.report, subject=subject.digest)
    desc, _ = attach_report(store, subject, report, door.key, _identity(place, store))
    flagged = report.flagged
    return {"verdict": report.verdict, "report": desc.digest, "signed": door.key is not None,
            "quarantined": bool(flagged), **({"finding": flagged[0].line()} if flagged else {})}
