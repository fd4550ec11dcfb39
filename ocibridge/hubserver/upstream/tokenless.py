"""An upstream that wants a token serve was not given (``--upstream-token-file``): its 401 to a
request that sent none is no answer about the repository (the Hub's own 401s for a repository it
hides say ``X-Error-Code: RepoNotFound``), so the proxy answers the Hub's "upstream unavailable"
(503, Retry-After), never "not found", and the operator is told once in the log why."""

from __future__ import annotations

import logging
import threading

from ocibridge.core import environment
from ocibridge.hubserver.upstream.errors import UpstreamDown

log = logging.getLogger("ocibridge.hubserver")
#: the Hub's codes of a 401 about one repository or file: an answer, not a door shut to everyone
ABOUT_A_REPOSITORY = frozenset({"RepoNotFound", "RevisionNotFound", "EntryNotFound", "GatedRepo"})
_told: set[str] = set()
_telling = threading.Lock()


class UpstreamNeedsToken(UpstreamDown):
    """The upstream answered 401 to a request that carried no token: it is unavailable to this
    serve until the operator gives it one."""


def check_tokenless(status: int, error_code: str, token: str | None, upstream: str, what: str) -> None:
    """:class:`UpstreamNeedsToken` for an upstream's 401 to a request serve sent without a token,
    unless it names what it does not have (:data:`ABOUT_A_REPOSITORY`); the first of an upstream's
    logged (one line for the operator)."""
    if status != 401 or token or error_code in ABOUT_A_REPOSITORY:
        return
    with _telling:
        first = upstream not in _told
        _told.add(upstream)
    if first:
        log.warning("upstream: %s answered 401 and no token was sent: give serve one with --upstream-token-file "
                    "(or $%s); until then its repositories are answered as unavailable (503)",
                    upstream, environment.SERVE_UPSTREAM_TOKEN)
    raise UpstreamNeedsToken(f"{what}: the upstream {upstream} wants a token and this serve sends none "
                             "(--upstream-token-file): it is unavailable here")
