"""A reader's writes, sent to the writer (``ocibridge serve --writer URL``).

A registry has no compare-and-swap on a tag, so two processes moving one branch at once lose
a commit. Commits, ref creations and every upload that a commit will name therefore go to one
process, the writer; every other process (a reader) answers reads itself and streams each write
request to the writer as it arrives, and the writer's answer back as it comes (constant
memory both ways, whatever the size of an LFS object). The client's ``Authorization`` goes
with it (the writer decides who may write), and ``X-Forwarded-Host``/``-Proto`` say where the
client called, so the URLs the writer hands out (LFS hrefs, the Xet CAS URL) lead back to the
reader the client talks to (:mod:`.trusted`, on the writer, believes them only from its readers).

Which routes write is said where they are routed (:meth:`.app.ServeApp.writing`): one table.
"""

from __future__ import annotations

import logging

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ocibridge.hubserver.answers import error

log = logging.getLogger("ocibridge.hubserver")

#: headers about one connection, never passed on (RFC 9110 7.6.1); the host, which is the writer's;
#: the date, which the server answering the client adds itself
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "proxy-connection", "host", "expect", "date"})
#: the header a forwarded write carries: the serve it reaches takes the write or
#: answers 503, never forwards it again. A peer URL that leads back to a standby (a load balancer
#: in front of several serves, an alias of its own address) so costs one hop and an error, not a
#: request sent round forever. A client that sets it itself only loses the forwarding.
FORWARDED = "x-ocibridge-forwarded"
#: a commit may take as long as its push: no read timeout; a writer that does not accept is down
TIMEOUT = httpx.Timeout(None, connect=10.0)


class Forwarder:
    """Sends requests to the writer at ``writer`` (``http(s)://HOST[:PORT]``)."""

    def __init__(self, writer: str) -> None:
        self.writer = writer.rstrip("/")
        self._client: httpx.AsyncClient | None = None  # made in the server's event loop, at the first write

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False, trust_env=False,
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=32))
        return self._client

    async def forward(self, request: Request, unreachable: Response | None = None) -> Response:
        """The writer's answer to ``request``, its status, headers and body as they come; a
        writer that cannot be reached is the Hub's 503 (or ``unreachable``)."""
        raw = request.scope.get("raw_path") or request.url.path.encode()
        target = raw.split(b"?", 1)[0].decode("latin-1")
        if FORWARDED in request.headers:
            log.warning("%s %s: forwarded here and not taken here: not sent on to %s (a --peer or --writer "
                        "that leads back to a serve that cannot take writes)", request.method, target, self.writer)
            return error(503, None, "this write was forwarded to a serve that does not take writes now, "
                                    "which sends no write on twice; try again shortly", {"Retry-After": "5"})
        query = request.scope.get("query_string", b"").decode("latin-1")
        url = f"{self.writer}{target}" + (f"?{query}" if query else "")
        headers = [(name, value) for name, value in request.headers.items() if name.lower() not in HOP_BY_HOP]
        headers += [("x-forwarded-host", request.url.netloc), ("x-forwarded-proto", request.url.scheme),
                    (FORWARDED, "1")]
        has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
        sent = self.client.build_request(request.method, url, headers=headers,
                                         content=request.stream() if has_body else None)
        try:
            answer = await self.client.send(sent, stream=True)
        except httpx.HTTPError as e:
            log.warning("%s %s: the writer %s did not answer: %s", request.method, target, self.writer, e)
            if unreachable is not None:
                return unreachable
            return error(503, None, f"the writer this serve sends writes to ({self.writer}) did not answer; "
                                    "try again shortly", {"Retry-After": "5"})
        response = StreamingResponse(answer.aiter_raw(), status_code=answer.status_code,
                                     background=BackgroundTask(answer.aclose))
        response.raw_headers = [(name, value) for name, value in answer.headers.raw  # each, twice or not
                                if name.decode("latin-1").lower() not in HOP_BY_HOP]
        return response

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
