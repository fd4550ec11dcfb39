"""What serve granted by signature, checked where a request shows it: a URL serve signed (an LFS
upload, a Xet xorb), a Xet token it handed out. Decided here, whoever holds the signer."""

from __future__ import annotations

from starlette.requests import Request

from ocibridge.hubserver.access import Denied
from ocibridge.hubserver.answers import bearer
from ocibridge.hubserver.signer import Signer


def require_signed(signer: Signer, request: Request, path: str, refused: str) -> str:
    """The client a URL ``signer`` signed for ``path`` names (its query); raises :class:`Denied`
    (403, ``refused``) when it is not signed so, or has expired."""
    q = request.query_params
    client = q.get("client", "")
    if not signer.url_allowed(path, q.get("expires"), q.get("signature"), client):
        raise Denied(403, refused)
    return client


def require_upload_url(signer: Signer, request: Request, path: str) -> None:
    """An LFS upload URL (one PUT, a part, a completion): signed for a write token, never open."""
    refused = "this upload URL is not signed by serve, or has expired: ask the batch API again"
    if not signer.key:
        raise Denied(403, refused)
    require_signed(signer, request, path, refused)


def require_token(signer: Signer, request: Request, scope: str, what: str) -> str:
    """The client a Xet token (``what``: access, write) for ``scope`` was granted to; raises
    :class:`Denied` (401) when the request's bearer is no valid one."""
    client = signer.granted(bearer(request), scope)
    if client is None:
        raise Denied(401, f"Invalid or expired Xet {what} token")
    return client
