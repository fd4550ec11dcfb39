"""Names no writer may give or take through the Hub's API: serve's bookkeeping tags
(``ocibridge-*``) and cosign's evidence tags beside a commit (``sha256-<hex>``, ``.sig``,
``.att``, ``.sbom``: oci/bookkeeping.py). A registry keeps a signature as a tag like any other,
so without this rule any writer's ``delete_tag(repo, "sha256-<hex>.sig")`` would unsign a
commit (``ocibridge verify`` then says unsigned), and a ``create_tag`` of such a name would
plant a forged one. Only serve's signer (repo/evidence.py) writes them, through the store.

Every route that names a ref in its path (create/delete of a branch or tag, a preupload's, a commit's or a
super-squash's branch) is wrapped by :func:`refusing_reserved`; ``create_tag``'s name, sent in
the body, is checked by its route (writeroutes/refs.py) with :func:`reserved_why`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from ocibridge.hubserver.answers import branch_of, error
from ocibridge.oci.bookkeeping import PREFIX, is_bookkeeping, is_evidence

Handler = Callable[[Request], Awaitable[Response]]
#: cosign's evidence tags, as the refusal names them
EVIDENCE_PATTERN = "sha256-<64 hex>[.sig|.att|.sbom|.<suffix>]"


def reserved_why(name: str) -> str:
    """Why a writer may not name ``name`` as a branch or tag ("" when it may)."""
    if is_bookkeeping(name):
        return f"names starting with '{PREFIX}' are serve's own bookkeeping tags, never a branch or tag"
    if is_evidence(name):
        return (f"names like {EVIDENCE_PATTERN} are cosign's signature and evidence tags, "
                "which only serve's signer writes or deletes")
    return ""


def named_ref(request: Request) -> str | None:
    """The branch or tag a write route names in its path (None: it names none)."""
    params = request.path_params
    if "ref" in params:
        ref = str(params["ref"])
        return branch_of(ref) if params.get("kind") == "branch" else ref.removeprefix("refs/tags/")
    for key in ("revision", "branch"):
        if key in params:
            return branch_of(str(params[key]))
    return None


def refusing_reserved(answer: Handler) -> Handler:
    """``answer``, unless its path names a reserved ref: then the Hub's 400 naming the rule,
    before anything is read or written."""

    async def endpoint(request: Request) -> Response:
        name = named_ref(request)
        why = reserved_why(name) if name is not None else ""
        if why:
            return error(400, "BadRequest", f"Invalid reference name: {name}: {why}")
        return await answer(request)

    return endpoint
