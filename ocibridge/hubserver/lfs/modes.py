"""The upload mode preupload gives a file, as the Hub decides it (huggingface_hub's
``_fetch_upload_modes`` asks; its client then sends a ``regular`` file inline in the commit,
where it becomes a regular file: :mod:`ocibridge.hubserver.repo.regularfiles`, and an ``lfs`` one over LFS or Xet).

A file is ``lfs`` when the branch's ``.gitattributes`` puts its path in git-lfs
(:mod:`.gitattributes`), when it is :data:`LFS_MIN` bytes or more (the Hub keeps no file past
10 MiB in git: its git server refuses a push of one), or when its sample (its first 512 bytes,
which the client sends) holds a NUL byte, as git tells a binary file; else ``regular``. A branch
without a ``.gitattributes`` (a model pushed outside serve, or one whose ``.gitattributes`` was
deleted) is read as having the one the Hub gives every new model repository (:data:`HUB_RULES`,
which serve's ``create_repo`` commits too: :mod:`ocibridge.hubserver.repo.initial`).

A path the branch holds is answered with the ``oid`` the client compares with its own (an
``lfs`` file's SHA-256, a regular file's git blob id), so an unchanged file is neither sent nor
committed. A file the branch holds in git-lfs (every file of a manifest pushed outside serve)
that is asked for at its size is answered ``lfs`` with its SHA-256 so: the same bytes sent again
stay what they were rather than travel to become a regular file.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Literal

from ocibridge.hubserver.lfs.gitattributes import Rule, in_lfs, lfs_rules
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import HubFile, ModelFiles
from ocibridge.hubserver.repo.initial import GITATTRIBUTES
from ocibridge.hubserver.repo.regularfiles import git_blob_id

log = logging.getLogger("ocibridge.hubserver")

Mode = Literal["lfs", "regular"]
#: bytes from which a file goes to git-lfs whatever its kind (the Hub's git refuses a larger
#: file: "Your push was rejected because it contains files larger than 10 MiB")
LFS_MIN = 10 * 1024 * 1024
#: bytes of a ``.gitattributes`` read (the Hub's default one is 1.5 KiB): a larger one is not read
ATTRIBUTES_MAX = 1024 * 1024
ATTRIBUTES = ".gitattributes"
#: the rules of the .gitattributes a repository's first commit holds (:mod:`ocibridge.hubserver.repo.initial`),
#: for a branch without one (a model pushed outside serve, or one whose .gitattributes was deleted)
HUB_RULES = lfs_rules(GITATTRIBUTES.decode())


def upload_mode(path: str, size: int, sample: bytes, rules: tuple[Rule, ...]) -> Mode:
    """The Hub's mode for the file ``path`` of ``size`` bytes, whose first bytes are ``sample``."""
    if in_lfs(rules, path) or size >= LFS_MIN or b"\0" in sample:
        return "lfs"
    return "regular"


def answer(path: str, size: int, sample: bytes, rules: tuple[Rule, ...],
           held: HubFile | None) -> tuple[Mode, str | None]:
    """The mode of the file, and the oid of the branch's file of that path (None: none the
    client can compare with)."""
    mode = upload_mode(path, size, sample, rules)
    if held is None:
        return mode, None
    if mode == "regular" and held.git_blob is None and held.size == size and size > 0:
        mode = "lfs"  # held in git-lfs: the same bytes are named by their SHA-256, and stay there
    if mode == "lfs":
        return mode, held.sha256
    # the client sends an empty file as regular whatever it is told, and git names it alike
    return mode, held.git_blob or (git_blob_id(b"") if held.size == 0 else None)


def sample_of(item: dict[str, object]) -> bytes:
    """The sample a preupload item carries (base64), or none when it carries none readable."""
    text = item.get("sample")
    if not isinstance(text, str):
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def branch_rules(listing: tuple[Resolved, ModelFiles] | None) -> tuple[Rule, ...]:
    """What the ``.gitattributes`` at the top of a branch (its head and files; None: no commit
    yet) says of git-lfs: :data:`HUB_RULES` when it has none, none when it is larger than
    :data:`ATTRIBUTES_MAX`. Its bytes are read verified, from the model cache's snapshot or the
    registry."""
    f = listing[1].files.get(ATTRIBUTES) if listing is not None else None
    if listing is None or f is None:
        return HUB_RULES
    head = listing[0]
    if f.size > ATTRIBUTES_MAX:
        log.warning("%s: its %s is %d bytes, more than serve reads: no path is put in git-lfs by it",
                    head.repo.shown, ATTRIBUTES, f.size)
        return ()
    if f.local is not None:
        data = f.local.read_bytes()
    else:
        assert f.layer is not None
        data = head.repo.store.fetch_bytes(f.layer)
    return lfs_rules(data.decode("utf-8", "replace"))
