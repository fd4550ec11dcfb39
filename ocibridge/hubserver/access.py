"""What each token of ``--token-file`` may do: read every repository, or also write those under a
repo-id prefix (the Hub's write API, :mod:`.publish`). One token a line:

    TOKEN                       read
    TOKEN read                  read
    TOKEN write                 read everything, write every repository
    TOKEN write acme/           read everything, write repositories whose id starts with acme/
    TOKEN write acme/ alice     ... and commits it makes are by "alice" (whoami's name)

The name (what ``whoami`` answers and the author a commit records) is the fourth field, else
``token-`` and the first 8 hex digits of the token's SHA-256, so a secret never appears in a
manifest. A write prefix ``*`` is every repository (to name the token without a prefix).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ocibridge.errors import UsageError

SCOPES = ("read", "write")


@dataclass(frozen=True)
class Grant:
    """One token line, parsed."""

    token: str
    write: bool = False
    prefix: str = ""  # the repo ids it writes start with this ("": every one)
    name: str = ""

    def may_write(self, repo_id: str) -> bool:
        return self.write and repo_id.lower().startswith(self.prefix.lower())

    def whoami(self) -> dict[str, Any]:
        """``GET /api/whoami-v2`` as huggingface_hub reads it (``hf auth whoami``: name, role)."""
        role = "write" if self.write else "read"
        token: dict[str, Any] = {"displayName": self.name, "role": role}
        if self.write and self.prefix:
            token["repoPrefix"] = self.prefix  # serve's own: what this write token may write
        return {"type": "user", "id": self.name, "name": self.name, "fullname": self.name, "orgs": [],
                "auth": {"type": "access_token", "accessToken": token}}


def parse_line(line: str, where: str = "--token-file") -> Grant:
    """One line of the token file (the module's docstring); :class:`UsageError` when malformed."""
    fields = line.split()
    if not fields or len(fields) > 4:
        raise UsageError(f"{where}: expected 'TOKEN [read|write] [REPO-PREFIX] [NAME]', got {len(fields)} fields")
    token = fields[0]
    scope = fields[1] if len(fields) > 1 else "read"
    if scope not in SCOPES:
        raise UsageError(f"{where}: scope {scope!r}: expected read or write")
    prefix = fields[2] if len(fields) > 2 else ""
    if scope == "read" and prefix:
        raise UsageError(f"{where}: a read token reads every repository: a prefix goes with write")
    name = fields[3] if len(fields) > 3 else "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]
    return Grant(token, scope == "write", "" if prefix == "*" else prefix, name)


def parse_lines(lines: Sequence[str]) -> list[Grant]:
    return [parse_line(line, f"--token-file line {n}") for n, line in enumerate(lines, 1)]


def find(grants: Sequence[Grant], given: str) -> Grant | None:
    """The grant of the token ``given`` (compared in constant time), or None."""
    if not given:
        return None
    sent = given.encode()
    found = None
    for grant in grants:
        if hmac.compare_digest(sent, grant.token.encode()):
            found = grant
    return found
