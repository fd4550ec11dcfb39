"""``X-Request-Id`` on every answer, as the Hub gives one: huggingface_hub prints it in every
error it raises ("(Request ID: ...)"), so a user reporting a failure names the request serve's
log can be searched for. An answer that has one already (a writer's, relayed by a reader) keeps it."""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"


class RequestId:
    """ASGI middleware: a new id per HTTP request, in the scope (``ocibridge.request_id``) and its answer."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = "Root=1-" + secrets.token_hex(12)
        scope["ocibridge.request_id"] = given

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == HEADER for name, _ in headers):
                    headers.append((HEADER, given.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
