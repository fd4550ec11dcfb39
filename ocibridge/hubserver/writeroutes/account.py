"""The account's routes: ``whoami-v2`` (who the token is) and ``validate-yaml`` (a model card's
metadata checked as the Hub checks it). Neither touches a repository, so they need nothing of
:class:`ocibridge.hubserver.repo.repos.Repos`: the gate alone."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ocibridge.hubserver.access import Gate
from ocibridge.hubserver.answers import error, json_body
from ocibridge.hubserver.cards import read_card


class AccountRoutes:
    """``/api/whoami-v2`` and ``/api/validate-yaml``."""

    def __init__(self, gate: Gate):
        self.gate = gate

    async def whoami(self, request: Request) -> Response:
        return JSONResponse(self.gate.who(request).whoami())

    async def validate_yaml(self, request: Request) -> Response:
        """A README's metadata checked as the Hub checks it (:mod:`.cards`): 400 with the errors,
        else 200 with the warnings; as text (``- Error: ...`` lines) to a client that asks for
        text, as ``ModelCard.validate`` does (its ValueError is that text), else as JSON
        (``{"errors": [{"message"}], "warnings": [...]}``, which ``HfApi`` reads)."""
        body = await json_body(request)
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, str):
            return error(400, None, "expected {'content': README text, 'repoType': 'model'}")
        kind = body.get("repoType") if isinstance(body, dict) else None
        found = read_card(content, kind if isinstance(kind, str) else "model")
        status = 400 if found.errors else 200
        if "text/plain" in request.headers.get("accept", "") and "json" not in request.headers.get("accept", ""):
            lines = [f"- Error: {e}" for e in found.errors] + [f"- Warning: {w}" for w in found.warnings]
            return PlainTextResponse("\n".join(lines), status_code=status)
        return JSONResponse({"errors": [{"message": e, "type": "error"} for e in found.errors],
                             "warnings": [{"message": w, "type": "warning"} for w in found.warnings]},
                            status_code=status)
