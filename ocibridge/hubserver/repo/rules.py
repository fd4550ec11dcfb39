"""Which of serve's rules a model passes or fails, in words a page shows: the containers policy
file (read at start) and the ``--verify-key`` keys. A badge saying "passes" where no rule is in
force would claim a check nobody made; "refused" must say which rule refused, since the fix
differs (sign the model with another key, or change the policy file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError, SignatureError

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor
    from ocibridge.places.locators import Locator
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.verify import VerifyPolicy
    from ocibridge.stores.base import Store

KEYS = "--verify-key"
POLICY = "the policy file"


def rules_in_force(verify: VerifyPolicy | UsePolicy | None) -> tuple[str, ...]:
    """The rules every model served is checked against: the policy file (one was found at
    start), ``--verify-key``."""
    from ocibridge.signing.policy_place import find_policy_file
    from ocibridge.signing.use import as_use_policy

    use = as_use_policy(verify)
    found = (POLICY,) if (use.file or find_policy_file()) is not None else ()
    return (*found, KEYS) if use.keys is not None else found


def refusing_rule(store: Store, top: Descriptor, located: Locator | None,
                  verify: VerifyPolicy | UsePolicy | None, name: str) -> str:
    """The rule that refused ``top`` (called after a refusal): the policy file, unless it
    accepts the model and only the keys are left."""
    from ocibridge.signing.coverage import Trusted
    from ocibridge.signing.use import as_use_policy, decision_for

    use = as_use_policy(verify)
    try:
        decision = decision_for(located, use)
    except OcibridgeError:
        return POLICY  # it no longer reads: the file refused
    if use.keys is None:
        return POLICY
    if decision is None or decision.accepts_anything:
        return KEYS
    try:
        decision.refuse_early(name)  # what check_before_use asks first
    except SignatureError:
        return POLICY
    from ocibridge.signing.policy import verify_before_use

    try:
        verify_before_use(store, top, use.keys, name=name, trusts=Trusted.FILES)
    except SignatureError:
        return KEYS
    return POLICY
