"""A repository the upstream keeps gated or private stays so here (``--upstream-allow-gated``,
``--upstream-allow-private``): before anything of it is fetched, the request's reader is
asked about as serve's grants would decide it were the repository so here already
(:meth:`.servingside.ServingSide.upstream_refuses`: the Gate's), and the
repository's refs record is written private, or gated with the upstream's mode, so that every
request after, on any route, meets the rules of a repository made so here (access.py). A record is
never loosened from the upstream: a repository once private or gated here stays so until a writer
here changes it (``update_repo_settings``). A record written before the upstream's first commit of
the repository landed says ``upstream`` too: a fetch that fails then leaves a repository the
upstream still fills (upstream/proxy.py's rule 1), not one that looks made here."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ocibridge.hubserver.repo.refsrecord import read_record, write_record
from ocibridge.hubserver.repo.upstreamids import is_proxied

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.sources import Repository


def keep_access(repo: Repository, private: bool, gated: str) -> bool:
    """``repo``'s refs record made private (``private``) and gated (``gated``: "auto", "manual"),
    what it said kept (its gate's mode, its refs); whether it was written (False: it said so)."""
    from ocibridge.hubserver.upstream.commitfetch import writable

    record = read_record(repo)
    kept = dataclasses.replace(record, private=record.private or private, gated=record.gated or gated,
                               upstream=record.upstream or not is_proxied(repo))
    if kept == record:
        return False
    write_record(repo, writable(repo), kept)
    return True
