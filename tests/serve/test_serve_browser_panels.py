"""The model page's newer panels in the real headless Chromium (tests/browser.py): a model scanned
clean (its report signed), given a signed compile cache, and gated by its owner with the terms its
card asks readers to accept, served by ``ocibridge serve`` as a process over the suite's registry
with ``--verify-key``. The page shows the Scan panel (verdict, scanner, verified by the key), the
Compile caches table (the cache's engine and digest) and the gate's note with its terms, each
visible as a reader sees it; a screenshot of the page is saved in the test's folder.

Under ``serve --scan quarantine`` (one serve for the module, its owner signed in once a test) the
panel's other wordings, as drawn: a model flagged and held by a trusted report, one released by a
newer signed clean report, one whose newer reports do not count (and why), one held with no
trusted report at all, and one whose deciding report is too large for the page to list."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from serving import serve_over
from signing_keys import key_pair

from ocibridge.cli import main
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.scanning.files import now
from ocibridge.scanning.report import FileScan, Finding
from ocibridge.scanning.stored import attach_report, stored_reports
from ocibridge.signing.keys import load_private_key
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_bert_model
from tests.support.attacks import torch_zip, write_tree

TOKEN = "owner-" + uuid.uuid4().hex
READER = "reader-" + uuid.uuid4().hex
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


@pytest.fixture(scope="module")
def quarantine(registry, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """One ``serve --scan quarantine --scan-verify-key scanner.pub`` (a process) over: acme/held
    (a torch pickle calling os.system, pushed with ``--scan quarantine`` and its flagged report
    signed by scanner.key), acme/released (the same, then a clean report signed by scanner.key),
    acme/overruled (released so, then a flagged report attached unsigned and a clean one signed by
    another key), acme/untrusted (flagged by another key's report, an unsigned clean one on top)
    and acme/large (held by a flagged report of 40,000 files signed by scanner.key: over 4 MiB).
    Yields serve's URL and scanner.pub."""
    root = tmp_path_factory.mktemp("panels-quarantine")
    prefix = f"{registry.host}/panelsq-{uuid.uuid4().hex[:8]}"
    key, pub = key_pair(root / "keys", "scanner")
    other, _ = key_pair(root / "keys", "other")
    signer, stranger = load_private_key(key, b""), load_private_key(other, b"")
    bad = write_tree(make_bert_model(root / "bad"), {"sub/dir/weights.dat": torch_zip()})
    for name, scan_key in (("held", key), ("released", key), ("overruled", key), ("untrusted", other),
                           ("large", key)):
        assert main(["push", str(bad), f"{prefix}/acme/{name}:latest", "--scan", "quarantine", "--scan-key",
                     str(scan_key), "-q"]) == 0

    def reports(name: str):
        store = open_repository(parse_registry_reference(f"{prefix}/acme/{name}:latest"))
        subject = store.resolve("latest")
        return store, subject, stored_reports(store, subject)[-1].report

    for name in ("released", "overruled"):
        store, subject, flagged = reports(name)
        clean = dataclasses.replace(flagged, files=tuple(FileScan(f.path, f.size, f.format) for f in flagged.files),
                                    scanned_at=now())
        attach_report(store, subject, clean, signer)
    store, subject, clean = reports("overruled")
    attach_report(store, subject, dataclasses.replace(clean, files=(FileScan("x.bin", 1, "pickle", (
        Finding("x.bin", "critical", "forged: calls os.system"),)),), scanned_at=now()))
    attach_report(store, subject, dataclasses.replace(clean, scanned_at=now()), stranger)
    store, subject, flagged = reports("untrusted")
    attach_report(store, subject, dataclasses.replace(flagged, files=(FileScan("config.json", 2, "json"),),
                                                      scanned_at=now()))
    store, subject, flagged = reports("large")
    shards = tuple(FileScan(f"shards/part-{i:06d}.safetensors", 1024, "safetensors") for i in range(40_000))
    attach_report(store, subject, dataclasses.replace(flagged, files=flagged.files + shards, scanned_at=now()),
                  signer)
    tokens = f"{TOKEN} user=owner write=acme/\n{READER} user=reader read=*\n"
    with serve_over(registry, root, tokens, lambda host: [prefix, "--plain-http", "--scan", "quarantine",
                                                          "--scan-verify-key", str(pub)]) as url:
        yield url, pub


def scan_panel_as_owner(browser, url: str, repo: str):
    """``repo``'s page drawn for its owner (signed in through the login form), and its Scan panel;
    a reader is asked first whether serve holds the model (403) or serves it (200)."""
    held = httpx.get(f"{url}/api/models/{repo}", headers={"authorization": f"Bearer {READER}"}).status_code
    browser.delete_all_cookies()
    browser.get(f"{url}/ocibridge/login?next=/{repo}")
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url == f"{url}/{repo}")
    return held, visible(browser, "section#scan")


def findings(panel) -> list[list[str]]:
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")]
            for row in panel.find_elements(By.CSS_SELECTOR, "tr.scan-finding")]


def badge(browser) -> tuple[str, str]:
    found = visible(browser, "section#scan .scan-verdict .badge")
    return found.text, found.get_attribute("class") or ""


def test_a_flagged_model_held_by_a_trusted_report_shows_it_and_its_findings(browser, quarantine):
    url, pub = quarantine
    held, panel = scan_panel_as_owner(browser, url, "acme/held")
    assert held == 403
    assert visible(browser, "section#scan .scan-decides").text == \
        "The newest scan report, the one --scan quarantine follows"
    assert badge(browser) == ("flagged", "badge bad")
    assert visible(browser, "section#scan .scan-signed").text == \
        f"signed, verified with a key serve trusts for scan reports (--scan-verify-key {pub})"
    [row] = findings(panel)
    assert row[:2] == ["sub/dir/weights.dat (archive/data.pkl)", "critical"] and "os.system" in row[2], row
    assert not panel.find_elements(By.CSS_SELECTOR, ".scan-passed-over, .scan-withheld")


def test_a_model_released_by_a_signed_clean_report_shows_that_report(browser, quarantine):
    url, pub = quarantine
    held, panel = scan_panel_as_owner(browser, url, "acme/released")
    assert held == 200
    assert visible(browser, "section#scan .scan-decides").text == \
        "The newest scan report, the one --scan quarantine follows"
    assert badge(browser) == ("clean", "badge ok")
    assert f"verified with a key serve trusts for scan reports (--scan-verify-key {pub})" in panel.text
    assert findings(panel) == [] and "flagged" not in panel.text


def test_newer_reports_that_do_not_count_are_named_with_why(browser, quarantine):
    url, pub = quarantine
    held, panel = scan_panel_as_owner(browser, url, "acme/overruled")
    assert held == 200  # the trusted clean report decides, not the unsigned flagged one on top
    assert visible(browser, "section#scan .scan-decides").text == \
        "The scan report --scan quarantine follows (the newest signed by a key serve trusts)"
    assert badge(browser) == ("clean", "badge ok")
    assert visible(browser, "section#scan .scan-passed-over").text == (
        "2 newer reports do not count (1 unsigned, 1 signed by a key serve does not trust): only a report signed "
        "by a key serve trusts decides --scan quarantine.")
    assert findings(panel) == [] and "forged" not in panel.text


def test_with_no_trusted_report_the_flagged_one_holding_the_model_is_shown(browser, quarantine):
    url, pub = quarantine
    held, panel = scan_panel_as_owner(browser, url, "acme/untrusted")
    assert held == 403
    assert visible(browser, "section#scan .scan-decides").text == ("The scan report --scan quarantine follows (none "
                                                                   "is signed by a key serve trusts: the newest "
                                                                   "flagged one holds the model)")
    assert badge(browser) == ("flagged", "badge bad")
    assert visible(browser, "section#scan .scan-signed").text == \
        f"signed, but by none of the keys serve trusts for scan reports (--scan-verify-key {pub})"
    assert visible(browser, "section#scan .scan-passed-over").text == (
        "1 newer report does not count (1 unsigned): only a report signed by a key serve trusts decides "
        "--scan quarantine.")
    assert [row[0] for row in findings(panel)] == ["sub/dir/weights.dat (archive/data.pkl)"]


def test_a_deciding_report_too_large_to_list_is_named_and_says_so(browser, quarantine):
    url, pub = quarantine
    held, panel = scan_panel_as_owner(browser, url, "acme/large")
    assert held == 403
    assert badge(browser) == ("flagged", "badge bad")
    assert "(40006 files)" in visible(browser, "section#scan .scan-verdict").text
    assert f"verified with a key serve trusts for scan reports (--scan-verify-key {pub})" in panel.text
    withheld = visible(browser, "section#scan .scan-withheld").text
    assert withheld.startswith("Its findings are not shown: the report is ") and "this page renders" in withheld
    assert findings(panel) == []
