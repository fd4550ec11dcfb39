"""Check then use: the one check every command that uses a model makes before it writes
anything (pull, path, copy, k8s, mirror entries, lazy reads, save, load): the containers policy
file that applies (:mod:`ocibridge.signing.containers_policy`) and the keys given
(``--verify-key``) must both accept what the reference names; what is then used is the digest
that was checked.

No ``cryptography`` at import: a policy that accepts anything costs one small file read and no
request (``ocibridge copy`` without a check loads no signature code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.signing.containers_policy import (
    ACCEPT,
    CLEAN_SCAN,
    CleanScanCheck,
    Decision,
    DockerName,
    Scope,
    UsePolicy,
    docker_scope,
    oci_scope,
)
from ocibridge.signing.coverage import Trusted, covered_by
from ocibridge.signing.policy_file import load_policy

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locators import Locator
    from ocibridge.signing.verify import Verified, VerifyPolicy
    from ocibridge.stores.base import Store

__all__ = ["CheckedUse", "UsePolicy", "check_before_use", "check_for_use", "decision_for", "needs_checking",
           "scope_of"]


@dataclass(frozen=True)
class CheckedUse:
    """What :func:`check_for_use` found: the ``digest`` to use and what the check vouches for,
    ``vouched``: what every requirement that applied (the keys, each of the policy file's) holds
    by a signature that verified, the intersection of their forms' coverage (signing/coverage.py);
    None when nothing asked a check."""

    digest: str
    vouched: frozenset[Trusted] | None = None

    @property
    def checked(self) -> bool:
        return self.vouched is not None

    def vouches_for(self, trusted: Trusted) -> bool:
        """Whether a check ran and each of its requirements was met by a signature covering ``trusted``."""
        return self.vouched is not None and trusted in self.vouched


def scope_of(located: Locator | Scope | None) -> Scope:
    """Where the containers policy looks ``located`` (a locator) up: a registry reference in the
    ``docker`` transport (a tag, else its digest), a layout (and the local store) in ``oci``,
    an Ollama registry name as the registry reference it is; anything else (the local Ollama
    store, the Hugging Face cache) has no transport of containers/image: ``default`` applies."""
    from ocibridge.oci.reference import LayoutReference, RegistryReference
    from ocibridge.places.locators import registry_of

    if isinstance(located, Scope):  # already looked up (a mirror entry's artifact)
        return located
    if isinstance(located, RegistryReference):
        name = f"{located.registry}/{located.repository}"
        return docker_scope(DockerName(name, None if located.digest else located.tag, located.digest))
    if isinstance(located, LayoutReference):
        return oci_scope(located.path)
    on = None if located is None else registry_of(located)  # a kind's place served from a registry (ollama://)
    if on is not None:
        return docker_scope(DockerName(f"{on.registry}/{on.repository}", None if on.digest else on.tag, on.digest))
    return Scope(None)


def decision_for(located: Locator | Scope | None, use: UsePolicy | None = None) -> Decision | None:
    """What the policy file that applies (``use.file``, else the one found) asks of
    ``located``; None when there is no policy file."""
    policy = load_policy(use.file if use is not None else None)
    return None if policy is None else policy.decide(scope_of(located))


def as_use_policy(verify: VerifyPolicy | UsePolicy | None) -> UsePolicy:
    """``verify`` as the API takes it (keys, the policy file and keys, or nothing) as one value."""
    if isinstance(verify, UsePolicy):
        return verify
    return UsePolicy(keys=verify)


def refuse_before_opening(located: Locator | Scope | None, verify: VerifyPolicy | UsePolicy | None, name: str) -> None:
    """Refuse what the policy file refuses whatever the store holds (``reject``, ``signedBy``)
    before the source is even opened."""
    decision = decision_for(located, as_use_policy(verify))
    if decision is not None:
        decision.refuse_early(name)


def needs_checking(located: Locator | Scope | None, verify: VerifyPolicy | UsePolicy | None) -> bool:
    """Whether using ``located`` asks for any check (keys given, or a policy file whose scope
    does not accept anything): when not, nothing is resolved or fetched for it."""
    use = as_use_policy(verify)
    if use.keys is not None:
        return True
    decision = decision_for(located, use)
    return decision is not None and not decision.accepts_anything


def check_before_use(store: Store, reference: str | Descriptor, located: Locator | Scope | None,
                     verify: VerifyPolicy | UsePolicy | None, name: str, *, clean_scan: CleanScanCheck,
                     trusts: Trusted = Trusted.MANIFEST) -> str:
    """Check then use: the policy file's requirements for ``located`` and the keys of
    ``verify`` (``--verify-key``) both hold for what ``reference`` names in ``store``. Returns
    what to use: the digest that was checked, or ``reference`` as given when nothing had to be
    (no keys, no policy file or one accepting anything: no request is made). ``trusts``: what
    the caller relies on once the keys' signature verifies (signing/coverage.py); ``clean_scan``:
    the scanning layer's judge of an ``ocibridgeCleanScan`` requirement.
    Raises :class:`SignatureError` (one line, ``NAME: refused...``) before anything is written."""
    return check_for_use(store, reference, located, verify, name, clean_scan=clean_scan, trusts=trusts).digest


def check_for_use(store: Store, reference: str | Descriptor, located: Locator | Scope | None,
                  verify: VerifyPolicy | UsePolicy | None, name: str, *, clean_scan: CleanScanCheck,
                  trusts: Trusted = Trusted.MANIFEST) -> CheckedUse:
    """:func:`check_before_use`, saying also what the check vouches for beyond ``trusts``
    (a pull into a directory checks a layer by the manifest's chunk table only where a
    signature of the manifest vouched for it)."""
    use = as_use_policy(verify)
    decision = decision_for(located, use)
    if decision is not None:
        decision.refuse_early(name)  # reject, signedBy: nothing is asked of the store
    if use.keys is None and (decision is None or decision.accepts_anything):
        return CheckedUse(reference if isinstance(reference, str) else reference.digest)
    desc = store.resolve(reference) if isinstance(reference, str) else reference
    vouched = frozenset(Trusted)
    if use.keys is not None:  # any one signature verifying with a key accepts: what each covers, together
        from ocibridge.signing.policy import verify_before_use

        vouched &= covered_by(v.form for v in verify_before_use(store, desc, use.keys, name=name, trusts=trusts))
    if decision is not None and not decision.accepts_anything:
        from ocibridge.signing.policy_eval import evaluate

        vouched &= _policy_vouches(decision, evaluate(decision, store, desc, name, clean_scan=clean_scan))
    return CheckedUse(desc.digest, vouched)


def _policy_vouches(decision: Decision, accepted: list[Verified]) -> frozenset[Trusted]:
    """What the policy's requirements vouch for together: each met by the one signature
    :func:`evaluate` accepted for it; a requirement met otherwise (a clean scan: a judgement of the
    files, no signature of them) vouches for nothing."""
    asked = [r for r in decision.requirements if r.type not in (ACCEPT, CLEAN_SCAN)]
    if not asked or len(accepted) != len(asked):
        return frozenset()
    vouched = frozenset(Trusted)
    for verified in accepted:
        vouched &= covered_by([verified.form])
    return vouched
