"""The opening steps the API's calls share, in one place: locate the reference (once, at the
edge), refuse what the policy file refuses before anything is opened, open the store (or the
artifact a kind's place builds), then check before use: the digest the policy and the keys
accepted is what the call reads next (docs/security.md, "what is verified is used").

A call that checks nothing (inspect, evidence, browse) still locates and opens here, so that
every call reaches a store the same way, with the same transfer options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.api.options import TransferOptions
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.places.targets import SourceTarget, StoreTarget, open_source, open_store_target

if TYPE_CHECKING:
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy


@dataclass
class Opened:
    """A located reference and its open store: ``target.reference`` is the verified digest
    once :func:`open_checked` checked it (the reference as given when nothing asked a check)."""

    located: Locator
    target: StoreTarget

    @property
    def parts(self) -> tuple[Locator, StoreTarget]:
        return self.located, self.target


def open_located(ref: str | Locator, transfer: TransferOptions | None = None, *, role: Role = Role.MODEL,
                 for_write: bool = False) -> Opened:
    """``ref`` located (as ``role``) and its store opened with ``transfer``'s registry options."""
    located = locate(ref, role)
    options = (transfer or TransferOptions()).registry_options()
    return Opened(located, open_store_target(located, for_write=for_write, options=options))


def open_checked(located: Locator, verify: VerifyPolicy | UsePolicy | None, transfer: TransferOptions | None = None,
                 *, files_only: bool = False, kind_places: bool = False) -> SourceTarget:
    """Refuse early, open, check then use: the source of ``located`` whose ``reference`` is the
    digest the policy file and ``verify``'s keys accepted (raises otherwise). ``kind_places``:
    ``hf:ORG/NAME`` opens as the artifact a push of it builds; ``files_only``: as
    :func:`verified_digest`."""
    from ocibridge.signing.use import refuse_before_opening

    shown = text_of(located)
    refuse_before_opening(located, verify, shown)
    options = (transfer or TransferOptions()).registry_options()
    source = open_source(located, options=options) if kind_places else open_store_target(located, options=options)
    source.reference = verified_digest(source, verify, shown, located, files_only=files_only)
    return source


def verified_digest(source: SourceTarget, policy: VerifyPolicy | UsePolicy | None, name: str,
                    located: Locator | None = None, *, files_only: bool = False) -> str:
    """Check then use: what ``source`` names, once the policy file that applies to ``located``
    and the keys of ``policy`` accept it (raises otherwise). The digest that was checked is
    what is used next; when nothing had to be checked, the reference as it was. ``files_only``:
    the caller uses the model's files and nothing else of its manifest (a pull into a
    directory), so a signature of the files (OMS) is enough; otherwise the signature must cover
    the manifest (signing/coverage.py)."""
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.use import check_before_use

    return check_before_use(source.store, source.reference, located, policy, name,
                            trusts=Trusted.FILES if files_only else Trusted.MANIFEST)
