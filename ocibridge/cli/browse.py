"""Browsing a registry: ``repo ls`` (oras ``repo ls``), ``manifest fetch`` (oras ``manifest
fetch``, skopeo ``inspect --raw``) and ``diff`` (two models: files, config fields, tensors).

Registered on the main parser by :func:`register`, as every command group is (cli/parser.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ocibridge.cli.common import CommandAdder, add_transfer_flags, emit, plural, transfer_options
from ocibridge.core.lazyimport import LazyModule
from ocibridge.core.terminal import human_size, one_line
from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from ocibridge.api import browse as api
else:
    api = LazyModule("ocibridge.api.browse")


def register(command: CommandAdder) -> None:
    p = command("repo", cmd_repo)
    p.add_argument("action", choices=["ls"], help="ls: list the repositories (the registry's catalog)")
    p.add_argument("target", metavar="REGISTRY[/PREFIX]")
    add_transfer_flags(p)

    p = command("manifest", cmd_manifest)
    p.add_argument("action", choices=["fetch"], help="fetch: print the manifest's exact bytes (digest-verified)")
    p.add_argument("ref", metavar="REF")
    p.add_argument("--descriptor", action="store_true", help="print the manifest's descriptor instead")
    add_transfer_flags(p)

    p = command("diff", cmd_diff)
    p.add_argument("old", metavar="REF1")
    p.add_argument("new", metavar="REF2")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when the models differ, 0 when they do not (as git diff --exit-code)")
    p.add_argument("--max-read", metavar="SIZE",
                   help="read at most SIZE (500K, 64M) to compare configs and tensors; files and sizes are "
                        "compared all the same, and tensors left out are said (default: no cap)")
    add_transfer_flags(p)


def cmd_repo(args: argparse.Namespace) -> int:
    listed = api.list_repositories(args.target, transfer=transfer_options(args))
    if args.json:
        print(json.dumps(listed.as_dict(), indent=2, sort_keys=True))
    elif listed.repositories:
        print("\n".join(one_line(name) for name in listed.repositories))  # a newline in a name forges no line
    return 0


def cmd_manifest(args: argparse.Namespace) -> int:
    fetched = api.fetch_manifest(args.ref, transfer=transfer_options(args))
    if args.json or args.descriptor:
        print(json.dumps(fetched.as_dict(), separators=(",", ":") if args.descriptor else None,
                         indent=None if args.descriptor else 2, sort_keys=not args.descriptor))
        return 0
    sys.stdout.flush()
    sys.stdout.buffer.write(fetched.content)  # the exact bytes: their digest is the manifest's
    sys.stdout.buffer.flush()
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    result = api.diff(args.old, args.new, transfer=transfer_options(args), max_read=_max_read(args.max_read))
    emit(args, result.as_dict(), _diff_text(result))
    # opt-in, as git's: a difference is a result, not a failure (docs/cli.md: exit 1 is a failure)
    return 1 if args.exit_code and not result.same else 0


def _max_read(text: str | None) -> int | None:
    from ocibridge.cli.transfer_flags import parse_bytes

    try:
        return None if text is None else parse_bytes(text)
    except ValueError as e:
        raise UsageError(f"--max-read: {e}") from None


def _diff_text(d: api.ModelDiff) -> str:
    lines = [f"{d.old_reference} ({d.old_digest})", f"{d.new_reference} ({d.new_digest})"]
    if d.same:
        lines.append("no difference in files or config" + (" (same manifest)" if d.old_digest == d.new_digest
                                                          else ""))
        return "\n".join(lines)
    if d.files:
        lines.append("files:")
        lines += [line for f in d.files for line in _file_lines(f)]
    if d.config:
        lines.append("config:")
        lines += [f"  ~ {c.field}: {' -> '.join(_values(c.old, c.new))}" for c in d.config]
    if d.bytes_read or d.budget is not None:
        cap = "" if d.budget is None else f" (at most {human_size(d.budget)})"
        lines.append(f"read {human_size(d.bytes_read)}{cap} to compare configs and tensors")
    return "\n".join(lines)


def _file_lines(f: api.FileChange) -> list[str]:
    if f.old is None or f.new is None:
        sign, desc = ("+", f.new) if f.old is None else ("-", f.old)
        assert desc is not None
        return [f"  {sign} {f.path}  {human_size(desc.size)}  {desc.digest[:19]}"]
    lines = [f"  ~ {f.path}  {human_size(f.old.size)} -> {human_size(f.new.size)}  "
             f"{f.old.digest[:19]} -> {f.new.digest[:19]}"]
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for t in f.tensors or ():
        shape = t.new if t.change == "added" else t.old if t.change == "removed" else \
            (f"{t.old} -> {t.new}" if t.old != t.new else t.old)
        lines.append(f"      {marks[t.change]} tensor {t.name}  {shape}")
    if f.tensors is not None:
        differ = plural(len(f.tensors), "tensor differs", "tensors differ")
        lines.append(f"      ({differ}; {f.same_by_chunks} found the same by chunk digests)")
    if f.unread is not None:
        lines.append(f"      ({f.unread})")
    return lines


SHOWN = 120  # characters of a value on a line
_BOUNDARIES = ("[", "{", ", ", ": ")


def _values(old: object, new: object) -> tuple[str, str]:
    """Both sides of a changed field, each cut to one line. Two long values that share a long
    start (a list of digests whose third one changed) are shown from the element where they part,
    so the line shows what changed rather than the same prefix twice."""
    texts = ["(absent)" if v is None else json.dumps(v) for v in (old, new)]
    if all(len(t) <= SHOWN for t in texts):
        return texts[0], texts[1]
    shared = len(os.path.commonprefix(texts))
    head = texts[0][:shared]
    start = max([head.rfind(b) + len(b) for b in _BOUNDARIES if b in head], default=0)
    start = start if shared - start <= SHOWN // 2 else max(0, shared - SHOWN // 6)
    cut = [("…" if start else "") + t[start:start + SHOWN] + ("…" if len(t) > start + SHOWN else "")
           for t in texts]
    return cut[0], cut[1]
