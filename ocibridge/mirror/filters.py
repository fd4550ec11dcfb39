"""Tag filters: which tags of a source repository a sync entry mirrors.

Applied in order: allow (none given = every tag), deny, semver range, latest N. Tags that
name referrers by the OCI 1.1 fallback schema (``sha256-<hex>``, cosign's ``.sig``/``.att``)
and a referrer's own bookkeeping tag (``ocibridge-ref-<hex>``) never count as artifacts: they
travel with their subject when referrers are copied (the target writes the referrer's tag again).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable

from ocibridge.errors import OcibridgeError
from ocibridge.mirror.jobsections import TagFilter
from ocibridge.mirror.semver import parse_range, parse_version
from ocibridge.oci.bookkeeping import REFERRER_TAG_PREFIX

REGEX_PREFIX = "re:"
_REFERRER_TAG = re.compile(r"^sha256-[0-9a-f]{64}(\.[A-Za-z0-9_-]+)?\Z")


def is_referrer_tag(tag: str) -> bool:
    return bool(_REFERRER_TAG.match(tag)) or tag.startswith(REFERRER_TAG_PREFIX)


def compile_pattern(pattern: str) -> Callable[[str], bool]:
    """A glob (``v1.*``) or, prefixed ``re:``, a regular expression matched against the whole tag."""
    if pattern.startswith(REGEX_PREFIX):
        try:
            rx = re.compile(pattern[len(REGEX_PREFIX):])
        except re.error as e:
            raise OcibridgeError(f"invalid tag pattern {pattern!r}: {e}") from None
        return lambda tag: rx.fullmatch(tag) is not None
    return lambda tag: fnmatch.fnmatchcase(tag, pattern)


def select_tags(tags: Iterable[str], spec: TagFilter) -> list[str]:
    """The tags ``spec`` keeps, newest first when ``latest`` ranks them, else sorted by name."""
    allow = [compile_pattern(p) for p in spec.allow]
    deny = [compile_pattern(p) for p in spec.deny]
    rng = parse_range(spec.semver) if spec.semver else None
    kept = []
    for tag in sorted(set(tags)):
        if is_referrer_tag(tag):
            continue
        if allow and not any(m(tag) for m in allow):
            continue
        if any(m(tag) for m in deny):
            continue
        if rng is not None:
            version = parse_version(tag)
            if version is None or not rng.matches(version):
                continue
        kept.append(tag)
    if spec.latest is None:
        return kept
    if spec.order == "tag":
        return sorted(kept, reverse=True)[: spec.latest]
    versioned = [(v, t) for t in kept if (v := parse_version(t)) is not None
                 and (spec.prereleases or not v.pre)]
    versioned.sort(key=lambda vt: (vt[0].key(), vt[1]), reverse=True)
    return [t for _, t in versioned[: spec.latest]]
