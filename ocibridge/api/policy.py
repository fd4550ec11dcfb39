"""The policy on use as API values: what every call that uses a model obeys (``verify=`` of
pull, path, copy_reference, save, load), built by :func:`verification`; and the containers
policy file (``policy.json``, as skopeo and podman read it) evaluated for one reference by
:func:`check_policy`, which says what pull or copy would decide, and why, without using anything.

Light at import (the CLI builds its ``--policy`` help from :data:`POLICY_ENV`): the locator,
stores and ``cryptography`` load inside the functions, and ``cryptography`` only for keys.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ocibridge.core.environment import POLICY as POLICY_ENV
from ocibridge.core.textlists import one_or_many
from ocibridge.stores.opened import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locators import Locator
    from ocibridge.signing.containers_policy import Decision, Requirement, UsePolicy
    from ocibridge.signing.verify import VerifyPolicy

__all__ = ["POLICY_ENV", "PolicyVerdict", "RequirementCheck", "Verification", "check_policy", "verification"]

#: What ``verify=`` of the calls that use a model takes (None: the policy file found, no keys).
Verification: TypeAlias = "VerifyPolicy | UsePolicy"

#: The verdict's reason when no policy file applies (none given, none in the default places).
NO_POLICY_FILE = "no containers policy file applies: everything is accepted"


def verification(keys: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
                 policy: str | os.PathLike[str] | None = None) -> Verification | None:
    """The ``verify=`` value of the calls that use a model: a signature by one of ``keys``
    (public key files, as ``--verify-key``) and the containers ``policy`` file (``--policy``;
    None: ``$OCIBRIDGE_POLICY``, then the user's and the system's). None asks for nothing beyond
    the policy file found, as a command given neither flag."""
    found = None
    if keys:  # without, cryptography stays unloaded (~35 ms at start)
        from ocibridge.signing.verify import VerifyPolicy

        found = VerifyPolicy.from_files([os.fspath(k) for k in one_or_many(keys)])
    if policy is None:
        return found
    from ocibridge.signing.containers_policy import UsePolicy

    return UsePolicy(keys=found, file=os.fspath(policy))


@dataclass(frozen=True)
class RequirementCheck:
    """One requirement of the scope that applied: ``satisfied`` True or False, or None when it
    was not checked (another requirement of the scope already refuses without a request)."""

    requirement: str  # as the refusal names it: 'reject', 'sigstoreSigned by key K (matchRepoDigestOrExact)'
    type: str  # the requirement's type in the file: insecureAcceptAnything, reject, sigstoreSigned, ...
    satisfied: bool | None
    reason: str
    signer: str | None = None  # sigstoreSigned: the key that verified

    def as_dict(self) -> dict[str, Any]:
        return {"requirement": self.requirement, "type": self.type, "satisfied": self.satisfied,
                "reason": self.reason, "signer": self.signer}


@dataclass(frozen=True)
class PolicyVerdict:
    """What the containers policy file decides for one reference, and why: the file, the scope
    the reference is looked up as (``docker:host/repo:tag``, ``oci:/abs/dir``), the entry of the
    file that applied (``docker "host/repo"``, ``default``), each requirement of it checked, and
    the digest the signatures were checked for (None when no request was needed)."""

    reference: str
    allowed: bool
    policy_file: str | None
    scope: str
    entry: str | None
    digest: str | None
    requirements: tuple[RequirementCheck, ...]
    reasons: tuple[str, ...]  # refused: each refusal, as pull prints it; allowed: what accepted it

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "allowed": self.allowed, "policyFile": self.policy_file,
                "scope": self.scope, "entry": self.entry, "digest": self.digest,
                "requirements": [r.as_dict() for r in self.requirements], "reasons": list(self.reasons)}


@closes_its_stores
def check_policy(reference: str | Locator, policy: str | os.PathLike[str] | None = None, *,
                 transfer: TransferOptions | None = None) -> PolicyVerdict:
    """Evaluate the containers policy file (``policy``; None: the one pull would find) for
    ``reference`` as pull, copy and the other commands that use a model do before using it, and
    return the verdict instead of refusing. Signatures are fetched only for a ``sigstoreSigned``
    requirement, and only when no other requirement of the scope refuses already. A policy
    file that cannot be read raises (:class:`ocibridge.errors.UsageError`), as pull does."""
    from ocibridge.places.locate import Role, locate, text_of
    from ocibridge.signing.containers_policy import CLEAN_SCAN, SIGSTORE_SIGNED, UsePolicy
    from ocibridge.signing.use import decision_for, scope_of

    asking = (SIGSTORE_SIGNED, CLEAN_SCAN)  # what the store must be asked about

    located = locate(reference, Role.MODEL)
    name = text_of(located)
    decision = decision_for(located, UsePolicy(file=None if policy is None else os.fspath(policy)))
    if decision is None:
        return PolicyVerdict(name, True, None, scope_of(located).describe(), None, None, (), (NO_POLICY_FILE,))
    early = {r: _refused_early(decision, r, name) for r in decision.requirements if r.type not in asking}
    refused = any(reason is not None for reason in early.values())
    signed = [r for r in decision.requirements if r.type in asking]
    subject = None if refused or not signed else _subject(located, transfer)
    checks = []
    for requirement in decision.requirements:
        if requirement.type not in asking:
            reason = early[requirement]
            checks.append(RequirementCheck(requirement.describe(), requirement.type, reason is None,
                                           reason or "accepts anything"))
        elif subject is None:
            checks.append(RequirementCheck(requirement.describe(), requirement.type, None,
                                           "not checked: the scope refuses already"))
        elif requirement.type == CLEAN_SCAN:
            checks.append(_clean_scan(decision, requirement, subject, name))
        else:
            checks.append(_signed(decision, requirement, subject, name))
    allowed = all(c.satisfied for c in checks)
    reasons = tuple(c.reason for c in checks if c.satisfied == allowed)  # refused: the refusals only
    return PolicyVerdict(name, allowed, str(decision.path), decision.scope.describe(), decision.section,
                         None if subject is None else subject[1].digest, tuple(checks), reasons)


def _refused_early(decision: Decision, requirement: Requirement, name: str) -> str | None:
    """The refusal of a requirement no signature bears on (reject, signedBy, ...), else None."""
    from ocibridge.errors import SignatureError

    try:
        dataclasses.replace(decision, requirements=(requirement,)).refuse_early(name)
    except SignatureError as e:
        return str(e)
    return None


def _subject(located: Locator, transfer: TransferOptions | None) -> tuple[Any, Descriptor]:
    """The store ``located`` names and the manifest its reference resolves to."""
    from ocibridge.api.opening import open_located

    target = open_located(located, transfer).target
    return target.store, target.store.resolve(target.reference)


def _signed(decision: Decision, requirement: Requirement, subject: tuple[Any, Descriptor],
            name: str) -> RequirementCheck:
    """A ``sigstoreSigned`` requirement checked as pull checks it (its refusal line, word for word)."""
    from ocibridge.errors import SignatureError
    from ocibridge.scanning.policy import require_clean_scan
    from ocibridge.signing.policy_eval import evaluate

    store, desc = subject
    try:
        (accepted,) = evaluate(dataclasses.replace(decision, requirements=(requirement,)), store, desc, name,
                               clean_scan=require_clean_scan)
    except SignatureError as e:
        return RequirementCheck(requirement.describe(), requirement.type, False, str(e))
    return RequirementCheck(requirement.describe(), requirement.type, True,
                            f"{accepted.form} signature by {accepted.signer} ({accepted.where})", accepted.signer)


def _clean_scan(decision: Decision, requirement: Requirement, subject: tuple[Any, Descriptor],
                name: str) -> RequirementCheck:
    """An ``ocibridgeCleanScan`` requirement checked as pull checks it (its refusal line, word for word)."""
    from ocibridge.errors import SignatureError
    from ocibridge.scanning.policy import require_clean_scan

    store, desc = subject
    try:
        require_clean_scan(store, desc, requirement)
    except SignatureError as e:
        return RequirementCheck(requirement.describe(), requirement.type, False,
                                f"{name}: refused by the policy {decision.where()}: {requirement.describe()}: {e}")
    return RequirementCheck(requirement.describe(), requirement.type, True,
                            "the newest scan report signed by its keys is clean")
