"""Where the containers policy file is (``containers-policy.json(5)``'s places), found without
reading it: apart from :mod:`.policy_file`, so that a call given no keys on a machine with no
policy file (``load_tensors(REF)``) asks only this and loads none of the policy's code."""

from __future__ import annotations

import os
from pathlib import Path

from ocibridge.core import environment

SYSTEM_POLICY = Path("/etc/containers/policy.json")
USER_POLICY = Path(".config", "containers", "policy.json")  # under $HOME


def find_policy_file(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The policy file that applies: ``explicit``, ``$OCIBRIDGE_POLICY``, the user's, the
    system's; None when there is none (nothing is then checked)."""
    if explicit:
        return Path(explicit)
    named = os.environ.get(environment.POLICY)
    if named:
        return Path(named)
    home = os.environ.get("HOME")
    if home and (Path(home) / USER_POLICY).is_file():
        return Path(home) / USER_POLICY
    return SYSTEM_POLICY if SYSTEM_POLICY.is_file() else None
