"""The opening steps the API's calls share, in one place: locate the reference (once, at the
edge), refuse what the policy file refuses before anything is opened, open the store (or the
artifact a kind's place builds), then check before use: the digest the policy and the keys
accepted is what the call reads next (docs/security.md, "what is verified is used").

A call that checks nothing (inspect, evidence, browse) still locates and opens here, so that
every call reaches a store the same way, with the same transfer options. A destination is
located here too (:func:`locate_destination`: ocibridge's bookkeeping tags refused before
anything is written) and opened for writing with :func:`open_at`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.api.options import TransferOptions
from ocibridge.oci.bookkeeping import refuse_as_destination
from ocibridge.oci.reference import LayoutReference, RegistryReference
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.places.targets import SourceTarget, StoreTarget, default_store_path, open_source, open_store_target

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.use import CheckedUse
    from ocibridge.signing.verify import VerifyPolicy
    from ocibridge.stores.registry.options import RegistryOptions


@dataclass
class Opened:
    """A located reference and its open store: ``target.reference`` is the verified digest
    once :func:`open_checked` checked it (the reference as given when nothing asked a check)."""

    located: Locator
    target: StoreTarget

    @property
    def parts(self) -> tuple[Locator, StoreTarget]:
        return self.located, self.target


def registry_options(transfer: TransferOptions | None) -> RegistryOptions:
    """How registries are reached: ``transfer``'s options, the defaults without one."""
    return (transfer or TransferOptions()).registry_options()


def store_reference(ref: str | Locator | None, role: Role = Role.LOCAL) -> Locator:
    """``ref`` located once (places/locate.py): None is the local store, a bare NAME[:TAG] a model
    it holds, a directory holding a layout that layout."""
    if ref is None:
        return LayoutReference(str(default_store_path()), written=f"oci:{default_store_path()}")
    return locate(ref, role)


def locate_destination(ref: str | Locator) -> Locator:
    """``ref`` located as a store to write to, a tag of ocibridge's own bookkeeping refused
    (:func:`refuse_bookkeeping`) before a byte is written."""
    located = locate(ref, Role.DESTINATION)
    refuse_bookkeeping(located)
    return located


def refuse_bookkeeping(located: Locator | None) -> None:
    """A destination tag that is ocibridge's own bookkeeping (:func:`.bookkeeping.refuse_as_destination`)."""
    if isinstance(located, (RegistryReference, LayoutReference)):
        refuse_as_destination(located.tag, text_of(located))


def open_at(located: Locator, transfer: TransferOptions | None = None, *, for_write: bool = False) -> StoreTarget:
    """The store ``located`` (already located: no role is checked again) names, opened with
    ``transfer``'s registry options. ``for_write``: a destination (a layout is created, a
    registry repository opened without its read mirrors)."""
    return open_store_target(located, for_write=for_write, options=registry_options(transfer))


def open_read(located: Locator, transfer: TransferOptions | None = None,
              chunks: ChunkChoice | None = None) -> SourceTarget:
    """What a located model reference reads from, opened with ``transfer``'s registry options:
    a store, or the artifact a kind's place builds (``hf:ORG/NAME``: what a push of it stores,
    with the chunk settings ``chunks``; None: push's defaults)."""
    return open_source(located, options=registry_options(transfer), chunks=chunks)


def open_located(ref: str | Locator, transfer: TransferOptions | None = None, *, role: Role = Role.MODEL,
                 for_write: bool = False) -> Opened:
    """``ref`` located (as ``role``) and its store opened with ``transfer``'s registry options."""
    located = locate(ref, role)
    return Opened(located, open_at(located, transfer, for_write=for_write))


def open_checked(located: Locator, verify: VerifyPolicy | UsePolicy | None, transfer: TransferOptions | None = None,
                 *, files_only: bool = False, kind_places: bool = False,
                 chunks: ChunkChoice | None = None) -> SourceTarget:
    """Refuse early, open, check then use: the source of ``located`` whose ``reference`` is the
    digest the policy file and ``verify``'s keys accepted (raises otherwise). ``kind_places``:
    ``hf:ORG/NAME`` opens as the artifact a push of it builds (with ``chunks``, push's chunk
    settings; None: its defaults); ``files_only``: as :func:`verified_digest`."""
    return open_vouched(located, verify, transfer, files_only=files_only, kind_places=kind_places,
                        chunks=chunks)[0]


def open_vouched(located: Locator, verify: VerifyPolicy | UsePolicy | None, transfer: TransferOptions | None = None,
                 *, files_only: bool = False, kind_places: bool = False,
                 chunks: ChunkChoice | None = None) -> tuple[SourceTarget, CheckedUse]:
    """:func:`open_checked`, and what its check vouches for (a pull into a directory relies on
    the chunk table only where a signature covering it was verified)."""
    from ocibridge.signing.use import refuse_before_opening

    shown = text_of(located)
    refuse_before_opening(located, verify, shown)
    source = open_read(located, transfer, chunks) if kind_places else open_at(located, transfer)
    checked = _check(source, verify, shown, located, files_only=files_only)
    source.reference = checked.digest
    return source, checked


def verified_digest(source: SourceTarget, policy: VerifyPolicy | UsePolicy | None, name: str,
                    located: Locator | None = None, *, files_only: bool = False) -> str:
    """Check then use: what ``source`` names, once the policy file that applies to ``located``
    and the keys of ``policy`` accept it (raises otherwise). The digest that was checked is
    what is used next; when nothing had to be checked, the reference as it was. ``files_only``:
    the caller uses the model's files and nothing else of its manifest (a pull into a
    directory), so a signature of the files (OMS) is enough; otherwise the signature must cover
    the manifest (signing/coverage.py)."""
    return _check(source, policy, name, located, files_only=files_only).digest


def _check(source: SourceTarget, policy: VerifyPolicy | UsePolicy | None, name: str, located: Locator | None,
           *, files_only: bool) -> CheckedUse:
    from ocibridge.scanning.policy import require_clean_scan
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.use import check_for_use

    return check_for_use(source.store, source.reference, located, policy, name, clean_scan=require_clean_scan,
                         trusts=Trusted.FILES if files_only else Trusted.MANIFEST)
