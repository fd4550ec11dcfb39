"""serve's web pages in a real browser (issue 56): Debian's headless Chromium (tests/browser.py,
one for the session) against ``ocibridge serve`` run as its own process with a --token-file,
over the real registry. One serve and one browser for the module: the whole suite stays fast.

The screenshots docs/serve.md shows (docs/img/serve-*.png) are written by this run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from safetensors.numpy import save_file
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from serving import wait_until_healthy
from signing_keys import key_pair

import ocibridge
from ocibridge.cli import main
from tests.modelgen import make_bert_model

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "browser-" + uuid.uuid4().hex
CHUNK = 64 * 1024
TENSORS = 4
CARD = """---
license: apache-2.0
base_model: acme/base
pipeline_tag: feature-extraction
tags: [bert, tiny]
---
# Tiny

A tiny BERT for the browser tests.
"""
#: a model card an attacker wrote: every form of script the issue names
HOSTILE = """---
license: mit
---
# Hostile

<script>document.title = "pwned-script"; window.pwned = "script";</script>
<img src="x" onerror="document.title='pwned-img'; window.pwned='img'">
[click me](javascript:window.pwned='link')
<iframe src="https://example.com/" id="framed"></iframe>
<a href="javascript:alert(1)">raw link</a>
"""


def tiny(root: Path, number: int, card: str = CARD) -> Path:
    """Version ``number`` of a tiny BERT transformers loads: real safetensors whose tensor 0 holds
    ``number`` (the others never change), a README card, and from version 2 a file renamed."""
    make_bert_model(root)
    tensors = {f"layer.{i}.weight": np.full(64 * 1024, i, dtype=np.float32) for i in range(TENSORS)}
    tensors["layer.0.weight"] = tensors["layer.0.weight"] + number
    save_file(tensors, str(root / "model.safetensors"))
    (root / "README.md").write_text(card)
    if number > 1:
        (root / "extra" / "notes.md").rename(root / "extra" / "changes.md")
    return root


@dataclass
class Site:
    url: str
    prefix: str  # host/path the repositories are under
    public: Path  # the key the signed model verifies with
    policy: Path  # the containers policy serve enforces


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where the pages' screenshots go: the test's temporary folder, since tests write nowhere in the
    checkout; ``OCIBRIDGE_DOC_IMAGES=docs/img`` (a folder) refreshes docs/serve.md's pictures from a run."""
    chosen = os.environ.get("OCIBRIDGE_DOC_IMAGES")
    if not chosen:
        return tmp_path
    Path(chosen).mkdir(parents=True, exist_ok=True)
    return Path(chosen)


@pytest.fixture(scope="module")
def site(registry, tmp_path_factory):
    """acme/tiny (v1, then v2 = latest, v2's AI-BOM attested), acme/other (a hostile card), all
    signed, served by one ``ocibridge serve PREFIX --token-file --verify-key`` process whose
    containers policy also requires acme/tiny's signature (and accepts anything else)."""
    tmp = tmp_path_factory.mktemp("browser-site")
    prefix = f"{registry.host}/web-{uuid.uuid4().hex[:8]}"
    for tag, number in (("v1", 1), ("v2", 2)):
        options = ocibridge.PushOptions(name="tiny", overrides={"version": tag}, chunk_threshold=100_000,
                                        chunk_size=CHUNK)
        ocibridge.push(str(tiny(tmp / tag / "tiny", number)), f"{prefix}/acme/tiny:{tag}", options=options)
    assert main(["tag", f"{prefix}/acme/tiny:v2", "latest"]) == 0
    ocibridge.push(str(tiny(tmp / "other" / "other", 1, HOSTILE)), f"{prefix}/acme/other:latest")
    private, public = key_pair(tmp / "keys")
    for ref in (f"{prefix}/acme/tiny:v1", f"{prefix}/acme/tiny:latest", f"{prefix}/acme/other:latest"):
        assert main(["sign", ref, "--key", str(private)]) == 0
    assert main(["attest", f"{prefix}/acme/tiny:latest", "--key", str(private), "--sbom"]) == 0
    policy = tmp / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {
        f"{prefix}/acme/tiny": [{"type": "sigstoreSigned", "keyPath": str(public),
                                 "signedIdentity": {"type": "matchRepository"}}]}}}))
    (tmp / "tokens.txt").write_text(f"{TOKEN} read\n")
    port = _free_port()
    log = tmp / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", prefix, "--no-access-log",
                                 "--token-file", str(tmp / "tokens.txt"), "--verify-key", str(public),
                                 "--listen", f"127.0.0.1:{port}"],
                                env={**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_POLICY": str(policy)},
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, url, log)
        yield Site(url, prefix, public, policy)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def sign_in(browser, site: Site) -> None:
    """Fill the login form the browser is on, as a person would, and wait to leave it."""
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "/ocibridge/login" not in b.current_url)


def visit(browser, site: Site, path: str) -> None:
    browser.get(site.url + path)
    if "/ocibridge/login" in browser.current_url:
        sign_in(browser, site)
    assert "/ocibridge/login" not in browser.current_url


def text_of(browser) -> str:
    return browser.find_element(By.TAG_NAME, "body").text


def test_with_a_token_file_no_page_is_shown_before_the_login(browser, site):
    browser.delete_all_cookies()
    browser.get(site.url + "/acme/tiny")
    assert "/ocibridge/login" in browser.current_url
    assert "acme/tiny" not in text_of(browser) and browser.find_elements(By.ID, "token")
    browser.get(site.url + "/acme/tiny/compare/v1...v2")
    assert "/ocibridge/login" in browser.current_url and "model.safetensors" not in text_of(browser)
    sign_in(browser, site)
    assert browser.current_url == site.url + "/acme/tiny/compare/v1...v2"  # back where it was going
    assert "model.safetensors" in text_of(browser)
    cookies = browser.get_cookies()
    assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
    assert TOKEN not in json.dumps(cookies)


def test_the_catalog_lists_the_pushed_models_and_finds_one_by_search(browser, site, screenshots):
    visit(browser, site, "/")
    listed = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "ul.catalog li.model-row h2 a")]
    assert sorted(listed) == ["acme/other", "acme/tiny"]
    assert browser.save_screenshot(str(screenshots / "serve-catalog.png"))
    assert (screenshots / "serve-catalog.png").read_bytes().startswith(b"\x89PNG")
    search = browser.find_element(By.ID, "site-search")
    search.send_keys("oth")
    search.send_keys(Keys.RETURN)
    WebDriverWait(browser, 10).until(lambda b: "search=oth" in b.current_url)
    found = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "ul.catalog li.model-row h2 a")]
    assert found == ["acme/other"]


def test_the_compare_page_names_exactly_what_ocibridge_diff_names(browser, site):
    expected = ocibridge.diff(f"{site.prefix}/acme/tiny:v1", f"{site.prefix}/acme/tiny:v2").as_dict()
    visit(browser, site, "/acme/tiny/compare/v1...v2")
    rows = browser.find_elements(By.CSS_SELECTOR, "#files tr.file")
    shown = sorted((r.get_attribute("data-change"), r.find_element(By.CSS_SELECTOR, ".path").text) for r in rows)
    assert shown == sorted((f["change"], f["path"]) for f in expected["files"])
    assert shown == [("added", "extra/changes.md"), ("changed", "model.safetensors"), ("removed", "extra/notes.md")]
    tensors = [(t.get_attribute("data-file"), t.get_attribute("data-change"),
                t.find_element(By.CSS_SELECTOR, ".name").text)
               for t in browser.find_elements(By.CSS_SELECTOR, "li.tensor")]
    assert tensors == [(f["path"], t["change"], t["name"]) for f in expected["files"] for t in f["tensors"] or ()]
    assert tensors == [("model.safetensors", "changed", "layer.0.weight")]
    assert "1 tensor differs; 2 found the same by chunk digests." in browser.find_element(By.TAG_NAME, "body").text
    fields = [r.find_element(By.CSS_SELECTOR, ".name").text for r in browser.find_elements(By.CSS_SELECTOR, "tr.field")]
    assert fields == [c["field"] for c in expected["config"]] and "descriptor.version" in fields
    # the history lists v2 then v1 (tags by date) and links the same comparison
    visit(browser, site, "/acme/tiny/commits/main")
    commits = browser.find_elements(By.CSS_SELECTOR, "li.commit")
    assert [c.get_attribute("data-commit") for c in commits] == [
        expected["new"]["digest"][7:47], expected["old"]["digest"][7:47]]
    commits[0].find_element(By.CSS_SELECTOR, "a.compare").click()
    WebDriverWait(browser, 10).until(lambda b: "/compare/" in b.current_url)
    assert sorted(r.find_element(By.CSS_SELECTOR, ".path").text
                  for r in browser.find_elements(By.CSS_SELECTOR, "#files tr.file")) == sorted(p for _, p in shown)
    # what is not a comparison, or names no revision, is a page saying so
    jar = {c["name"]: c["value"] for c in browser.get_cookies()}
    for path, status, said in (("/acme/tiny/compare/v1..v2", 404, "Not a comparison"),
                               ("/acme/tiny/compare/v1...nope", 404, "No such revision"),
                               ("/acme/nope/compare/v1...v2", 404, "No such model")):
        r = httpx.get(site.url + path, cookies=jar)
        assert (r.status_code, said in r.text) == (status, True), path


def test_a_model_page_shows_card_config_files_tags_and_what_verify_finds(browser, site, capsys, screenshots):
    ref = f"{site.prefix}/acme/tiny:latest"
    assert main(["verify", ref, "--key", str(site.public), "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)
    assert main(["verify", ref, "--key", str(site.public), "--attestation-type", "cyclonedx", "--json"]) == 0
    attested = json.loads(capsys.readouterr().out)
    visit(browser, site, "/acme/tiny")
    assert browser.find_element(By.TAG_NAME, "h1").text == "acme/tiny"
    # the card, its front matter as a table
    card = browser.find_element(By.CSS_SELECTOR, "#card .card")
    assert [h.text for h in card.find_elements(By.CSS_SELECTOR, "h2, h3, h4")][:1] == ["Tiny"]
    assert "A tiny BERT for the browser tests." in card.text
    front = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
             for row in browser.find_elements(By.CSS_SELECTOR, "table.front tr")}
    assert front["license"] == "apache-2.0" and front["base_model"] == "acme/base"
    assert front["pipeline_tag"] == "feature-extraction" and "bert" in front["tags"]
    # the ModelPack config, as inspect reads it
    config = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
              for row in browser.find_elements(By.CSS_SELECTOR, "#config tr")}
    assert config.get("version") == "v2" and config.get("name") == "tiny", config
    # the files, exactly those pushed, with sizes
    pushed = {"README.md", "config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors",
              "extra/changes.md"}
    rows = browser.find_elements(By.CSS_SELECTOR, "#files tbody tr")
    assert {r.find_element(By.TAG_NAME, "td").text for r in rows} == pushed
    # tags and the main branch: the Hub's refs (the registry tag latest is main's, said in its row)
    rows_by_ref = {r.find_element(By.TAG_NAME, "td").text: r.text
                   for r in browser.find_elements(By.CSS_SELECTOR, "#refs tbody tr")}
    assert {"main", "v1", "v2"} <= set(rows_by_ref) and "latest" not in rows_by_ref
    assert "branch (the tag latest)" in rows_by_ref["main"]
    # every signature verify found, with what verified it; the attestation; the policy serve enforces
    signatures = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.evidence-signature")]
    assert len(signatures) == len(verified["signatures"]) >= 1
    for signature in verified["signatures"]:
        assert any(signature["where"] in row and signature["signer"] in row for row in signatures), signatures
    assert attested["signatures"]
    assert browser.find_elements(By.CSS_SELECTOR, "tr.evidence-sbom, tr.evidence-attestation")
    verdict = browser.find_element(By.CSS_SELECTOR, "#trust .verdict").text
    assert "passed" in verdict and str(site.policy) in verdict and "sigstoreSigned" in verdict
    assert browser.save_screenshot(str(screenshots / "serve-model.png"))
    # its history link leads to the commits page
    browser.find_element(By.LINK_TEXT, "History").click()
    WebDriverWait(browser, 10).until(lambda b: "/acme/tiny/commits/main" in b.current_url)
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.commit")) == 2


#: the words of each cell of the signature table, each one laid out on one line (one client rect)
WORDS_BROKEN = """
const broken = [];
for (const cell of document.querySelectorAll("#trust table td, #trust table th")) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const re = /\\S+/g;
    let m;
    while ((m = re.exec(node.data)) !== null) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      if (range.getClientRects().length > 1 && m[0].length < 40) broken.push(m[0]);
    }
  }
}
return broken;
"""


def test_the_model_page_opens_with_what_a_visitor_looks_for_and_its_tables_keep_words_whole(browser, site):
    """Signed, allowed by the policy, size, tags, license: in a panel above the card (as the Hub's
    side panel); the signature table breaks no word at a phone's width; sentences are spaced."""
    visit(browser, site, "/acme/tiny")
    panel = browser.find_element(By.CSS_SELECTOR, "aside.glance")
    facts = {d.find_element(By.TAG_NAME, "dt").text.lower(): d.find_element(By.TAG_NAME, "dd").text
             for d in panel.find_elements(By.CSS_SELECTOR, "dl > div")}
    assert facts["signed"].startswith("signed") and "verified by serve’s --verify-key" in facts["signed"], facts
    assert facts["policy"] == f"allowed by {site.policy}"
    assert facts["license"] == "apache-2.0" and facts["tags"].split() == ["bert", "tiny"]
    assert facts["size"].endswith(("KiB", "MiB", "kB", "MB", "B")), facts
    assert panel.location["y"] < browser.find_element(By.ID, "card").location["y"]
    assert panel.location["y"] < browser.find_element(By.ID, "trust").location["y"]
    verdict = browser.find_element(By.CSS_SELECTOR, "#trust .verdict").text
    assert "applies.serve" not in verdict and ".Signatures" not in verdict and ".serve was" not in verdict
    size = browser.get_window_size()
    try:
        for width in (1280, 420):
            browser.set_window_size(width, 900)
            assert browser.execute_script(WORDS_BROKEN) == [], width
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_the_catalog_badge_names_the_rules_the_model_passes(browser, site):
    visit(browser, site, "/")
    badges = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "li.model-row .badges .badge")]
    assert "policy: passes (the policy file and --verify-key)" in badges, badges


def test_the_use_this_model_snippet_pasted_into_a_shell_loads_the_model(browser, site, tmp_path):
    visit(browser, site, "/acme/tiny")
    snippets = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#use pre code")]
    snippet = next(s for s in snippets if "from_pretrained" in s)
    assert snippet.startswith("HF_TOKEN=YOUR_TOKEN ")
    # the user's own token where the snippet says YOUR_TOKEN; python: the one with transformers
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    shell = subprocess.run(["bash", "-c", snippet.replace("YOUR_TOKEN", TOKEN, 1)], capture_output=True,
                           text=True, timeout=120, env=env)
    assert shell.returncode == 0, shell.stderr
    assert '"model_type": "bert"' in shell.stdout and '"hidden_size": 32' in shell.stdout


def test_a_hostile_model_card_renders_as_text_and_runs_nothing(browser, site):
    visit(browser, site, "/acme/other")
    assert browser.title.startswith("acme/other")  # neither script set it
    card = browser.find_element(By.CSS_SELECTOR, "#card .card").text
    assert "<script>" in card and "<iframe" in card and "onerror=" in card  # shown, as text
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    assert browser.find_elements(By.TAG_NAME, "iframe") == []
    assert browser.find_elements(By.CSS_SELECTOR, "#framed") == []
    scripts = browser.execute_script("return document.scripts.length")
    assert scripts == 0
    hrefs = [a.get_attribute("href") or "" for a in browser.find_elements(By.TAG_NAME, "a")]
    assert not [h for h in hrefs if h.lower().startswith("javascript:")]
    handlers = browser.execute_script(
        "return [...document.querySelectorAll('*')].filter(e => [...e.attributes].some("
        "a => a.name.startsWith('on'))).length")
    assert handlers == 0
    # the CSP every page carries, as a client reads it
    r = httpx.get(site.url + "/acme/other", cookies={c["name"]: c["value"] for c in browser.get_cookies()})
    assert r.status_code == 200
    assert "script-src" not in r.headers["content-security-policy"]
    assert r.headers["content-security-policy"].startswith("default-src 'none'")


def test_without_chromium_the_browser_fixture_fails_it_never_skips(monkeypatch, tmp_path):
    import shutil

    import browser as fixture

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium chromium-driver"):
        fixture.start_chromium(tmp_path)
