"""The one Jinja2 environment of serve's pages, and the headers every page carries.

Autoescape is on for every template: text from a registry (a tag, a file name, an annotation)
is untrusted and reaches the page escaped unless a template marks it safe, which only the
sanitized model card is (:mod:`.card`).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.responses import HTMLResponse, Response

from ocibridge.core import terminal
from ocibridge.version import __version__

if TYPE_CHECKING:
    from jinja2 import Environment

HERE = Path(__file__).parent
#: where serve answers the stylesheet (under /ocibridge/, a prefix no Hub repository takes)
STYLE_PATH = "/ocibridge/static/style.css"
#: no script, no frame, no plugin; styles and forms only from serve; images from serve or https
#: (a model card's images: its own files, or https)
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' https:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",  # pages say what is there now (and may be behind a token)
}


@cache
def environment() -> Environment:
    # Jinja2 is loaded by the first page, not at serve's start: a replica that serves only
    # the API never holds it (about 5 MiB of its idle memory)
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["size"] = human_size
    # a revision in a link is one path segment: ``feature/x`` and ``refs/tags/x`` quoted whole
    # (urlencode keeps ``/``), as the Hub's clients quote them (routing.py matches the raw path)
    env.filters["segment"] = lambda value: quote(str(value), safe="")
    env.globals["style_url"] = f"{STYLE_PATH}?v={style()[1]}"
    env.globals["project_url"] = project_url()
    env.globals["version"] = __version__
    return env


def project_url() -> str | None:
    """Where the footer's "ocibridge" leads: the home page the installed package declares
    (``[project.urls]``), else nowhere (the name is shown unlinked, never a guessed address)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("ocibridge")
    except PackageNotFoundError:
        return None
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() in ("homepage", "home", "source", "repository") and url.strip().startswith("https://"):
            return url.strip()
    home = str(meta.json.get("home_page") or "")
    return home if home.startswith("https://") else None


def human_size(n: int | None) -> str:
    """Bytes as people read them (1.5 MiB), exact below a KiB."""
    return "—" if n is None else terminal.human_size(n)


def page(template: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any) -> Response:
    """``template`` rendered with ``context``, with :data:`PAGE_HEADERS`."""
    body = environment().get_template(template).render(**context)
    return HTMLResponse(body, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})


@cache
def style() -> tuple[bytes, str]:
    """The stylesheet and a short hash of it (the page links it with ``?v=HASH``: a new release's
    stylesheet is fetched anew although the old one may be cached for a year)."""
    data = (HERE / "static" / "style.css").read_bytes()
    return data, hashlib.sha256(data).hexdigest()[:12]


def stylesheet() -> Response:
    data, digest = style()
    return Response(data, media_type="text/css", headers={
        "Cache-Control": "public, max-age=31536000, immutable", "ETag": f'"{digest}"',
        "X-Content-Type-Options": "nosniff"})
