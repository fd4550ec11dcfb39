"""The model page's newer panels in the real headless Chromium (tests/browser.py): a model scanned
clean (its report signed), given a signed compile cache, and gated by its owner with the terms its
card asks readers to accept, served by ``ocibridge serve`` as a process over the suite's registry
with ``--verify-key``. The page shows the Scan panel (verdict, scanner, verified by the key), the
Compile caches table (the cache's engine and digest) and the gate's note with its terms, each
visible as a reader sees it; a screenshot of the page is saved in the test's folder."""

from __future__ import annotations

import uuid
from pathlib import Path

from huggingface_hub import HfApi
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from serving import serve_over
from signing_keys import key_pair

from ocibridge.cli import main
from tests.modelgen import make_bert_model

TOKEN = "owner-" + uuid.uuid4().hex
PNG = b"\x89PNG\r\n\x1a\n"
TERMS = "You agree to use this model for research only and to cite its authors."
CARD = f"""---
license: apache-2.0
extra_gated_prompt: "{TERMS}"
---
# Panels

A tiny BERT whose page shows every panel.
"""


def visible(browser, css: str):
    """The element ``css`` selects, waited for and checked to be displayed (not merely in the page)."""
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.CSS_SELECTOR, css))
    element = browser.find_element(By.CSS_SELECTOR, css)
    assert element.is_displayed(), css
    assert element.size["height"] > 0 and element.size["width"] > 0, css
    return element


def test_the_scan_compile_cache_and_gate_panels_render(browser, registry, tmp_path: Path):
    prefix = f"{registry.host}/panels-{uuid.uuid4().hex[:8]}"
    ref = f"{prefix}/acme/bert:latest"
    model = make_bert_model(tmp_path / "bert")
    (model / "README.md").write_text(CARD)
    private, public = key_pair(tmp_path / "keys")
    assert main(["push", str(model), ref, "-q"]) == 0
    assert main(["scan", ref, "--key", str(private)]) == 0
    cache = tmp_path / "cache" / "rank_0_0"
    cache.mkdir(parents=True)
    (cache / "kernel.so").write_bytes(bytes(range(256)) * 16)
    assert main(["warm", "save", ref, str(cache.parent), "--key", str(private), "--engine", "vllm",
                 "--engine-version", "0.11.0", "--json"]) == 0
    assert main(["sign", ref, "--key", str(private)]) == 0

    with serve_over(registry, tmp_path, f"{TOKEN} user=owner write=acme/\n",
                    lambda host: [prefix, "--plain-http", "--verify-key", str(public)]) as url:
        HfApi(endpoint=url, token=TOKEN).update_repo_settings("acme/bert", gated="manual")
        browser.delete_all_cookies()
        browser.get(f"{url}/acme/bert")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
        WebDriverWait(browser, 10).until(lambda b: b.current_url == f"{url}/acme/bert")

        scan = visible(browser, "section#scan")
        assert visible(browser, "section#scan .scan-verdict .badge").text == "clean"
        assert "ocibridge-scan" in visible(browser, "section#scan .scan-scanner").text
        assert f"verified with serve’s --verify-key {public}" in scan.text
        assert "Not scanned" not in scan.text

        warm = visible(browser, "section#warm")
        assert visible(browser, "section#warm h2").text == "Compile caches"
        [row] = warm.find_elements(By.CSS_SELECTOR, "tr.warm-cache")
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == "vllm 0.11.0" and cells[1] == "dir" and cells[-1].startswith("sha256:")
        assert cells[-2] != "no"  # its signature is listed

        gate = visible(browser, "section.gated")
        assert gate.text.startswith("Gated (manual)")
        assert visible(browser, "section.gated p.terms").text == TERMS

        shot = tmp_path / "model-page.png"  # the page as it opens, the gate's note and terms on top
        assert browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == PNG and shot.stat().st_size > 10_000
        for name, panel in (("scan", scan), ("warm", warm)):  # each panel scrolled into view, as drawn
            browser.execute_script("arguments[0].scrollIntoView()", panel)
            drawn = tmp_path / f"model-{name}-panel.png"
            assert panel.screenshot(str(drawn))
            assert drawn.read_bytes()[:8] == PNG and drawn.stat().st_size > 2_000
