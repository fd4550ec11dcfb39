"""The upstream's Xet store as a reader asks it (the CAS API huggingface_hub's hf_xet speaks; the
Hub's, and ``ocibridge serve``'s own: hubserver/xet/routes.py):

- a read grant for a commit: ``GET {upstream}/api/models/{repo}/xet-read-token/{commit}`` with
  serve's token, answered as ``X-Xet-Cas-Url``, ``X-Xet-Access-Token`` and
  ``X-Xet-Token-Expiration`` (or the same as JSON: ``casUrl``, ``accessToken``, ``exp``);
- a file's reconstruction: ``GET {cas}/v1/reconstructions/{xet hash}`` with the grant's token (a
  ``Range`` of the file's bytes): its terms in order, each a range of chunks of a xorb, and, per
  xorb, where its chunks' bytes are (a URL and the byte range there, its end inclusive).

The answers are the upstream's: each is read into frozen values, checked for shape, before a byte
is fetched; one that is not what the protocol says is one error line."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.core.addressrule import AddressRefused
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.upstream.errors import UpstreamDown
from ocibridge.hubserver.upstream.fileget import XetUnavailable
from ocibridge.hubserver.upstream.session import bounded_get, later, refused

if TYPE_CHECKING:
    import httpx

#: seconds before its expiry a grant is asked again (huggingface_hub's margin)
MARGIN = 60


class Transient(Exception):  # noqa: N818 - a state: the fetch asks again
    """An answer worth asking again for (a 5xx, a cut, an expired URL): the fetch goes on from the
    chunk it reached."""


@dataclass(frozen=True)
class Grant:
    cas: str  # the CAS URL: reconstructions are asked under it
    token: str
    expires: float  # seconds since the epoch


@dataclass(frozen=True)
class Term:
    """Chunks ``[first, end)`` of the xorb ``xorb``: ``length`` bytes of the file, unpacked."""

    xorb: str
    first: int
    end: int
    length: int


@dataclass(frozen=True)
class Span:
    """Where chunks ``[first, end)`` of a xorb are: bytes ``start``..``last`` (inclusive) of ``url``."""

    url: str
    first: int
    end: int
    start: int
    last: int


@dataclass(frozen=True)
class Reconstruction:
    skip: int  # bytes of the first term before the range asked for
    terms: tuple[Term, ...]
    spans: dict[str, tuple[Span, ...]]  # by xorb

    def span_of(self, term: Term) -> Span:
        """The place that holds the term's chunks."""
        for span in self.spans.get(term.xorb, ()):
            if span.first <= term.first and term.end <= span.end:
                return span
        raise OcibridgeError(f"the upstream's reconstruction names no place for chunks {term.first}-{term.end} "
                             f"of xorb {term.xorb}")


class Grants:
    """The read grant of one commit at the upstream, asked once and again before it expires."""

    def __init__(self, http: httpx.Client, route: str, headers: dict[str, str]):
        self._http, self.route, self._headers = http, route, headers
        self._lock = threading.Lock()
        self._grant: Grant | None = None

    def current(self, renew: bool = False) -> Grant:
        """The grant, asked anew when ``renew`` or near its expiry. :class:`XetUnavailable` when
        the upstream grants no Xet read (a 4xx: it has no Xet, or not for this commit)."""
        with self._lock:
            grant = self._grant
            if grant is not None and not renew and grant.expires - MARGIN > time.time():
                return grant
            try:
                answer = bounded_get(self._http, self.route, "the Xet grant", self.route, headers=self._headers)
            except AddressRefused:
                raise
            except UpstreamDown as e:
                raise Transient(str(e)) from None
            if refused(answer.status_code):
                raise XetUnavailable(f"{self.route} answered {answer.status_code}")
            if answer.status_code != 200:
                raise Transient(f"{self.route} answered {answer.status_code}")
            self._grant = grant = _grant_of(answer)
            return grant


def _grant_of(answer: httpx.Response) -> Grant:
    said: dict[str, Any] = {}
    if "json" in answer.headers.get("content-type", ""):
        try:
            body = boundedjson.loads(answer.content, "the upstream's Xet grant")
            said = body if isinstance(body, dict) else {}
        except ValueError:
            pass
    cas = answer.headers.get("x-xet-cas-url") or said.get("casUrl")
    token = answer.headers.get("x-xet-access-token") or said.get("accessToken")
    expires = answer.headers.get("x-xet-token-expiration") or said.get("exp")
    try:
        when = float(expires)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        when = 0.0
    if not isinstance(cas, str) or not cas.startswith(("http://", "https://")) or not isinstance(token, str) \
            or not when:
        raise XetUnavailable("the upstream's Xet grant names no CAS URL, token and expiry")
    return Grant(cas.rstrip("/"), token, when)


def reconstruction(http: httpx.Client, grant: Grant, name: str, start: int, size: int) -> Reconstruction:
    """The terms of bytes ``start``.. of the file of Xet hash ``name`` (``size`` bytes).
    :class:`Transient` for an answer worth asking again (a 401: the grant is renewed first),
    :class:`XetUnavailable` for a name the store does not give (the file goes on by resolve,
    from where it is)."""
    headers = {"Authorization": f"Bearer {grant.token}"}
    if start:
        headers["Range"] = f"bytes={start}-{size - 1}"
    where = f"{grant.cas}/v1/reconstructions/{name}"
    try:
        answer = bounded_get(http, where, "a reconstruction", grant.cas, headers=headers)
    except AddressRefused:  # the store's place refused by the address rule: never asked again
        raise
    except UpstreamDown as e:
        raise Transient(str(e)) from None
    if answer.status_code == 401 or later(answer.status_code):  # 401: the grant expired
        raise Transient(f"{where} answered {answer.status_code}")
    if answer.status_code in (403, 404):
        raise XetUnavailable(f"{where} answered {answer.status_code}")
    if answer.status_code not in (200, 206):
        raise OcibridgeError(f"{where} answered {answer.status_code}")
    try:
        return _parsed(boundedjson.loads(answer.content, "the upstream's reconstruction"))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise OcibridgeError(f"{where}: not a reconstruction ({e})") from None


def _parsed(said: dict[str, Any]) -> Reconstruction:
    terms = tuple(Term(str(t["hash"]), _count(t["range"]["start"]), _count(t["range"]["end"]),
                       _count(t["unpacked_length"])) for t in said["terms"])
    spans = {str(xorb): tuple(Span(str(f["url"]), _count(f["range"]["start"]), _count(f["range"]["end"]),
                                   _count(f["url_range"]["start"]), _count(f["url_range"]["end"]))
                              for f in places)
             for xorb, places in said["fetch_info"].items()}
    if any(t.end <= t.first for t in terms) or any(s.last < s.start or s.end <= s.first
                                                   for places in spans.values() for s in places):
        raise ValueError("an empty range")
    return Reconstruction(_count(said.get("offset_into_first_range", 0)), terms, spans)


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value
