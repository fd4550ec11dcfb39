"""serve's web pages (issue 56), over the real registry: the catalog, a model's page, its files,
the login with --token-file; pages never shadow an API route, carry a strict CSP, and a hostile
model card reaches the page inert."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download
from serving import point_hub_at, serving

from ocibridge.cli import main
from tests.modelgen import make_bert_model

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' https:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


CARD = """---
license: apache-2.0
base_model: google/bert-tiny
tags: [fill-mask, tiny]
pipeline_tag: fill-mask
---
# Tiny BERT

<!-- Provide a quick summary of what the model is/does. -->

A *tiny* model for tests. <!-- an inline remark --> ![diagram](extra/diagram.png)
"""

HOSTILE = """# Innocent

<script>alert('script ran')</script>
<img src=x onerror="alert('onerror ran')">
[click me](javascript:alert('link ran'))
<iframe src="https://evil.example/"></iframe>
<a href="https://ok.example/" onclick="alert(1)">raw link</a>
<!-- a comment --><script>alert('after a comment')</script>
![tracker](http://evil.example/pixel.png)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory, registry):
    """Under a prefix of their own: acme/tiny (latest, v1; a card, license, paramSize, SBOM and
    provenance, signed), acme/other (latest) and acme/hostile (a hostile card)."""
    import uuid

    from signing_keys import key_pair

    root = tmp_path_factory.mktemp("web")
    prefix = f"{registry.host}/web-{uuid.uuid4().hex[:10]}"
    key, pub = key_pair(root / "keys")
    for name, card in (("tiny", CARD), ("other", None), ("hostile", HOSTILE)):
        src = make_bert_model(root / name)
        if card:
            (src / "README.md").write_text(card)
        extra = ["--license", "apache-2.0", "--param-size", "4M", "--sbom", "--provenance"] if name == "tiny" else []
        assert main(["push", str(src), f"{prefix}/acme/{name}:latest", "-q", *extra]) == 0
    assert main(["tag", f"{prefix}/acme/tiny:latest", "v1"]) == 0
    assert main(["sign", f"{prefix}/acme/tiny:latest", "--key", str(key)]) == 0
    return prefix, root, pub


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
    levels = [int(n) for n in re.findall(r"<h([1-6])[ >]", html)]
    assert levels[0] == 1 and all(b <= a + 1 for a, b in zip(levels, levels[1:], strict=False)), levels
    for field in re.findall(r'<input [^>]*id="([^"]+)"', html):
        assert f'<label for="{field}">' in html, field  # every field has its label
    assert "<script" not in html.lower()
    return html


def row_of(catalog: str, repo: str) -> str:
    """The catalog's row of ``repo``."""
    return next(row for row in catalog.split('<li class="model-row">')[1:] if f'href="/{repo}"' in row)


def test_pages_shadow_no_api_route(models, tmp_path, monkeypatch):
    prefix, _, _ = models
    hub = tmp_path / "hub"
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        api = HfApi(endpoint=served.url)
        assert api.model_info("acme/tiny").sha
        assert {f.rfilename for f in api.model_info("acme/tiny").siblings} >= {"config.json", "extra/notes.md"}
        assert Path(hf_hub_download("acme/tiny", "extra/notes.md")).read_text() == "# tiny\n"
        listed = get(f"{served.url}/api/models").json()
        assert {m["id"] for m in listed} == {"acme/tiny", "acme/other", "acme/hostile"}
        # paths that are no route stay the API's JSON 404, never a page
        for path in ("/api/nope", "/api/models/acme/tiny/nope", "/xet/nope", "/api", "/api/x/y",
                     "/xet-write/x", "/ocibridge/nope"):
            r = get(served.url + path)
            assert r.status_code == 404, path
            assert r.headers["content-type"] == "application/json", path
        r = httpx.head(f"{served.url}/acme/tiny/resolve/main/config.json")
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"


def test_every_page_carries_a_strict_csp_and_the_stylesheet_is_cached(models):
    prefix, _, _ = models
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
        assert not re.search(r"(?<!max-)width:\s*\d+px", css.text)  # no fixed widths: readable on a phone


def test_catalog_lists_the_pushed_models_and_search_finds_one(models):
    prefix, _, _ = models
    with serving([prefix]) as served:
        html = page_checks(get(served.url + "/"))
        assert 'href="/acme/tiny"' in html and 'href="/acme/other"' in html
        found = page_checks(get(served.url + "/models", params={"search": "oth"}))
        assert 'href="/acme/other"' in found and 'href="/acme/tiny"' not in found


def test_the_catalog_is_paginated(models, monkeypatch):
    from ocibridge.hubserver.web import pages

    prefix, _, _ = models
    monkeypatch.setattr(pages, "CATALOG_PAGE", 2)
    with serving([prefix]) as served:
        first = page_checks(get(served.url + "/models"))
        second = page_checks(get(served.url + "/models", params={"p": "2"}))
        names = [n for html in (first, second) for n in re.findall(r'<h2><a href="/(acme/[a-z]+)">', html)]
        assert sorted(names) == ["acme/hostile", "acme/other", "acme/tiny"]
        assert 'rel="next" href="/models?search=&amp;p=2"' in first and 'rel="prev"' in second
        assert "page 2 of 2" in second
        assert get(served.url + "/models", params={"p": "x"}).status_code == 200  # a bad page number: the first


def test_with_a_token_file_no_page_without_the_cookie(models):
    prefix, _, _ = models
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


def test_model_page_shows_card_config_files_tags_and_the_signature_verify_finds(models, capsys):
    from ocibridge.signing.verify import VerifyPolicy

    prefix, _, pub = models
    assert main(["verify", f"{prefix}/acme/tiny:latest", "--key", str(pub), "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)
    with serving([prefix], verify=VerifyPolicy.from_files([str(pub)])) as served:
        html = page_checks(get(served.url + "/acme/tiny"))
        # the card, its front matter as a table, its headings under the page's h1
        assert "<h3>Tiny BERT</h3>" in html and "<em>tiny</em>" in html
        # HTML comments (transformers' card template is full of them) hidden, as the Hub hides them
        assert "quick summary" not in html and "inline remark" not in html and "&lt;!--" not in html
        assert re.search(r"<th scope=\"row\">base_model</th><td>google/bert-tiny</td>", html)
        assert re.search(r"<th scope=\"row\">pipeline_tag</th><td>fill-mask</td>", html)
        assert 'src="/acme/tiny/resolve/main/extra/diagram.png"' in html  # an image of its own files
        # the ModelPack config
        assert re.search(r"<th scope=\"row\">paramSize</th><td>4M</td>", html)
        assert re.search(r"<th scope=\"row\">licenses</th><td>apache-2.0</td>", html)
        # files with size, kind and media type; tags and the main branch
        assert 'href="/acme/tiny/blob/main/extra/notes.md"' in html
        assert "application/vnd.cncf.model.weight" in html or "application/vnd.cnai.model.weight" in html
        assert ">v1</a></td><td>tag</td>" in html and ">main</a></td><td>branch" in html
        assert not re.search(r">sha256-[0-9a-f]{64}\.\w+</a></td><td>tag", html)  # cosign's .sig tag: no version
        # the signature, verified by the key ocibridge verify names; SBOM and provenance summaries
        rows = re.findall(r'<tr class="evidence-signature">(.*?)</tr>', html)
        assert len(rows) == len(verified["signatures"]) == 2  # sign's default: classic and bundle
        for signature in verified["signatures"]:
            assert any(signature["where"] in row and f"<td>{signature['signer']}</td>" in row for row in rows)
        assert "<h3>SBOM</h3>" in html and "<h3>Provenance</h3>" in html
        assert "https://ocibridge.dev/builder/cli" in html
        # copy-ready snippets with the real host and reference
        assert f"HF_ENDPOINT={served.url} python -c" in html
        assert f"ocibridge pull {prefix}/acme/tiny:latest" in html
        assert f"ocibridge k8s volume {prefix}/acme/tiny:latest" in html
        # the catalog's row: badges, license, paramSize
        catalog = get(served.url + "/models", params={"search": "tiny"}).text
        assert "signed</span>" in catalog and "attested</span>" in catalog and "policy: passes" in catalog
        assert "license apache-2.0" in catalog and "4M parameters" in catalog


def test_a_hostile_model_card_comes_out_as_inert_text(models):
    prefix, _, _ = models
    with serving([prefix]) as served:
        r = get(served.url + "/acme/hostile")
        html = page_checks(r)  # no <script at all, the CSP header
        card = re.search(r'<div class="card">(.*?)</div>', html, re.S).group(1)
        assert not re.search(r"<\s*(script|iframe)", card, re.I)  # no such element...
        assert "&lt;script&gt;" in card and "&lt;iframe" in card  # ...but its text, shown
        tags = re.findall(r"<[a-zA-Z][^>]*>", card)
        assert not [t for t in tags if re.search(r"\son[a-z]+\s*=", t, re.I)]  # no element has a handler
        assert not [t for t in tags if "javascript:" in t.lower()]  # no javascript: link
        assert not re.findall(r'<img[^>]*\ssrc=', card)  # the http image lost its source; <img src=x> is text
        assert "<h3>Innocent</h3>" in card
        assert "&lt;script&gt;alert('after a comment')" in card  # a comment does not carry HTML in


def test_tree_and_blob_pages(models):
    prefix, _, _ = models
    with serving([prefix]) as served:
        top = page_checks(get(served.url + "/acme/tiny/tree/v1"))
        assert 'href="/acme/tiny/tree/v1/extra">extra/</a>' in top
        assert 'href="/acme/tiny/blob/v1/config.json">config.json</a>' in top
        inside = page_checks(get(served.url + "/acme/tiny/tree/v1/extra"))
        assert 'href="/acme/tiny/blob/v1/extra/notes.md">notes.md</a>' in inside
        text = page_checks(get(served.url + "/acme/tiny/blob/main/extra/notes.md"))
        assert "<pre class=\"file\"><code># tiny\n</code></pre>" in text
        binary = page_checks(get(served.url + "/acme/tiny/blob/main/model.safetensors"))
        assert "binary file" in binary and 'href="/acme/tiny/resolve/main/model.safetensors"' in binary
        assert get(served.url + "/acme/tiny/blob/main/nope").status_code == 404
        assert get(served.url + "/acme/tiny/tree/nope").status_code == 404


def test_the_policy_serve_enforces_shows_on_the_catalog_and_the_model_page(models, tmp_path):
    from ocibridge.signing.containers_policy import UsePolicy

    prefix, _, _ = models
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {
        "docker": {f"{prefix}/acme/other": [{"type": "reject"}]}}}))
    with serving([prefix], verify=UsePolicy(file=str(policy))) as served:
        catalog = page_checks(get(served.url + "/"))
        assert "policy: refused" in row_of(catalog, "acme/other") and "rejects it" in row_of(catalog, "acme/other")
        assert "policy: passes" in row_of(catalog, "acme/tiny")
        refused = get(served.url + "/acme/other")
        assert refused.status_code == 403 and "rejects it" in page_checks(refused)
        assert get(served.url + "/acme/other/tree/main").status_code == 403
        page = page_checks(get(served.url + "/acme/tiny"))
        assert str(policy) in page and "default" in page  # the entry of the file that applied


def test_a_layout_source_is_listed_and_shown(tmp_path):
    from ocibridge.stores.layout import LayoutStore

    src = make_bert_model(tmp_path / "solo")
    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(src), f"oci:{tmp_path}/lay:solo:latest", "-q"]) == 0
    with serving([f"oci:{tmp_path}/lay"]) as served:
        assert 'href="/solo"' in page_checks(get(served.url + "/"))
        page = page_checks(get(served.url + "/solo"))  # a single-part name
        assert "config.json" in page and f"ocibridge pull oci:{tmp_path}/lay:solo:latest" in page
        assert "k8s volume" not in page  # image volumes come from registries


def test_the_use_this_model_snippet_loads_the_model_when_pasted_into_a_shell(models, tmp_path):
    prefix, _, _ = models
    with serving([prefix]) as served:
        page = page_checks(get(served.url + "/acme/tiny"))
        shown = re.search(r"<pre><code>(HF_ENDPOINT=[^<]*AutoConfig[^<]*)</code></pre>", page).group(1)
        snippet = html_lib.unescape(shown)
        assert snippet.startswith(f"HF_ENDPOINT={served.url} python -c")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bin_dir / "python").chmod(0o755)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HF_HUB_CACHE": str(tmp_path / "hf"),
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1"}
        env.pop("HF_HUB_OFFLINE", None)
        env.pop("TRANSFORMERS_OFFLINE", None)
        done = subprocess.run(["bash", "-c", snippet], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"model_type": "bert"' in done.stdout and '"hidden_size": 32' in done.stdout


def test_the_model_page_lists_the_compile_caches_warm_save_attached(models, tmp_path, capsys):
    prefix, root, _ = models
    ref = f"{prefix}/acme/other:latest"
    cache = tmp_path / "cache" / "rank_0_0"
    cache.mkdir(parents=True)
    (cache / "graph.py").write_text("# compiled\n" * 100)
    assert main(["warm", "save", ref, str(tmp_path / "cache"), "--engine", "vllm", "--engine-version", "0.33.1",
                 "--key", str(root / "keys" / "cosign.key"), "--option", "level=3", "--json"]) == 0
    signed = json.loads(capsys.readouterr().out)
    assert main(["warm", "save", ref, str(tmp_path / "cache"), "--engine", "sglang", "--engine-version", "0.5.0",
                 "--json"]) == 0
    unsigned = json.loads(capsys.readouterr().out)
    with serving([prefix]) as served:
        html = page_checks(get(served.url + "/acme/other"))
    rows = dict((digest, row) for row, digest in
                ((row, re.search(r"<code>(sha256:[0-9a-f]{64})</code></td>$", row)[1])  # type: ignore[index]
                 for row in re.findall(r'<tr class="warm-cache">(.*?)</tr>', html)))
    assert set(rows) == {signed["digest"], unsigned["digest"]}
    key = signed["key"]
    assert rows[signed["digest"]].startswith(f"<td>vllm 0.33.1</td><td>dir</td><td>{key['torch']}</td>")
    assert f"<td>{key['device']}</td><td>{key['python']}</td><td><code>{key['options'][:19]}</code></td>" \
        in rows[signed["digest"]]
    from ocibridge.hubserver.web.render import human_size

    assert f"<td>{human_size(signed['size'])}</td><td>classic, bundle</td>" in rows[signed["digest"]]
    assert rows[unsigned["digest"]].startswith("<td>sglang 0.5.0</td>") and "<td>no</td>" in rows[unsigned["digest"]]
    assert '<h2 id="warm-h">Compile caches</h2>' in html
