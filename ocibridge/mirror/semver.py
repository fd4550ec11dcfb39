"""A small semantic-version parser and range matcher for tag filters.

Hand-written rather than a dependency: mirror filters need only versions as tags spell them
(``v1.2.3``, ``1.2``, ``2.0.0-rc.1``) and the common range forms (``>=1.2.0 <2``, ``^1.2``,
``~1.2.3``, ``1.x``, ``a || b``), with npm's rules for what they mean and for pre-releases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ocibridge.errors import OcibridgeError

_VERSION = re.compile(
    r"^[vV]?(?P<major>0|[1-9]\d*)(?:\.(?P<minor>0|[1-9]\d*)(?:\.(?P<patch>0|[1-9]\d*))?)?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z",
    re.ASCII,  # \d is 0-9 only: a tag of Arabic-Indic digits is no release
)
_PARTIAL = re.compile(
    r"^[vV]?(?P<major>\d+|[xX*])(?:\.(?P<minor>\d+|[xX*])(?:\.(?P<patch>\d+|[xX*]))?)?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z",
    re.ASCII,  # \d is 0-9 only: a tag of Arabic-Indic digits is no release
)
_COMPARATOR = re.compile(r"^(?P<op>>=|<=|>|<|=|\^|~)?\s*(?P<ver>\S*)\Z")


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def key(self) -> tuple[object, ...]:
        """Precedence per SemVer 2.0: a pre-release sorts before its release; numeric
        identifiers sort numerically and before alphanumeric ones."""
        if not self.pre:
            return (*self.core, 1, ())
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (*self.core, 0, ids)

    def __lt__(self, other: Version) -> bool:
        return self.key() < other.key()

    def __le__(self, other: Version) -> bool:
        return self.key() <= other.key()


def parse_version(tag: str) -> Version | None:
    """A tag read as a version (``v`` prefix allowed, missing minor/patch are 0), or None."""
    m = _VERSION.match(tag)
    if not m:
        return None
    pre = tuple(m["pre"].split(".")) if m["pre"] else ()
    return Version(int(m["major"]), int(m["minor"] or 0), int(m["patch"] or 0), pre)


@dataclass(frozen=True)
class Comparator:
    op: str  # one of >=, <=, >, <, =
    version: Version

    def test(self, v: Version) -> bool:
        a, b = v.key(), self.version.key()
        return {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "=": a == b}[self.op]


@dataclass(frozen=True)
class Range:
    """Comparator sets joined by ``||``; a version matches when every comparator of one set does."""

    sets: tuple[tuple[Comparator, ...], ...]
    text: str

    def matches(self, v: Version) -> bool:
        return any(_set_matches(s, v) for s in self.sets)


def _set_matches(comparators: tuple[Comparator, ...], v: Version) -> bool:
    if not all(c.test(v) for c in comparators):
        return False
    if not v.pre:
        return True
    # npm's rule: a pre-release matches only if the range names a pre-release of that version.
    return any(c.version.pre and c.version.core == v.core for c in comparators)


def parse_range(text: str) -> Range:
    """Parse ``>=1.2.0 <2``, ``^1.2``, ``~1.2.3``, ``1.x``, ``*``, ``=1.2.3`` and ``a || b``."""
    sets = []
    for part in text.split("||"):
        comparators: list[Comparator] = []
        tokens = _tokens(part)
        if not tokens:
            tokens = ["*"]
        for token in tokens:
            comparators.extend(_expand(token, text))
        sets.append(tuple(comparators))
    return Range(tuple(sets), text)


def _tokens(part: str) -> list[str]:
    """Split on spaces, keeping an operator separated from its version (``>= 1.2``) together."""
    raw = part.split()
    out: list[str] = []
    for tok in raw:
        if out and out[-1] in (">=", "<=", ">", "<", "=", "^", "~"):
            out[-1] += tok
        else:
            out.append(tok)
    return out


def _expand(token: str, text: str) -> list[Comparator]:
    m = _COMPARATOR.match(token)
    if not m:
        raise OcibridgeError(f"invalid semver range {text!r}: cannot read {token!r}")
    op, ver = m["op"] or "", m["ver"] or "*"
    p = _PARTIAL.match(ver)
    if not p:
        raise OcibridgeError(f"invalid semver range {text!r}: {ver!r} is not a version")
    parts = [None if x is None or x in "xX*" else int(x) for x in (p["major"], p["minor"], p["patch"])]
    # a wildcard makes everything after it a wildcard too
    for i in range(3):
        if parts[i] is None:
            parts[i + 1:] = [None] * (2 - i)
            break
    major, minor, patch = parts
    pre = tuple(p["pre"].split(".")) if p["pre"] else ()
    low = Version(major or 0, minor or 0, patch or 0, pre)

    def up(level: int) -> Version:
        """The first version above the given level: 0 → next major, 1 → next minor, 2 → next patch."""
        if level == 0:
            return Version((major or 0) + 1, 0, 0)
        if level == 1:
            return Version(major or 0, (minor or 0) + 1, 0)
        return Version(major or 0, minor or 0, (patch or 0) + 1)

    known = sum(x is not None for x in parts)  # 0..3 leading numbers given
    if op == "^":
        if known == 0:
            return [Comparator(">=", Version(0, 0, 0))]
        if major != 0 or known == 1:
            return [Comparator(">=", low), Comparator("<", up(0))]
        if minor != 0 or known == 2:
            return [Comparator(">=", low), Comparator("<", up(1))]
        return [Comparator(">=", low), Comparator("<", up(2))]
    if op == "~":
        if known == 0:
            return [Comparator(">=", Version(0, 0, 0))]
        if known == 1:
            return [Comparator(">=", low), Comparator("<", up(0))]
        return [Comparator(">=", low), Comparator("<", up(1))]
    if known == 3:
        return [Comparator(op or "=", low)]
    # partial versions: 1.2 means 1.2.x
    if op in ("", "="):
        if known == 0:
            return [Comparator(">=", Version(0, 0, 0))]
        return [Comparator(">=", low), Comparator("<", up(known - 1))]
    if known == 0:
        return [Comparator(">=", Version(0, 0, 0))] if op in (">=", "<=") else [Comparator("<", Version(0, 0, 0))]
    if op == ">=":
        return [Comparator(">=", low)]
    if op == ">":
        return [Comparator(">=", up(known - 1))]
    if op == "<":
        return [Comparator("<", low)]
    return [Comparator("<", up(known - 1))]  # <=1.2 means <1.3.0
