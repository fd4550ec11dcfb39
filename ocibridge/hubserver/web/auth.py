"""The login of the pages when serve has ``--token-file``: a token given once in the login form
becomes a cookie, which only pages accept (whether a cookie is good is decided with every other
access, in :meth:`.access.Gate.page_allowed`).

The cookie holds no token: it is an HMAC of the token under a key made when serve starts, so a
cookie copied out of a browser is no API token, and a restart signs everyone out. It is
HttpOnly (no script reads it: there is none anyway), SameSite=Strict (no other site's page
sends it) and Secure over https. The API never reads it: API routes take only
``Authorization: Bearer`` (app.py), because a browser attaches a cookie to any request a
page of another site makes it send (a form posting to ``/api/repos/create``): a cookie that
authorized API writes would let any site write through a signed-in user's browser (CSRF).
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ocibridge.hubserver.access import COOKIE

#: seconds a login lasts (the cookie's Max-Age)
SESSION_SECONDS = 12 * 3600
#: the login form's path (not a Hub repository: serve keeps /ocibridge/ for itself)
LOGIN_PATH = "/ocibridge/login"


def to_login(request: Request) -> Response:
    """The login form, which comes back to the page asked for once signed in."""
    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{LOGIN_PATH}?next={quote(wanted, safe='')}", status_code=303)


def local_target(text: str | None) -> str:
    """Where to go after the login: a path of this server only (never ``//host`` or a URL)."""
    if not text or not text.startswith("/") or text.startswith("//") or "\\" in text:
        return "/"
    return text


def form_fields(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields (the first of each)."""
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), max_num_fields=16).items()}


def set_session(response: Response, value: str, secure: bool) -> None:
    response.set_cookie(COOKIE, value, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
                        secure=secure)
