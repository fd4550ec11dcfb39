"""A commit whose fetch from the upstream is under way, read as it arrives (:class:`InFlight`, what
the proxy's catalog hands the read routes instead of waiting for the whole commit to land: a
:class:`.repo.arriving.Arriving`). The routes answer it by the rules they answer a landed commit
by, through the same functions (reading/routes.py):

- a file is one the fetch's listing holds (the files the artifact keeps), its bytes streamed from
  the fetch as they arrive (:mod:`.tee`: one upstream download, any number of readers; the last
  byte only once the file checked; a file that fails is a cut connection); any other path is the
  landed answer's 404;
- model_info and a tree page are asked of the upstream for the commit the door let in, by requests
  the proxy builds from that repository id, that commit and a path the listing holds
  (:meth:`.session.UpstreamSession.api`), never a client's path: ``siblings`` and a listing's
  files cut to those the artifact keeps (as serve lists them once landed), no ``xetHash``.

Once the commit landed every read is the registry's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urljoin, urlsplit

from ocibridge.hubserver.repo.arriving import SaidAbove
from ocibridge.hubserver.upstream.errors import UpstreamDown, UpstreamRefused
from ocibridge.hubserver.upstream.tee import FileCut, FileFlight
from ocibridge.stores.registry.nextpage import next_link

if TYPE_CHECKING:
    import httpx

    from ocibridge.hubserver.upstream.client import UpstreamHub
    from ocibridge.hubserver.upstream.commitfetch import Flight

#: the headers of the upstream's metadata answer passed on
PASSED = ("content-type", "x-repo-commit", "etag", "x-error-code", "x-error-message", "x-total-count")
#: seconds a read waits for the fetch's listing before it waits for the commit instead
LISTING_WAIT = 60.0
#: seconds a read the failed fetch could not answer is told to wait
RETRY_AFTER = 5
#: seconds a file's read waits for its first bytes before its answer begins (below a Hub client's
#: 10 s wait for headers): a fetch that fails at once (a redirect the address rule refuses) is then
#: the Hub's 503 saying why, not a body cut after its headers
FIRST_BYTES_WAIT = 5.0


def landed(flight: Flight) -> None:
    """Waits for ``flight``'s commit to land; what its fetch failed with, as the Hub's "later"."""
    flight.done.wait()
    if isinstance(flight.error, UpstreamRefused) and not flight.error.lasting:  # a quota's: its own 403/429
        raise flight.error
    if flight.error is not None:
        failed = UpstreamDown(f"{flight.error}")
        failed.retry_after = RETRY_AFTER
        raise failed


class ArrivingFile:
    """One file of the fetch as the read routes see it (:class:`.repo.arriving.ArrivingFile`)."""

    def __init__(self, flight: FileFlight):
        self._flight = flight
        self.size = flight.size
        self.lfs_sha256 = flight.expected if flight.kind == "sha256" else None
        self.git_blob = None if flight.kind == "sha256" else flight.expected

    def ready(self) -> None:
        """Waits a moment at most for the file's first bytes; :class:`UpstreamDown` (the Hub's 503,
        saying why) where its fetch failed before any."""
        why = self._flight.begun(FIRST_BYTES_WAIT)
        if why is not None:
            failed = UpstreamDown(why)
            failed.retry_after = RETRY_AFTER
            raise failed

    def read(self, start: int, end: int) -> Iterator[bytes]:
        return _cut_on_failure(self._flight.read(start, end))


class InFlight:
    """``repo_id``'s ``commit``, being fetched (``flight``), read through the proxy's session (``hub``)."""

    def __init__(self, flight: Flight, repo_id: str, commit: str, hub: UpstreamHub):
        self.flight, self.repo_id, self.commit, self.hub = flight, repo_id, commit, hub

    def files(self) -> Mapping[str, ArrivingFile] | None:
        fetch = self.flight.fetch
        if fetch is None or not fetch.listed.wait(LISTING_WAIT) or not fetch.files:
            return None
        return {path: ArrivingFile(f) for path, f in fetch.files.items()}

    def landed(self) -> None:
        landed(self.flight)

    def model_info(self, blobs: bool) -> SaidAbove:
        """The commit's model_info: the one the door read (no second ask), or with ``blobs`` asked."""
        said = self.flight.info
        if not blobs and isinstance(said, dict) and said.get("sha") == self.commit:
            import copy

            return SaidAbove(200, self._as_served(copy.deepcopy(said)), {"content-type": "application/json"})
        session = self.hub.session
        self.hub.charge(f"{self.repo_id}@{self.commit}")
        url = session.api(self.repo_id, "revision", self.commit)
        answer = session.get(url, f"{self.repo_id}@{self.commit}", {"blobs": "true"} if blobs else None)
        return self._said(answer)

    def tree(self, path: str, recursive: bool, expand: bool, cursor: str | None) -> SaidAbove:
        session = self.hub.session
        params = {"recursive": "true" if recursive else "false", "expand": "true" if expand else "false"}
        if cursor:
            params["cursor"] = cursor
        url = session.api(self.repo_id, "tree", self.commit, path)
        self.hub.charge(f"{self.repo_id}@{self.commit}")
        return self._said(session.get(url, f"{self.repo_id}@{self.commit}", params))

    def _said(self, answer: httpx.Response) -> SaidAbove:
        headers = {k: v for k, v in answer.headers.items() if k.lower() in PASSED}
        body = answer.content
        if answer.status_code == 200 and "json" in answer.headers.get("content-type", ""):
            body = self._as_served(self.hub.session.json(answer, f"{self.repo_id}@{self.commit}"))
            headers.pop("content-length", None)
        return SaidAbove(answer.status_code, body, headers, _next_cursor(answer))

    def _as_served(self, said: Any) -> bytes:
        """The upstream's JSON as serve answers it for a file in flight: no ``xetHash`` (the files
        come from here, by the resolve route, not from the upstream's Xet store), and a
        model_info's ``siblings`` and a listing's files cut to the files the artifact keeps (what
        serve lists once the commit landed: ``.gitattributes`` too)."""
        import json

        kept = self.files()
        if isinstance(said, dict) and isinstance(said.get("siblings"), list) and kept is not None:
            said["siblings"] = [s for s in said["siblings"] if isinstance(s, dict) and s.get("rfilename") in kept]
        if isinstance(said, list) and kept is not None:  # a tree listing
            said = [e for e in said
                    if not (isinstance(e, dict) and e.get("type") == "file" and e.get("path") not in kept)]
        return json.dumps(_without_xet(said)).encode()


def _next_cursor(answer: httpx.Response) -> str | None:
    """The cursor of the upstream's next page (its ``Link: <...?cursor=C>; rel="next"``): serve's
    own link to its next page carries it, nothing else of the upstream's URL."""
    link = next_link(answer)
    if link is None:
        return None
    found = parse_qs(urlsplit(urljoin(str(answer.url), link)).query).get("cursor")
    return found[0] if found else None


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

        from ocibridge.hubserver.accesslog import CutSaid

        logging.getLogger("ocibridge.hubserver").warning("upstream: a streamed file cut short: %s", e)
        raise CutSaid(str(e)) from None
