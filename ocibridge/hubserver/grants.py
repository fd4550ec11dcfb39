"""A token line of serve's ``--token-file``, parsed (:mod:`.access` says what each form means
and decides with it): who the token is, and the repo-id prefixes it reads, writes and reads
when private. Parsing alone, kept apart from the decisions so that each module has one job.

The keyed form may also say what ``whoami`` answers beyond the name (``hf auth whoami``, the
JavaScript client's ``whoAmI``): ``fullname=Alice%20Smith`` (a space written ``%20`` or ``+``, the
line being split at spaces) and ``orgs=acme:Acme%20Corp,labs`` (the organisations listed, each with
its full name after a ``:`` when it has one; a ``,`` in it written ``%2C``). Neither grants
anything: what a token reads and writes is its prefixes alone."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import unquote_plus

from ocibridge.errors import UsageError
from ocibridge.kinds.hf.repotype import DATASETS_PART

SCOPES = ("read", "write")


class Org(NamedTuple):
    """An organisation whoami lists: its name, and the full name the Hub shows ("": the name)."""

    name: str
    fullname: str = ""


@dataclass(frozen=True)
class Grant:
    """One token line, parsed: who the token is, and the repo-id prefixes it reads, writes and
    reads when private ("" in a tuple: every repository)."""

    token: str
    name: str = ""
    reads: tuple[str, ...] = ("",)
    writes: tuple[str, ...] = ()
    private: tuple[str, ...] = ()
    anonymous: bool = False  # the line of requests with no token (``anonymous read=...``)
    fullname: str = ""  # what whoami answers as the full name (``fullname=``), else the name
    orgs: tuple[Org, ...] = ()  # the organisations whoami lists (``orgs=a,b:B%20Labs``): shown, granting nothing

    @property
    def write(self) -> bool:
        return bool(self.writes)

    @property
    def prefix(self) -> str:
        """The one prefix of an old-form line (``TOKEN write acme/``), "" for every repository."""
        return self.reads[0] if len(self.reads) == 1 else ""

    @property
    def namespace(self) -> str:
        """Where a bare repository name lands (``create_repo("name")``): the token's user name, as
        the Hub puts a bare name under the name ``whoami`` answers."""
        return self.name

    def may_read(self, repo_id: str | None) -> bool:
        """Whether the token reads ``repo_id`` when it is public (None: some repository, as a
        listing asks)."""
        return repo_id is None or any(within(p, repo_id) for p in self.reads)

    def may_read_private(self, repo_id: str) -> bool:
        """Whether the token reads ``repo_id`` when it is private: under its private prefixes."""
        return any(within(p, repo_id) for p in self.private)

    def may_write(self, repo_id: str) -> bool:
        return any(within(p, repo_id) for p in self.writes)

    @property
    def line(self) -> bytes:
        """The line as serve understood it: what a page cookie is an HMAC over, so that a
        changed line (a narrower prefix, a removed write) signs its visitors out."""
        return "\0".join((self.token, self.name, ",".join(self.reads), ",".join(self.writes),
                           ",".join(self.private))).encode()

    def whoami(self) -> dict[str, Any]:
        """``GET /api/whoami-v2`` as huggingface_hub reads it (``hf auth whoami``: name, role)."""
        role = "write" if self.write else "read"
        token: dict[str, Any] = {"displayName": self.name, "role": role}
        if self.prefix:
            token["repoPrefix"] = self.prefix  # serve's own: the repositories this token reads (and writes)
        if self.writes:
            token["writes"] = [p or "*" for p in self.writes]  # serve's own: where it writes
        orgs = [{"type": "org", "id": org.name, "name": org.name, "fullname": org.fullname or org.name,
                 "email": None, "canPay": False, "avatarUrl": "", "periodEnd": None, "roleInOrg": role}
                for org in self.orgs]
        return {"type": "user", "id": self.name, "name": self.name, "fullname": self.fullname or self.name,
                "email": None, "emailVerified": False, "orgs": orgs, "avatarUrl": "", "periodEnd": None,
                "billingMode": "postpaid", "canPay": False, "isPro": False,
                "auth": {"type": "access_token", "accessToken": token}}


def writes_of(grant: Grant) -> str:
    """Where ``grant`` writes, in words: its write prefixes (``*``: every repository)."""
    if "" in grant.writes:
        return "every repository"
    shown = ", ".join(p if p.endswith("/") else p + "/" for p in grant.writes)
    return f"repositories under {shown}"


def within(prefix: str, repo_id: str) -> bool:
    """Whether the repository keyed ``repo_id`` (a model's id, ``datasets/`` and a dataset's:
    repo/reponames.py) is under ``prefix`` at a ``/`` boundary, case-insensitively as the Hub's ids:
    ``acme`` and ``acme/`` take ``acme`` and ``acme/x``, not ``acme-evil/x``; "" takes all. A
    namespace (a prefix of one part, ``acme/``) takes its datasets too (``datasets/acme/x``), as a
    Hub namespace holds both; ``datasets/acme/`` takes only those, ``acme/x`` only the model."""
    head = prefix.lower().rstrip("/")
    if not head:
        return True
    repo = repo_id.lower()
    if repo == head or repo.startswith(head + "/"):
        return True
    dataset = DATASETS_PART + "/"
    return "/" not in head and repo.startswith(dataset) and within(head, repo[len(dataset):])


#: the token word of the line that says what requests without a token read
ANONYMOUS = "anonymous"
_KEYS = ("user", "read", "write", "private", "fullname", "orgs")
_FORMS = ("expected 'TOKEN [read|write] [REPO-PREFIX] [NAME]', 'TOKEN user=NAME [read=PREFIXES] "
          "[write=PREFIXES] [private=PREFIXES] [fullname=NAME] [orgs=ORG[:FULL-NAME],ORG]' or "
          "'anonymous read=PREFIXES'")


def _prefixes(text: str) -> tuple[str, ...]:
    """``a/,b/`` as prefixes; ``*`` is every repository (""), an empty value none."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return tuple("" if p == "*" else p for p in parts)


def _orgs(text: str, where: str) -> tuple[Org, ...]:
    """``acme:Acme%20Corp,labs``: each organisation's name, and its full name after a ``:``
    (escaped as ``fullname=``: a space ``%20`` or ``+``, a comma ``%2C``)."""
    orgs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, fullname = item.partition(":")
        if not name:
            raise UsageError(f"{where}: orgs= {item!r}: the organisation's name comes before ':' "
                             "(ORG:FULL-NAME)")
        orgs.append(Org(name, unquote_plus(fullname)))
    return tuple(orgs)


def _default_name(token: str) -> str:
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]


def parse_line(line: str, where: str = "--token-file") -> Grant:
    """One line of the token file (the module's docstring); :class:`UsageError` when malformed."""
    fields = line.split()
    if not fields:
        raise UsageError(f"{where}: {_FORMS}")
    if any("=" in f for f in fields[1:]):
        return _keyed_line(fields, where)
    if fields[0] == ANONYMOUS:
        raise UsageError(f"{where}: the anonymous line says what it reads: 'anonymous read=PREFIXES'")
    if len(fields) > 4:
        raise UsageError(f"{where}: {_FORMS}, got {len(fields)} fields")
    token = fields[0]
    scope = fields[1] if len(fields) > 1 else "read"
    if scope not in SCOPES:
        raise UsageError(f"{where}: scope {scope!r}: expected read or write")
    prefix = fields[2] if len(fields) > 2 else ""
    prefix = "" if prefix == "*" else prefix
    name = fields[3] if len(fields) > 3 else _default_name(token)
    # the first form: one scope for reads and writes, and what it reads it reads when private too
    return Grant(token, name, (prefix,), (prefix,) if scope == "write" else (), (prefix,))


def _keyed_line(fields: list[str], where: str) -> Grant:
    """``TOKEN user=NAME read=... write=... private=...`` (or ``anonymous read=...``)."""
    token, values = fields[0], {}
    for item in fields[1:]:
        key, sep, value = item.partition("=")
        if not sep or key not in _KEYS:
            raise UsageError(f"{where}: {item!r}: expected one of {', '.join(k + '=' for k in _KEYS)}")
        if key in values:
            raise UsageError(f"{where}: {key}= is given twice")
        values[key] = value
    if token == ANONYMOUS:
        if set(values) != {"read"}:
            raise UsageError(f"{where}: the anonymous line takes read= only (requests without a token never "
                             "write, nor read private repositories)")
        return Grant("", ANONYMOUS, _prefixes(values["read"]), anonymous=True)
    name = values.get("user") or _default_name(token)
    writes = _prefixes(values.get("write", ""))
    private = _prefixes(values["private"]) if "private" in values else (*writes, f"{name}/")
    orgs = _orgs(values.get("orgs", ""), where)
    # a full name holds no space on a line split at spaces: written %20 (or +), as in a URL
    fullname = unquote_plus(values.get("fullname", ""))
    return Grant(token, name, _prefixes(values.get("read", "*")), writes, private, fullname=fullname, orgs=orgs)


def parse_lines(lines: Sequence[str], numbers: Sequence[int] = (), where: str = "--token-file") -> list[Grant]:
    """Every line (``numbers``: each one's line in the file, else 1, 2, ...); one token on two
    lines is a :class:`UsageError` naming both."""
    numbered = list(zip(numbers or range(1, len(lines) + 1), lines, strict=True))
    grants = [parse_line(line, f"{where} line {n}") for n, line in numbered]
    first: dict[str, int] = {}
    for (n, _), grant in zip(numbered, grants, strict=True):
        seen = first.setdefault(grant.token, n)
        if seen != n:
            what = "an anonymous line" if grant.anonymous else "the same token"
            raise UsageError(f"{where} lines {seen} and {n} give {what}: keep one line for it "
                             "(which scope was meant cannot be told)")
    return grants


def find(grants: Sequence[Grant], given: str) -> Grant | None:
    """The grant of the token ``given`` (compared in constant time), or None."""
    if not given:
        return None
    sent = given.encode()
    found = None
    for grant in grants:
        if not grant.anonymous and hmac.compare_digest(sent, grant.token.encode()):
            found = grant
    return found
