"""The one session a proxy holds with its upstream Hub: one httpx client (one TLS context, one
connection pool) for every request serve sends there: the door's model_info, the tree listing, the
commit facts, the files' bytes, the reads answered while a commit is in flight.

Three rules hold for every request, here, once:

- **built, never forwarded**: a URL is made by :meth:`UpstreamSession.api` from a repository's key
  (``acme/x``, a dataset's ``datasets/acme/x``: its type picks ``/api/models/`` or ``/api/datasets/``),
  a route word, a revision and a file path, each segment checked (:func:`checked_segments`) and
  quoted; no client's path or query reaches the upstream;
- **the token to its own origin only**: serve's upstream token is sent where the scheme, host and
  port are the upstream's (:meth:`UpstreamSession.auth_for`), never to a redirect's or a page
  link's other origin;
- **checked addresses**: a redirect's or a Xet answer's URL is connected only where its host
  resolves to addresses of the kinds :mod:`ocibridge.core.addressrule` allows (public, and the upstream's own),
  through a proxy the environment names too (:mod:`ocibridge.core.proxiedcheck`);
- **bounded answers**: every answer read into memory is capped after decoding (:func:`bounded_get`),
  and every JSON answer is read by :mod:`ocibridge.core.boundedjson`; one too large, nested too
  deep, or no JSON, is :class:`.errors.UpstreamDown` (the Hub's 503: the upstream did not answer
  usably), never a ``RecursionError`` or an exhausted memory.

And one reading of a status (:func:`later`, :func:`refused`) every caller decides by, and one
window of the upstream's own limit (its 429's ``Retry-After``: :mod:`.ratewindow`) every request obeys."""

from __future__ import annotations

import functools
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ocibridge.core import boundedjson
from ocibridge.core.addressrule import AddressRule
from ocibridge.core.proxiedcheck import checked_client_options
from ocibridge.hubserver.repo.reponames import API_PARTS, hub_id, type_of
from ocibridge.hubserver.upstream.errors import UpstreamAddressRefused, UpstreamDown
from ocibridge.hubserver.upstream.ratewindow import RateWindow, busy, retry_after

if TYPE_CHECKING:
    import httpx

#: seconds to connect, and to wait for each read of an answer
TIMEOUT = (10.0, 60.0)
#: pauses a fetch's ask waits out (each a 429's Retry-After) before it fails
PAUSES = 3
#: routes the proxy asks the upstream under ``/api/models/REPO/`` (a dataset's: ``/api/datasets/REPO/``)
ROUTES = frozenset({"revision", "tree", "commits", "refs", "xet-read-token"})


@functools.cache
def upstream_tls() -> ssl.SSLContext:
    """The TLS context of the upstream's session (httpx's defaults: certifi, or
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``), loaded once."""
    import httpx

    return httpx.create_ssl_context()


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port: the token goes only where these are the upstream's."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def checked_segments(path: str, what: str) -> list[str]:
    """``path``'s segments, each a name (no empty, ``.`` or ``..`` segment, no control character):
    :class:`ValueError` else. The one check every path the proxy puts in an upstream URL passes."""
    parts = path.split("/")
    if any(p in ("", ".", "..") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in p) for p in parts):
        raise ValueError(f"{what} {path!r} is not a path the proxy asks the upstream for")
    return parts


def later(status: int) -> bool:
    """The one reading of an upstream status as "ask again later": a 429 or a 5xx (the upstream
    busy or down: retried, or the Hub's 503 here). Any other 4xx is the upstream's final answer
    (not found, refused: never retried); a signed URL's 401 or 403 is its expiry, read so by its
    caller (xetcas.py, xetfetch.py)."""
    return status == 429 or status >= 500


def refused(status: int) -> bool:
    """The upstream's final answer that it will not give what was asked (a 4xx other than 429)."""
    return 400 <= status < 500 and not later(status)


def bounded_get(http: httpx.Client, url: str, what: str, upstream: str, *, params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> httpx.Response:
    """``GET url`` (the event hooks run: a pause waited out), its body read into memory only up to
    ``$OCIBRIDGE_MAX_RESPONSE_BYTES`` (16 MiB) after decoding, as a registry's answers are: a
    larger answer, or a small gzip that inflates past it, is :class:`UpstreamDown`, never read whole."""
    import httpx

    from ocibridge.errors import RegistryError
    from ocibridge.stores.registry.bodies import read_bounded

    try:
        answer = http.send(http.build_request("GET", url, params=params, headers=headers), stream=True)
        read_bounded(answer, f"{what}: the upstream {upstream}")
    except RegistryError as e:
        raise UpstreamDown(str(e)) from None
    except httpx.HTTPError as e:
        raise UpstreamDown(f"{what}: the upstream {upstream} did not answer ({e})") from None
    return answer


class UpstreamSession:
    """The client every request to the upstream at ``url`` goes through (with ``token``);
    ``kinds``: the kinds of address the upstream is taken to be (:class:`.AddressRule`)."""

    def __init__(self, url: str, token: str | None, kinds: frozenset[str] | None = None):
        import httpx

        self.url = url.rstrip("/")
        self.token = token
        self._home = origin(self.url)
        self.rule = AddressRule(self.url, kinds, refusal=UpstreamAddressRefused)
        self.window = RateWindow()  # the upstream's last 429: no request to it until it closes
        #: no redirect followed: each answer is handled where it is (a CDN's URL without the token);
        #: every request, the fetches' too, waits out the upstream's window and may open it
        self.http = httpx.Client(timeout=httpx.Timeout(TIMEOUT[1], connect=TIMEOUT[0]), follow_redirects=False,
                                 **checked_client_options(self.rule, verify=upstream_tls()),
                                 event_hooks={"request": [self._waited], "response": [self._limited]})

    def close(self) -> None:
        self.http.close()

    def _waited(self, request: httpx.Request) -> None:
        if self.at_home(str(request.url)):
            self.window.wait()

    def _limited(self, answer: httpx.Response) -> None:
        if answer.status_code == 429 and self.at_home(str(answer.request.url)):
            self.window.open_for(retry_after(answer.headers))

    def at_home(self, url: str) -> bool:
        """Whether ``url`` is on the upstream's own origin (its scheme, host and port)."""
        return origin(url) == self._home

    def auth_for(self, url: str) -> dict[str, str]:
        """The ``Authorization`` header for ``url``: serve's token on the upstream's origin, none elsewhere."""
        return {"Authorization": f"Bearer {self.token}"} if self.token and self.at_home(url) else {}

    def api(self, key: str, route: str, revision: str | None = None, path: str = "") -> str:
        """``URL/api/models/REPO/ROUTE[/REVISION][/PATH]`` (``/api/datasets/`` for a dataset's
        key: keys.py), each part checked and quoted."""
        if route not in ROUTES:
            raise ValueError(f"{route!r}: not a route the proxy asks the upstream")
        parts = [quote(p, safe="") for p in checked_segments(hub_id(key), "the repo id")]
        parts.append(route)
        if revision is not None:
            parts.append(quote(revision, safe=""))
        if path:
            parts += [quote(p, safe="") for p in checked_segments(path, "the path")]
        return f"{self.url}/api/{API_PARTS[type_of(key)]}/" + "/".join(parts)

    def file_url(self, key: str, commit: str, path: str) -> str:
        """``URL/REPO/resolve/COMMIT/PATH`` (a dataset's key: ``URL/datasets/REPO/...``, as the
        Hub's URLs write it), each part checked and quoted."""
        repo = "/".join(quote(p, safe="") for p in checked_segments(key, "the repo id"))
        name = "/".join(quote(p, safe="") for p in checked_segments(path, "the path"))
        return f"{self.url}/{repo}/resolve/{quote(commit, safe='')}/{name}"

    def get(self, url: str, what: str, params: dict[str, str] | None = None, *, waits: bool = False) -> httpx.Response:
        """``GET url`` (the token where it is the upstream's); :class:`UpstreamDown` when it cannot be
        asked, :class:`.errors.UpstreamBusy` while (or because) the upstream asked for a pause;
        ``waits``: a fetch's ask, sent once the pause is over (a client's is answered at once)."""
        if self.at_home(url) and not waits:
            self.window.check(what, self.url)
        for _ in range(PAUSES if waits else 1):
            answer = bounded_get(self.http, url, what, self.url, params=params, headers=self.auth_for(url))
            if answer.status_code != 429 or not self.at_home(url):
                return answer
        raise busy(what, self.url, max(self.window.left(), 1.0))

    def json(self, answer: httpx.Response, what: str) -> Any:
        """The answer's JSON, read by the bounded parser; :class:`UpstreamDown` when it is none."""
        try:
            return boundedjson.loads(answer.content, f"the upstream's answer for {what}")
        except ValueError as e:  # JsonTooDeep is one too
            raise UpstreamDown(f"{what}: the upstream {self.url} answered no usable JSON ({e})") from None
