"""Which paths of a commit a repository's ``.gitignore`` ignores: preupload's ``shouldIgnore``,
on which huggingface_hub leaves a file out of the commit (hf_api.py create_commit).

The rules are those the commit will hold: huggingface_hub sends them as ``gitIgnore`` when the
commit adds a ``.gitignore`` (or the caller passes ``gitignore_content``: _commit_api.py
_fetch_upload_modes); otherwise the branch's own ``.gitignore`` is the one, as the Hub reads it.
Matched by pathspec's ``GitIgnoreSpec`` (git's own rules: negation, anchoring, folders), not a
pattern language of serve's.
"""

from __future__ import annotations

from collections.abc import Callable

#: the file whose rules preupload answers by (the repository's top folder only, as the Hub's)
GITIGNORE = ".gitignore"
#: bytes of a branch's .gitignore read (one larger is not read: nothing is ignored)
GITIGNORE_MAX = 1024 * 1024


def ignoring(rules: str | None) -> Callable[[str], bool]:
    """Whether a path (of the repository, ``/``-separated) is ignored by ``rules``, the text of
    a ``.gitignore`` (None or empty: none is)."""
    if not rules:
        return lambda path: False
    from pathspec import GitIgnoreSpec  # loaded by the first commit with rules: not at serve's start

    spec = GitIgnoreSpec.from_lines(rules.splitlines())
    return lambda path: bool(spec.match_file(path))
