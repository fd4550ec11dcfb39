"""Which paths a ``.gitattributes`` puts in git-lfs (``filter=lfs``), read as git reads it
(gitattributes(5)), so preupload answers as the Hub does for a repository that has one.

A pattern without ``/`` matches a file's name at any depth; one with ``/`` (a leading one only
anchors it) matches the path from the top. ``*`` and ``?`` stop at ``/``; ``**/``, ``/**/`` and a
trailing ``/**`` cross folders; ``[...]`` is a class; ``\\`` quotes. A pattern ending in ``/``
names a folder, which git never matches against the files inside it. Of the lines that match a
path, the last that sets (``filter=…``), unsets (``-filter``) or unspecifies (``!filter``) the
filter decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One line's say on the filter: its pattern, and whether it puts what it matches in git-lfs."""

    pattern: re.Pattern[str]
    by_name: bool  # no "/" in the pattern: matched against a file's name, at any depth
    lfs: bool


def lfs_rules(text: str) -> tuple[Rule, ...]:
    """The lines of a ``.gitattributes`` that say something of the filter, in order."""
    rules: list[Rule] = []
    for raw in text.splitlines():
        fields = raw.split()
        if not fields or fields[0].startswith("#") or fields[0].startswith("[attr]"):
            continue  # a comment, or a macro's definition (which names no path)
        pattern, attributes = fields[0], fields[1:]
        said = [_filter_of(a) for a in attributes if _filter_of(a) is not None]
        # a negative pattern is refused by git; one ending in "/" names a folder, never a file
        if not said or pattern.startswith("!") or pattern.endswith("/"):
            continue
        by_name = "/" not in pattern
        rules.append(Rule(re.compile(_regex(pattern.lstrip("/"))), by_name, said[-1] == "lfs"))
    return tuple(rules)


def in_lfs(rules: tuple[Rule, ...], path: str) -> bool:
    """Whether the last of ``rules`` matching ``path`` puts it in git-lfs."""
    name = path.rsplit("/", 1)[-1]
    for rule in reversed(rules):
        if rule.pattern.fullmatch(name if rule.by_name else path):
            return rule.lfs
    return False


def _filter_of(attribute: str) -> str | None:
    """What one attribute says of the filter: its value (``filter=lfs``), ``""`` when it unsets
    or unspecifies it, None when it is another attribute."""
    if attribute.startswith("filter="):
        return attribute[len("filter="):]
    return "" if attribute in ("-filter", "!filter") else None


def _regex(pattern: str) -> str:
    """A regular expression of the paths ``pattern`` matches (git's wildmatch, a path's ``/``
    matched only by ``/``, ``**`` and a class never)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and whole:  # "**" as a whole segment crosses folders
                if j == n:
                    out.append(".*")
                else:
                    out.append("(?:[^/]*/)*")  # "**/": no folder, or any
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            klass, i = _class(pattern, i)
            out.append(klass)
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _class(pattern: str, start: int) -> tuple[str, int]:
    """The class ``[...]`` at ``start`` as a regular expression, and where the pattern goes on;
    a ``[`` that opens no class is itself."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] in "!^"
    if negated:
        i += 1
    first = i
    while i < len(pattern) and (pattern[i] != "]" or i == first):
        i += 2 if pattern[i] == "\\" and i + 1 < len(pattern) else 1
    if i >= len(pattern):
        return re.escape("["), start + 1
    inside = pattern[first:i]
    body, k = [], 0
    while k < len(inside):
        if inside[k] == "\\" and k + 1 < len(inside):
            body.append(re.escape(inside[k + 1]))
            k += 2
        elif inside[k] == "-" and 0 < k < len(inside) - 1:
            body.append("-")  # a range
            k += 1
        else:
            body.append(re.escape(inside[k]))
            k += 1
    return f"(?!/)[{'^' if negated else ''}{''.join(body)}]", i + 1
