"""Upstream ref names that would land on a registry tag serve keeps for itself: ``latest`` (main's
default tag, ``--default-tag``) for any ref but main, and the reserved ``ocibridge-*`` and cosign
tags. Such a ref is never tagged here (logged once a name): moving it would repoint main, or
serve's own bookkeeping, for every reader. It is read by its commit id instead."""

from __future__ import annotations

import logging
import threading

from ocibridge.oci.bookkeeping import is_reserved

log = logging.getLogger("ocibridge.hubserver")
_told: set[tuple[str, str]] = set()
_telling = threading.Lock()


def onto_serves_tag(name: str, tag: str, default_tag: str) -> bool:
    """Whether the upstream ref ``name``, whose registry tag would be ``tag``, lands on one of
    serve's own tags."""
    return (tag == default_tag and name != "main") or is_reserved(tag) or is_reserved(name)


def skipped(repo_id: str, name: str, commit: str, default_tag: str) -> None:
    """The operator told (once a repository and name) that the upstream's ref ``name`` is not tagged."""
    with _telling:
        first = (repo_id.lower(), name) not in _told
        _told.add((repo_id.lower(), name))
    if first:
        log.warning("upstream: %s: its ref %r (%s) is not tagged here: that name is serve's own tag (main is "
                    "--default-tag %s); read it by its commit id", repo_id, name, commit, default_tag)
