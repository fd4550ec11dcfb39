"""serve's web pages (issue 56), over the real registry: the catalog, a model's page, its files,
the login with --token-file; pages never shadow an API route, carry a strict CSP, and a hostile
model card reaches the page inert."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download
from serving import make_model, point_hub_at, serving

from ocibridge.cli import main

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' https:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


@pytest.fixture(scope="module")
def models(tmp_path_factory, registry):
    """acme/tiny (latest, v1) and acme/other (latest) under a prefix of their own."""
    import uuid

    root = tmp_path_factory.mktemp("web")
    prefix = f"{registry.host}/web-{uuid.uuid4().hex[:10]}"
    for name in ("tiny", "other"):
        src = make_model(root / name)
        assert main(["push", str(src), f"{prefix}/acme/{name}:latest", "-q"]) == 0
    assert main(["tag", f"{prefix}/acme/tiny:latest", "v1"]) == 0
    return prefix, root


def get(url: str, **kw) -> httpx.Response:
    return httpx.get(url, timeout=30, **kw)


def page_checks(r: httpx.Response) -> str:
    """The headers every page carries, and the HTML basics (lang, viewport, one h1)."""
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"
    html = r.text
    assert '<html lang="en">' in html
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert html.count("<h1") == 1
    assert "<script" not in html.lower()
    return html


def test_pages_shadow_no_api_route(models, tmp_path, monkeypatch):
    prefix, _ = models
    hub = tmp_path / "hub"
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        api = HfApi(endpoint=served.url)
        assert api.model_info("acme/tiny").sha
        assert {f.rfilename for f in api.model_info("acme/tiny").siblings} >= {"config.json", "extra/notes.md"}
        assert Path(hf_hub_download("acme/tiny", "extra/notes.md")).read_text() == "# tiny\n"
        listed = get(f"{served.url}/api/models").json()
        assert {m["id"] for m in listed} == {"acme/tiny", "acme/other"}
        # paths that are no route stay the API's JSON 404, never a page
        for path in ("/api/nope", "/api/models/acme/tiny/nope", "/xet/nope", "/api", "/api/x/y",
                     "/xet-write/x", "/ocibridge/nope"):
            r = get(served.url + path)
            assert r.status_code == 404, path
            assert r.headers["content-type"] == "application/json", path
        r = httpx.head(f"{served.url}/acme/tiny/resolve/main/config.json")
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"


def test_every_page_carries_a_strict_csp_and_the_stylesheet_is_cached(models):
    prefix, _ = models
    with serving([prefix]) as served:
        for path in ("/", "/models", "/acme/tiny", "/acme/tiny/tree/main", "/acme/tiny/tree/main/extra",
                     "/acme/tiny/blob/main/config.json", "/acme/nope"):
            r = get(served.url + path)
            assert r.status_code == (404 if path == "/acme/nope" else 200), path
            page_checks(r)
        link = re.search(r'<link rel="stylesheet" href="([^"]+)">', get(served.url).text).group(1)
        css = get(served.url + link)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "max-age=31536000" in css.headers["cache-control"]


def test_catalog_lists_the_pushed_models_and_search_finds_one(models):
    prefix, _ = models
    with serving([prefix]) as served:
        html = page_checks(get(served.url + "/"))
        assert 'href="/acme/tiny"' in html and 'href="/acme/other"' in html
        found = page_checks(get(served.url + "/models", params={"search": "oth"}))
        assert 'href="/acme/other"' in found and 'href="/acme/tiny"' not in found


def test_with_a_token_file_no_page_without_the_cookie(models):
    prefix, _ = models
    with serving([prefix], tokens=("s3cret-read",)) as served:
        for path in ("/", "/models?search=x", "/acme/tiny", "/acme/tiny/tree/main", "/acme/tiny/blob/main/config.json"):
            r = get(served.url + path)
            assert r.status_code == 303, path
            assert r.headers["location"].startswith("/ocibridge/login?next=")
            assert "acme" not in r.text
        form = get(served.url + "/ocibridge/login?next=/acme/tiny")
        html = page_checks(form)
        assert '<label for="token">Token</label>' in html and 'method="post"' in html
        bad = httpx.post(served.url + "/ocibridge/login", data={"token": "wrong", "next": "/acme/tiny"})
        assert bad.status_code == 401 and "set-cookie" not in bad.headers
        good = httpx.post(served.url + "/ocibridge/login", data={"token": "s3cret-read", "next": "//evil.example/x"})
        assert good.status_code == 303 and good.headers["location"] == "/"  # never another host
        cookie = good.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/"):
            assert attribute.lower() in cookie.lower()
        assert "s3cret-read" not in cookie  # the cookie is no token
        jar = {"ocibridge_session": good.cookies["ocibridge_session"]}
        assert page_checks(get(served.url + "/acme/tiny", cookies=jar))
        # the cookie opens pages only: the API keeps its bearer rule (a cookie would be CSRF-able)
        assert get(served.url + "/api/models/acme/tiny", cookies=jar).status_code == 401
        assert httpx.post(served.url + "/api/repos/create", cookies=jar,
                          json={"name": "x", "organization": "acme"}).status_code == 401
