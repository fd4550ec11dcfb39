"""Reads of a commit whose fetch from the upstream is under way (:class:`Fetching`, raised by the
proxy's catalog instead of waiting for the whole commit to land):

- a file (``GET /REPO/resolve/REV/PATH``) is streamed from the fetch as it arrives (:mod:`.tee`:
  one upstream download, any number of readers; the last byte only once the file checked; a file
  that fails is a cut connection); a ``HEAD`` is answered from the upstream's listing (its size,
  its sha256 or git blob id as the ETag, the upstream's commit), as serve answers it once landed;
  a path the artifact does not keep is the upstream's answer;
- the commit's metadata (model_info, the tree, ...: ``GET``/``HEAD``) is asked of the upstream with
  serve's token and its answer passed on (the door's rules were decided when the fetch began), a
  model_info's ``siblings`` cut to the files the artifact keeps (as serve lists them once landed);
- anything else waits for the commit to land and is answered from the registry.

Once the commit landed (or its files left serve's Hub cache) every read is the registry's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ocibridge.hubserver.answers import byte_range, error, in_thread
from ocibridge.hubserver.upstream.tee import FileCut, FileFlight

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.ingest import Flight

#: the headers of the upstream's metadata answer passed on
PASSED = ("content-type", "x-repo-commit", "etag", "x-error-code", "x-error-message", "link", "x-total-count")
#: seconds a read waits for the fetch's listing before it waits for the commit instead
LISTING_WAIT = 60.0
#: seconds a read the failed fetch could not answer is told to wait
RETRY_AFTER = 5


class Fetching(Exception):  # noqa: N818 - a state the routes answer, not an error
    """The commit a read resolved to is being fetched from the upstream (``flight``)."""

    def __init__(self, flight: Flight, commit: str, upstream: str, token: str | None):
        super().__init__(f"commit {commit} is being fetched from the upstream")
        self.flight, self.commit, self.upstream, self.token = flight, commit, upstream.rstrip("/"), token

    async def answer(self, request: Request, landed: Callable[[], Awaitable[Response]]) -> Response:
        """``request`` answered while the commit is fetched; ``landed``: the route's own answer,
        once the registry holds the commit."""
        path = request.path_params.get("path")
        if request.method in ("GET", "HEAD") and path \
                and f"/resolve/{request.path_params.get('revision')}/" in request.url.path:
            fetch = self.flight.fetch
            f = await in_thread(self._file, path.strip("/"))
            if f is not None:
                return self._file_answer(request, f)
            if fetch is not None and fetch.listed.is_set() and fetch.files:
                return await self._forwarded(request)  # not a file of the artifact
        elif request.method in ("GET", "HEAD"):
            return await self._forwarded(request)
        await in_thread(self.flight.done.wait)
        if self.flight.error is not None:  # what the fetch ended with, as the Hub's "later"
            return error(503, None, f"{self.flight.error}", {"Retry-After": str(RETRY_AFTER)})
        return await landed()

    def _file(self, path: str) -> FileFlight | None:
        fetch = self.flight.fetch
        if fetch is None or not fetch.listed.wait(LISTING_WAIT):
            return None
        return fetch.files.get(path)

    def _file_answer(self, request: Request, f: FileFlight) -> Response:
        headers = {"X-Repo-Commit": self.commit, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if f.kind == "sha256":
            headers.update({"ETag": f'"{f.expected}"', "X-Linked-Etag": f'"{f.expected}"',
                            "X-Linked-Size": str(f.size)})
        else:
            headers["ETag"] = f'"{f.expected}"'
        wanted = byte_range(request.headers.get("range"), f.size)
        status, start, end = 200, 0, f.size
        if wanted is not None:
            if isinstance(wanted, str):
                return Response(status_code=416, headers={"Content-Range": f"bytes */{f.size}"})
            status, (start, end) = 206, wanted
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{f.size}"
        headers["Content-Length"] = str(end - start)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return StreamingResponse(_cut_on_failure(f.read(start, end)), status_code=status, headers=headers)

    async def _forwarded(self, request: Request) -> Response:
        """The upstream's answer to the same metadata read, with serve's token."""
        import httpx

        from ocibridge.hubserver.upstream.client import upstream_tls

        target = self.upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(timeout=60.0, follow_redirects=False, verify=upstream_tls()) as client:
            got = await client.request(request.method, target, headers=headers)
        passed = {k: v for k, v in got.headers.items() if k.lower() in PASSED}
        if "link" in passed:  # a page of a listing: the next page is asked of serve too
            passed["link"] = passed["link"].replace(self.upstream, str(request.base_url).rstrip("/"))
        body = got.content
        if got.status_code == 200 and "json" in got.headers.get("content-type", ""):
            body = await in_thread(self._as_served, body)
        return Response(body, status_code=got.status_code, headers=passed)

    def _as_served(self, body: bytes) -> bytes:
        """The upstream's JSON as serve answers it for a file in flight: no ``xetHash`` (the files
        come from here, by the resolve route, not from the upstream's Xet store), and a
        model_info's ``siblings`` and a listing's files cut to the files the artifact keeps (what
        serve lists once the commit landed: ``.gitattributes`` too)."""
        import json

        try:
            said = json.loads(body)
        except ValueError:
            return body
        fetch = self.flight.fetch
        kept = fetch.files if fetch is not None and fetch.listed.wait(LISTING_WAIT) and fetch.files else None
        if isinstance(said, dict) and isinstance(said.get("siblings"), list) and kept is not None:
            said["siblings"] = [s for s in said["siblings"] if isinstance(s, dict) and s.get("rfilename") in kept]
        if isinstance(said, list) and kept is not None:  # a tree or paths-info listing
            said = [e for e in said
                    if not (isinstance(e, dict) and e.get("type") == "file" and e.get("path") not in kept)]
        return json.dumps(_without_xet(said)).encode()


def _without_xet(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_xet(v) for k, v in value.items() if k != "xetHash"}
    if isinstance(value, list):
        return [_without_xet(v) for v in value]
    return value


def _cut_on_failure(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The file's bytes; where its fetch fails, the body ends short of its Content-Length (the
    server closes the connection: the client's size or hash check fails)."""
    try:
        yield from chunks
    except FileCut as e:
        import logging

        logging.getLogger("ocibridge.hubserver").warning("upstream: a streamed file cut short: %s", e)
        raise
