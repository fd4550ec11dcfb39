"""The writer lease as the registry keeps it: one small manifest under the bookkeeping tag
``ocibridge-writer`` (oci/bookkeeping.py) of serve's own repository ``ocibridge-serve`` under
the first SOURCE prefix (``host/models/ocibridge-serve:ocibridge-writer`` for ``serve host/models``).

Where: a prefix needs a repository to keep a tag in, and the only ones serve writes are those
Hub repo ids map to (``prefix/org/name``, ``prefix/name``). A path no repo id can produce
(three parts deep) is one many registries refuse (Docker Hub and Quay keep two), so the lease
takes the one-part id ``ocibridge-serve``, the shallowest path any registry that takes
``serve``'s repositories takes, and serve reserves that id: it is refused to every write
(create_repo, a commit: :meth:`.writeaccess.Writers.writer`) and left out of listings.

What: an OCI manifest, ``artifactType`` :data:`~ocibridge.oci.bookkeeping.WRITER_ARTIFACT_TYPE`,
the empty config and one empty layer (the tombstone's blob), its facts in annotations, so that
a renewal is a single manifest ``PUT``: the holder (a random id per process,
:mod:`.identity`; the URL it announced, its host name and pid), the expiry and renewal period
it keeps to, a renewal number and, once it stopped cleanly, ``released``. No clock time is
written: a waiting serve measures how long the record stayed unchanged on its own clock, so
hosts whose clocks disagree still agree on the expiry. The renewal number cycles through
:data:`CYCLE` values, so a holder that renews for a year leaves at most that many manifests
(untagged, which garbage collection removes) per holder, not one per renewal: a registry
that counts or limits images (ECR's 10,000 a repository) is not filled by the lease.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError, RegistryError
from ocibridge.oci.bookkeeping import WRITER_ARTIFACT_TYPE, WRITER_TAG
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore, WritableStore, resolve_and_read

log = logging.getLogger("ocibridge.hubserver")

#: how many different renewal numbers a holder writes, in turn
CYCLE = 8
#: bytes of a lease manifest read at most
RECORD_MAX = 64 * 1024
_KEY = "io.ocibridge.writer."


@dataclass(frozen=True)
class Holder:
    """A serve process that may hold the lease."""

    id: str
    url: str = ""  # the URL it announced (--public-url, else its listen address); "" when unknown
    host: str = ""
    pid: int = 0

    def shown(self) -> str:
        """How a log line or an error names it: where to send writes first."""
        where = self.url or "a serve that announced no URL"
        return f"{where} (host {self.host or 'unknown'}, pid {self.pid or 'unknown'})"


@dataclass(frozen=True)
class LeaseRecord:
    """One version of the lease: its holder, the times the holder keeps to, the renewal."""

    holder: Holder
    renewal: int = 0
    expiry: float = 30.0
    renew: float = 10.0
    released: bool = False

    @property
    def version(self) -> tuple[str, int, bool]:
        """What changes at every renewal, as the registry keeps it (the renewal number cycles): a
        waiting serve compares these, and a holder its own write with what it reads back."""
        return self.holder.id, self.renewal % CYCLE, self.released

    def continues(self, earlier: LeaseRecord) -> bool:
        """Whether this is the renewal ``earlier``'s holder writes after reading ``earlier``."""
        return self.holder.id == earlier.holder.id and not self.released \
            and self.renewal % CYCLE == (earlier.renewal + 1) % CYCLE

    def manifest(self) -> tuple[Descriptor, bytes]:
        notes = {_KEY + "holder": self.holder.id, _KEY + "url": self.holder.url, _KEY + "host": self.holder.host,
                 _KEY + "pid": str(self.holder.pid), _KEY + "renewal": str(self.renewal % CYCLE),
                 _KEY + "expiry-seconds": f"{self.expiry:g}", _KEY + "renew-seconds": f"{self.renew:g}"}
        if self.released:
            notes[_KEY + "released"] = "true"
        body = Manifest(mediaType=OCI_MANIFEST, artifactType=WRITER_ARTIFACT_TYPE, config=empty_descriptor(),
                        layers=[empty_descriptor()], annotations=notes).to_json_bytes()
        return Descriptor.for_bytes(OCI_MANIFEST, body), body


def read_lease(store: ReadableStore) -> LeaseRecord | None:
    """The lease the store's ``ocibridge-writer`` tag names, read now (one ``GET``); None when
    there is none, or what is there is not a lease (which a writer then replaces). A registry
    that does not answer raises its error."""
    try:
        desc, data = resolve_and_read(store, WRITER_TAG)
    except (NotFound, InvalidReference):
        return None
    try:
        if desc.size > RECORD_MAX:
            raise OcibridgeError(f"{desc.size} bytes")
        manifest = parse_manifest_bytes(data, desc.mediaType)
        if not isinstance(manifest, Manifest) or manifest.artifactType != WRITER_ARTIFACT_TYPE:
            raise OcibridgeError("not a writer lease")
        return parsed(manifest.annotations or {})
    except (OcibridgeError, ValueError) as e:
        log.warning("%s:%s is not read as a writer lease: %s", store.describe(), WRITER_TAG, e)
        return None


def parsed(notes: dict[str, str]) -> LeaseRecord:
    """The record of a lease manifest's annotations; ValueError when it names no holder."""
    holder = notes.get(_KEY + "holder", "")
    if not holder:
        raise ValueError("no holder")
    pid = notes.get(_KEY + "pid", "0")
    return LeaseRecord(Holder(holder[:64], notes.get(_KEY + "url", "")[:300], notes.get(_KEY + "host", "")[:100],
                              int(pid) if pid.isdigit() and len(pid) < 10 else 0),
                       int(_number(notes.get(_KEY + "renewal"), 0)), _number(notes.get(_KEY + "expiry-seconds"), 30.0),
                       _number(notes.get(_KEY + "renew-seconds"), 10.0), notes.get(_KEY + "released") == "true")


def write_lease(store: WritableStore, record: LeaseRecord) -> None:
    """``record`` under the ``ocibridge-writer`` tag, its one blob sent unless there (a take, a
    release: the registry is asked first)."""
    from ocibridge.transfer.writer import Blob, write_artifact

    desc, body = record.manifest()
    write_artifact(store, desc, body, [Blob.empty()], tags=[WRITER_TAG])


def renew_lease(store: WritableStore, record: LeaseRecord) -> None:
    """The holder's next ``record``: one manifest ``PUT`` and nothing asked first, so that a
    holder paused mid-renewal has the least time in which its renewal is on the way (landing
    late, it would overwrite the lease a waiting serve took meanwhile). A registry that lost the
    blob (refuses the manifest) is given it, as :func:`write_lease` does."""
    from ocibridge.transfer.writer import tag_held

    desc, body = record.manifest()
    try:
        tag_held(store, desc, body, WRITER_TAG)
    except RegistryError as e:
        if e.status not in (400, 404):
            raise
        write_lease(store, record)


def _number(text: str | None, default: float) -> float:
    try:
        value = float(text) if text is not None else default
    except ValueError:
        return default
    return value if value == value and 0 <= value < 1e9 else default  # not NaN
