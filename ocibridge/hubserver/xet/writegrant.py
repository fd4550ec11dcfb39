"""A Xet write grant: the CAS URL, a write token for one repository and its expiry, granted to
the request's client. One place, so that what ``xet-write-token`` answers (huggingface_hub,
hf_xet: :meth:`.upload.XetUpload.token`) and what the LFS batch answers a client offering
``xet`` (@huggingface/hub: lfs/routes.py) are the same grant, of the scope the upload routes
check (``write REPO``)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request

from ocibridge.hubserver.answers import bearer
from ocibridge.hubserver.signer import Signer


def write_grant(grants: Signer, base: Callable[[Request], str], request: Request,
                repo_id: str) -> tuple[str, str, int]:
    """(CAS URL, token, expiry) for ``repo_id``; who may write is checked before."""
    token, expires = grants.grant(f"write {repo_id}", grants.client_of(bearer(request)))
    return f"{base(request)}/xet-write/{repo_id}", token, expires
