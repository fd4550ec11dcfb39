"""serve's pages lead somewhere (issue 78 item 2): a repository pushed with the CLI that has only
``v1`` (and cosign's ``sha256-HEX.sig`` beside it) is a catalog row whose links answer, and a
model page showing its newest tag, not a "No such revision" dead end; the footer links no guessed
address; the model page says "passed" only when serve checked something; the login page asks for
the token, not a line of the token file."""

from __future__ import annotations

import re
import shutil

import httpx
from serving import serving
from signing_keys import key_pair

from ocibridge.cli import main
from tests.docrun import EXAMPLE_MODEL

LINK = re.compile(r'<a [^>]*href="([^"]+)"')


def get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=30)


def only_v1(tmp_path, prefix: str) -> None:
    model = shutil.copytree(EXAMPLE_MODEL, tmp_path / "tiny")
    assert main(["push", str(model), f"{prefix}/acme/tiny:v1", "-q"]) == 0
    key, _ = key_pair(tmp_path / "keys")
    assert main(["sign", f"{prefix}/acme/tiny:v1", "--key", str(key), "--form", "classic"]) == 0


def test_a_repository_with_only_v1_links_to_pages_that_answer(tmp_path, registry, unique_repo):
    prefix = f"{registry.host}/{unique_repo}"
    only_v1(tmp_path, prefix)
    with serving([prefix]) as served:
        catalog = get(served.url + "/").text
        row = catalog.split('<li class="model-row">')[1]
        assert 'tag <a href="/acme/tiny/tree/v1"><code>v1</code></a>' in row, row
        page = get(served.url + "/acme/tiny")
        assert page.status_code == 200, page.text
        notice = re.search(r'<p class="note no-main">(.*?)</p>', page.text, re.S)
        assert notice and "no revision main" in notice[1] and "this is v1" in notice[1], page.text
        assert "<li>revision <code>v1</code></li>" in page.text
        assert "revision=&#39;v1&#39;" in page.text  # the snippets ask for the tag shown
        refs = page.text.split('id="refs"')[1].split("</section>")[0]
        assert "sha256-" not in refs  # cosign's .sig tag is no version
        # every link of the catalog and of the model page answers (the catalog's row led to a 404)
        links = {href for html in (catalog, page.text) for href in LINK.findall(html) if href.startswith("/")}
        assert "/acme/tiny" in links and "/acme/tiny/tree/v1" in links
        for href in sorted(links):
            answer = httpx.head(served.url + href, timeout=30) if "/resolve/" in href else get(served.url + href)
            assert answer.status_code == 200, (href, answer.status_code)
        # the API still answers main as the Hub does: not found, naming the tags
        api = get(served.url + "/api/models/acme/tiny")
        assert api.status_code == 404 and api.headers["x-error-code"] == "RevisionNotFound"


def test_the_footer_links_no_guessed_address_and_says_the_version(tmp_path, registry, unique_repo):
    from ocibridge.version import __version__

    prefix = f"{registry.host}/{unique_repo}"
    only_v1(tmp_path, prefix)
    with serving([prefix]) as served:
        for path in ("/", "/acme/tiny", "/acme/tiny/tree/v1"):
            footer = get(served.url + path).text.split('<footer class="site">')[1].split("</footer>")[0]
            assert "github.com" not in footer and f"ocibridge {__version__} serve" in footer, footer
            for href in LINK.findall(footer):  # a link only to what the package declares as its home page
                assert re.fullmatch(r"https://[^/]+/.+", href), href


def test_the_model_page_says_passed_only_when_serve_checked_something(tmp_path, registry, unique_repo):
    from ocibridge.signing.verify import VerifyPolicy

    prefix = f"{registry.host}/{unique_repo}"
    only_v1(tmp_path, prefix)
    with serving([prefix]) as served:  # the tests' policy file accepts anything; no --verify-key
        html = get(served.url + "/acme/tiny").text
        assert "checks: passed" not in html and "nothing checked" in html
        assert "accepts anything" in html.split('aria-label="At a glance"')[1].split("</aside>")[0]
    with serving([prefix], verify=VerifyPolicy.from_files([str(tmp_path / "keys" / "cosign.pub")])) as served:
        html = get(served.url + "/acme/tiny").text
        assert "serve’s checks: passed" in html and "nothing checked" not in html


def test_the_login_page_asks_for_the_token_not_a_line_of_the_file(registry, unique_repo):
    with serving([f"{registry.host}/{unique_repo}"], tokens=("s3cret read acme/ alice",)) as served:
        html = get(served.url + "/ocibridge/login").text
        assert "one of the lines" not in html and "HF_TOKEN" in html and "first word" in html


def test_the_newest_tag_is_the_newest_version_and_evidence_tags_name_none():
    from ocibridge.oci.bookkeeping import version_order, version_tags

    assert max(["v1", "v9", "v10", "v2"], key=version_order) == "v10"
    assert version_tags(["v1", "sha256-" + "a" * 64 + ".sig", "sha256-" + "b" * 64, "ocibridge-refs"]) == ["v1"]
