"""``X-Request-Id`` on every answer, as the Hub gives one: huggingface_hub prints it in every
error it raises ("(Request ID: ...)"), so a user reporting a failure names the request serve's
log can be searched for. An answer that has one already (a writer's, relayed by a reader) keeps it."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from starlette.types import Scope

from ocibridge.hubserver.answerheader import AnswerHeader

HEADER = b"x-request-id"


class RequestId(AnswerHeader):
    """ASGI middleware: a new id per HTTP request, in the scope (``ocibridge.request_id``) and its answer."""

    name = HEADER

    def begin(self, scope: Scope) -> Callable[[], bytes | None]:
        given = "Root=1-" + secrets.token_hex(12)
        scope["ocibridge.request_id"] = given
        said = given.encode()
        return lambda: said
