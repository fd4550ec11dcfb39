"""One header written on every HTTP answer that lacks it, as ASGI middleware: the shape the request
id and the proxy's stale warning share (a value made per request, read when the answer starts)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class AnswerHeader:
    """ASGI middleware: ``name`` on each HTTP answer, valued by what :meth:`begin` returned for its
    request when the answer starts (None: no header); an answer that has the header keeps its own."""

    name: bytes

    def __init__(self, app: ASGIApp):
        self.app = app

    def begin(self, scope: Scope) -> Callable[[], bytes | None]:
        """A request starts: what its answer's header will say, asked when the answer starts."""
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        value = self.begin(scope)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                said = value()
                if said is not None and not any(name.lower() == self.name for name, _ in headers):
                    message = {**message, "headers": [*headers, (self.name, said)]}
            await send(message)

        await self.app(scope, receive, sending)
