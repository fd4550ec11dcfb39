"""What a pull into a non-empty directory does with a file that is already there.

tar and oras refuse or ask; a model pull must never silently replace a user's edited config.
The decision is made for every path before anything is moved into place, so a refusal leaves
the directory exactly as it was (the commit step calls :func:`plan_commit` first).

| existing path | ``refuse`` (default) | ``overwrite`` | ``keep`` (``-k``) |
|---|---|---|---|
| none | write | write | write |
| same content (file, or symlink with the same target) | unchanged | unchanged | unchanged |
| different | error, nothing written | replaced | left as it is |

Whatever the policy, a file to be replaced that is read-only (no write bit, or not this user's
to write), or a directory a file lands in that is, refuses the whole pull before anything moves,
as a read-only output file does (:func:`.fsutil.refuse_read_only_target`): rename(2) would
replace it regardless of its mode, and root would write into it.

A pull into one file (an archive: ``.carton``, ``.mlarchive``) follows the same rule: an
existing file is replaced only with ``overwrite``, unless it already is, byte for byte, the
archive the pull builds (the same model pulled again); ``keep`` does not keep a different one
silently (a pull's result would name a file that is not the model): it is refused too.
"""

from __future__ import annotations

import filecmp
import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ocibridge.core.fsutil import refuse_read_only_directory, refuse_read_only_target
from ocibridge.errors import OcibridgeError, UsageError


class OnExisting(str, Enum):
    REFUSE = "refuse"
    OVERWRITE = "overwrite"
    KEEP = "keep"


class WouldOverwrite(OcibridgeError):
    """A pull would replace files that differ from the artifact's."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        super().__init__(
            f"{shown}: already there with other content; pass --overwrite to replace, "
            "or -k/--keep-old-files to keep them")


class FileExists(OcibridgeError):
    """A pull into a file (an archive) that is there already with other content."""

    def __init__(self, path: str, why: str):
        self.path = path
        super().__init__(f"{path}: already there ({why}); pass --overwrite (or --force) to replace it")


@dataclass
class CommitPlan:
    write: list[str] = field(default_factory=list)  # new or to be replaced
    unchanged: list[str] = field(default_factory=list)  # already there, same content
    kept: list[str] = field(default_factory=list)  # differing, left alone (-k)


def same_content(staged: Path, existing: Path) -> bool:
    """Whether ``existing`` already is what ``staged`` would put there."""
    if staged.is_symlink() or existing.is_symlink():
        return staged.is_symlink() and existing.is_symlink() and os.readlink(staged) == os.readlink(existing)
    if not existing.is_file():
        return False
    same_mode = (staged.stat().st_mode & 0o111 != 0) == (existing.stat().st_mode & 0o111 != 0)
    return same_mode and filecmp.cmp(staged, existing, shallow=False)


def plan_commit(staging: Path, out: Path, files: list[str], policy: OnExisting) -> CommitPlan:
    """Decide every path before any is moved; raise :class:`WouldOverwrite` listing every path
    that ``refuse`` forbids to replace."""
    plan = CommitPlan()
    refused: list[str] = []
    for rel in sorted(files):
        existing = out / rel
        if not (existing.exists() or existing.is_symlink()):
            plan.write.append(rel)
        elif same_content(staging / rel, existing):
            plan.unchanged.append(rel)
        elif policy is OnExisting.OVERWRITE:
            plan.write.append(rel)
        elif policy is OnExisting.KEEP:
            plan.kept.append(rel)
        else:
            refused.append(rel)
    if refused:
        raise WouldOverwrite(refused)
    _refuse_read_only(out, plan.write)
    return plan


def _refuse_read_only(out: Path, write: list[str]) -> None:
    """Each file to be replaced and each directory a file lands in, judged as a single output
    file is; the first refusal is raised, naming the others refused so."""
    refusals: list[tuple[Path, UsageError]] = []
    judged: set[Path] = set()
    for rel in write:
        path = out / rel
        parent = path.parent
        while parent != out and not (parent.exists() or parent.is_symlink()):
            parent = parent.parent  # the nearest directory already there: the one written into
        for check, target in ((refuse_read_only_directory, parent), (refuse_read_only_target, path)):
            if target in judged or (target is path and path.is_symlink()):  # a link is replaced, not its target
                continue
            judged.add(target)
            try:
                check(target)
            except UsageError as e:
                refusals.append((target, e))
    if not refusals:
        return
    others = [str(path) for path, _ in refusals[1:]]
    if not others:
        raise refusals[0][1]
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    raise UsageError(f"{refusals[0][1]}; refused so too: {shown}")
