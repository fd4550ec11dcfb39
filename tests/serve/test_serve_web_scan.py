"""The model page's Scan panel, against a real registry and serve: a model scanned clean by
``ocibridge scan REF --key`` shows its clean verdict and scanner, signed (verified once serve has
the scanner's key); one pushed with ``push --scan quarantine`` shows flagged and each finding's
file; one never scanned says so. Under ``--scan quarantine`` the report is verified with the keys
that decide the quarantine (``--scan-verify-key``), with no ``--verify-key`` at all, and the panel
shows the report the quarantine follows, naming the newer ones that do not count."""

from __future__ import annotations

import dataclasses
import html as html_lib
import re
import uuid

import pytest
from serving import serving

from ocibridge.cli import main
from ocibridge.hubserver.repo.quarantined import trusted_keys
from ocibridge.hubserver.web.facts import DOCUMENT_MAX
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.scanning.files import now
from ocibridge.scanning.report import FileScan, Finding
from ocibridge.scanning.stored import REPORT_MAX, attach_report, stored_reports
from ocibridge.signing.keys import load_private_key
from ocibridge.signing.verify import VerifyPolicy
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_bert_model
from tests.serve.test_serve_web import get, page_checks
from tests.signing_keys import key_pair
from tests.support.attacks import torch_zip, write_tree


@pytest.fixture(scope="module")
def scanned(tmp_path_factory, registry):
    """acme/clean (scanned clean, report and model signed by scanner.key), acme/bad (a torch
    pickle calling os.system as sub/dir/weights.dat, quarantined with its signed flagged report),
    acme/plain (never scanned), acme/unsigned (its report attached without a key), acme/foreign
    (signed by scanner.key, its report by another key), acme/overruled (scanned clean by
    scanner.key, then a clean one by another key, then a flagged report attached unsigned on top),
    acme/held (three reports attached unsigned: clean, flagged, clean), acme/twin (acme/bad's
    manifest pushed again, a clean report signed by scanner.key beside it), acme/large (scanned clean by
    scanner.key, then a flagged report of 40,000 files signed by scanner.key: a document over the
    page's 4 MiB), acme/released (acme/bad's files, quarantined, then released by ``scan --release``)."""
    root = tmp_path_factory.mktemp("scanpage")
    prefix = f"{registry.host}/scanpage-{uuid.uuid4().hex[:10]}"
    key, pub = key_pair(root / "keys", "scanner")
    clean = f"{prefix}/acme/clean:latest"
    assert main(["push", str(make_bert_model(root / "clean")), clean, "-q"]) == 0
    assert main(["scan", clean, "--key", str(key)]) == 0
    assert main(["sign", clean, "--key", str(key)]) == 0
    bad = make_bert_model(root / "bad")
    write_tree(bad, {"sub/dir/weights.dat": torch_zip()})
    assert main(["push", str(bad), f"{prefix}/acme/bad:latest", "--scan", "quarantine", "--scan-key", str(key),
                 "-q"]) == 0
    twin = f"{prefix}/acme/twin:latest"  # acme/bad's manifest, released in its own repository
    assert main(["push", str(bad), twin, "-q"]) == 0
    store = open_repository(parse_registry_reference(twin))
    subject = store.resolve("latest")
    scanned_bad = stored_reports(open_repository(parse_registry_reference(f"{prefix}/acme/bad:latest")), subject)
    attach_report(store, subject, dataclasses.replace(scanned_bad[-1].report, scanned_at=now(), files=tuple(
        FileScan(f.path, f.size, f.format) for f in scanned_bad[-1].report.files)), load_private_key(key, b""))
    assert main(["push", str(make_bert_model(root / "plain")), f"{prefix}/acme/plain:latest", "-q"]) == 0
    unsigned = f"{prefix}/acme/unsigned:latest"
    assert main(["push", str(make_bert_model(root / "unsigned")), unsigned, "-q"]) == 0
    assert main(["scan", unsigned]) == 0
    other, _ = key_pair(root / "keys", "other")
    foreign = f"{prefix}/acme/foreign:latest"
    assert main(["push", str(make_bert_model(root / "foreign")), foreign, "-q"]) == 0
    assert main(["scan", foreign, "--key", str(other)]) == 0
    assert main(["sign", foreign, "--key", str(key)]) == 0
    overruled = f"{prefix}/acme/overruled:latest"
    assert main(["push", str(make_bert_model(root / "overruled")), overruled, "-q"]) == 0
    assert main(["scan", overruled, "--key", str(key)]) == 0
    store = open_repository(parse_registry_reference(overruled))
    subject = store.resolve("latest")
    trusted = stored_reports(store, subject)[-1].report
    forged = (FileScan("pytorch_model.bin", 1, "pickle", (Finding("pytorch_model.bin", "critical", "forged: calls "
                                                                  "os.system"),)),)
    assert main(["scan", overruled, "--key", str(other)]) == 0
    attach_report(store, subject, dataclasses.replace(trusted, files=forged, scanned_at=now()))
    held = f"{prefix}/acme/held:latest"
    assert main(["push", str(make_bert_model(root / "held")), held, "-q"]) == 0
    assert main(["scan", held]) == 0
    store = open_repository(parse_registry_reference(held))
    subject = store.resolve("latest")
    unsigned_clean = stored_reports(store, subject)[-1].report
    attach_report(store, subject, dataclasses.replace(unsigned_clean, files=forged, scanned_at=now()))
    attach_report(store, subject, dataclasses.replace(unsigned_clean, scanned_at=now()))
    large = f"{prefix}/acme/large:latest"
    assert main(["push", str(make_bert_model(root / "large")), large, "-q"]) == 0
    assert main(["scan", large, "--key", str(key)]) == 0
    store = open_repository(parse_registry_reference(large))
    subject = store.resolve("latest")
    shards = tuple(FileScan(f"shards/part-{i:06d}.safetensors", 1024, "safetensors") for i in range(40_000))
    attach_report(store, subject, dataclasses.replace(stored_reports(store, subject)[-1].report,
                                                      files=forged + shards, scanned_at=now()),
                  load_private_key(key, b""))
    released = f"{prefix}/acme/released:latest"  # flagged, then released by its owner: findings kept
    assert main(["push", str(bad), released, "--scan", "quarantine", "--scan-key", str(key), "-q"]) == 0
    assert main(["scan", released, "--key", str(key), "--release"]) == 0
    return prefix, pub


def _panel(html: str) -> str:
    found = re.search(r'<section id="scan" aria-labelledby="scan-h">(.*?)</section>', html, re.S)
    assert found is not None, "no Scan panel"
    return html_lib.unescape(found[1])


def test_the_model_page_shows_the_newest_scan_report_its_verdict_and_findings(scanned):
    prefix, _ = scanned
    with serving([prefix]) as served:
        clean = _panel(page_checks(get(served.url + "/acme/clean")))
        bad = _panel(page_checks(get(served.url + "/acme/bad")))
        plain = _panel(page_checks(get(served.url + "/acme/plain")))
        unsigned = _panel(page_checks(get(served.url + "/acme/unsigned")))
    assert '<span class="badge ok">clean</span>' in clean and "flagged" not in clean
    assert re.search(r'by <span class="scan-scanner">ocibridge-scan \d+\.\d+\.\d+ \(picklescan [^)]+\)</span>', clean)
    assert "signed (serve was given no --verify-key or --scan-verify-key: not verified here)" in clean
    assert '<tr class="scan-finding">' not in clean  # a clean tiny BERT: nothing found
    assert '<span class="badge bad">flagged</span>' in bad and "ocibridge-scan" in bad
    rows = re.findall(r'<tr class="scan-finding">(.*?)</tr>', bad)
    assert any(r.startswith("<td>sub/dir/weights.dat (archive/data.pkl)</td><td>critical</td><td>pickle calls "
                            "os.system") for r in rows), rows
    assert "Not scanned" in plain and "badge" not in plain
    assert '<span class="badge ok">clean</span>' in unsigned
    assert '<span class="scan-signed">unsigned</span>' in unsigned


def test_the_scan_panel_says_which_verify_key_verified_the_report(scanned):
    prefix, pub = scanned
    with serving([prefix], verify=VerifyPolicy.from_files([str(pub)])) as served:
        clean = _panel(page_checks(get(served.url + "/acme/clean")))
        foreign = _panel(page_checks(get(served.url + "/acme/foreign")))
    assert "signed, verified with serve’s --verify-key" in clean and str(pub.name) in clean, clean
    assert '<span class="badge ok">clean</span>' in clean
    assert "signed, but by none of serve’s --verify-key keys" in foreign and "verified with" not in foreign


def test_under_scan_quarantine_the_panel_verifies_the_report_with_the_scan_verify_key(scanned):
    """serve --scan quarantine --scan-verify-key scanner.pub, no --verify-key: the key that releases
    a model is the key the page verifies its report with, and says so; a report signed by another
    key is not verified by it (acme/bad, flagged and signed by that key, is held: not asked)."""
    prefix, pub = scanned
    with serving([prefix], quarantine=trusted_keys([str(pub)], None)) as served:
        clean = _panel(page_checks(get(served.url + "/acme/clean")))
        foreign = _panel(page_checks(get(served.url + "/acme/foreign")))
    assert (f'<span class="scan-signed">signed, verified with a key serve trusts for scan reports '
            f'(--scan-verify-key {pub})</span>') in clean, clean
    assert '<span class="scan-decides">The newest scan report, the one --scan quarantine follows</span>' in clean
    assert "scan-passed-over" not in clean
    assert (f'<span class="scan-signed">signed, but by none of the keys serve trusts for scan reports '
            f'(--scan-verify-key {pub})</span>') in foreign, foreign
    assert "verified with" not in foreign and "--verify-key" not in foreign.replace("--scan-verify-key", "")
    with serving([prefix], quarantine=trusted_keys([str(pub)], None),
                 verify=VerifyPolicy.from_files([str(pub)])) as served:  # and --verify-key: tried after
        foreign = _panel(page_checks(get(served.url + "/acme/foreign")))
    assert (f"signed, but by none of the keys serve trusts for scan reports (--scan-verify-key {pub}), nor by "
            "serve’s --verify-key keys") in foreign, foreign


def test_a_report_signed_with_serves_own_key_is_verified_as_its_own(scanned):
    """serve --scan quarantine --sign-key scanner.key: its own reports release a model, and the
    page names that key as serve's own."""
    prefix, pub = scanned
    own = load_private_key(pub.with_suffix(".key"), b"")
    with serving([prefix], quarantine=trusted_keys([], own)) as served:
        clean = _panel(page_checks(get(served.url + "/acme/clean")))
    assert ("signed, verified with a key serve trusts for scan reports (serve’s own key (--attest-key, else "
            "--sign-key))") in clean, clean


def test_under_scan_quarantine_the_panel_shows_the_report_that_decides_not_a_newer_one_that_does_not(scanned):
    """acme/overruled: scanned clean by the trusted key, then a clean report signed by another key
    and a flagged one attached unsigned on top. serve follows the trusted one (the model is served);
    the page shows that one as deciding, not the flagged newest, and says the two newer ones do not
    count and why. Without --scan quarantine the page shows the newest, as before."""
    prefix, pub = scanned
    with serving([prefix], quarantine=trusted_keys([str(pub)], None)) as served:
        assert get(served.url + "/api/models/acme/overruled").status_code == 200  # not held: the clean one decides
        page = _panel(page_checks(get(served.url + "/acme/overruled")))
    assert ('<span class="scan-decides">The scan report --scan quarantine follows (the newest signed by a key '
            'serve trusts)</span>: <span class="badge ok">clean</span>') in page, page
    assert (f'<span class="scan-signed">signed, verified with a key serve trusts for scan reports '
            f'(--scan-verify-key {pub})</span>') in page
    assert ('<p class="scan-passed-over">2 newer reports do not count (1 unsigned, 1 signed by a key serve does '
            'not trust): only a report signed by a key serve trusts decides --scan quarantine.</p>') in page, page
    assert "forged" not in page and '<tr class="scan-finding">' not in page  # the unsigned report's finding
    with serving([prefix]) as served:
        plain = _panel(page_checks(get(served.url + "/acme/overruled")))
    assert "The newest scan report: " in plain and "scan-decides" not in plain and "scan-passed-over" not in plain
    assert '<span class="badge bad">flagged</span>' in plain and "forged: calls os.system" in plain  # the newest
    assert '<span class="scan-signed">unsigned</span>' in plain
    shown = lambda panel: re.findall(r"Referrer <code>(sha256:[0-9a-f]{64})</code>", panel)  # noqa: E731
    assert len(shown(plain)) == 1 and shown(plain) != shown(page)  # another report than the one that decides


def test_with_no_trusted_report_the_panel_shows_the_flagged_one_that_holds_the_model(scanned):
    """acme/held: no report signed by a key serve trusts, so the newest flagged one holds the model
    (an unsigned clean one on top lets nothing out); the page shows that one, and says why the newer does not count."""
    prefix, pub = scanned
    with serving([prefix], quarantine=trusted_keys([str(pub)], None)) as served:
        assert get(served.url + "/api/models/acme/held").status_code == 403  # held
        page = _panel(page_checks(get(served.url + "/acme/held")))
    assert ('<span class="scan-decides">The scan report --scan quarantine follows (none is signed by a key serve '
            'trusts: the newest flagged one holds the model)</span>: <span class="badge bad">flagged</span>') in page
    assert "forged: calls os.system" in page and '<span class="scan-signed">unsigned</span>' in page
    assert ('<p class="scan-passed-over">1 newer report does not count (1 unsigned): only a report signed by a key '
            'serve trusts decides --scan quarantine.</p>') in page, page


def test_a_deciding_report_too_large_for_the_page_is_still_the_one_the_panel_names(scanned):
    """acme/large: its newest trusted report, flagged, is a signed document over the page's 4 MiB
    (40,000 files) and within the scan reports' one limit. The quarantine holds the model by it,
    and the panel names that one (digest, verdict, the key that signed it), saying its findings
    are not shown for its size: not the older clean report, nor "Not scanned"."""
    prefix, pub = scanned
    store = open_repository(parse_registry_reference(f"{prefix}/acme/large:latest"))
    layers = {r.digest: parse_manifest_bytes(store.fetch_bytes(r), r.mediaType).layers[0]  # type: ignore[union-attr]
              for r in store.referrers(store.resolve("latest"))}
    (big,) = [digest for digest, layer in layers.items() if layer.size > DOCUMENT_MAX]
    size = layers[big].size
    assert size <= REPORT_MAX
    with serving([prefix], quarantine=trusted_keys([str(pub)], None)) as served:
        assert get(served.url + "/api/models/acme/large").status_code == 403  # held by the large one
        page = _panel(page_checks(get(served.url + "/acme/large")))
    assert ('<span class="scan-decides">The newest scan report, the one --scan quarantine follows</span>: '
            '<span class="badge bad">flagged</span> (40001 files)') in page, page
    assert f"Referrer <code>{big}</code>" in page
    assert (f'<span class="scan-signed">signed, verified with a key serve trusts for scan reports '
            f'(--scan-verify-key {pub})</span>') in page
    assert (f'<p class="scan-withheld">Its findings are not shown: the report is {size:,} bytes, more than '
            f'the {DOCUMENT_MAX:,} this page renders') in page, page
    assert '<tr class="scan-finding">' not in page and "forged" not in page
    with serving([prefix]) as served:  # without --scan quarantine: the newest, the same one
        plain = _panel(page_checks(get(served.url + "/acme/large")))
    assert f"Referrer <code>{big}</code>" in plain and '<p class="scan-withheld">' in plain


def test_one_manifest_in_two_repositories_is_held_by_the_reports_of_each(scanned):
    """acme/twin holds acme/bad's very manifest, released there by a clean report signed by the
    trusted key; acme/bad's own flagged report still holds it in acme/bad, however soon after the
    other is asked (serve keeps a manifest's state a few seconds: in its repository, as its
    referrers are), and each page names its own repository's report."""
    prefix, _ = scanned
    (twin, bad) = (open_repository(parse_registry_reference(f"{prefix}/acme/{name}:latest")).resolve("latest")
                   for name in ("twin", "bad"))
    assert twin.digest == bad.digest
    with serving([prefix], quarantine=trusted_keys([str(scanned[1])], None)) as served:
        assert get(served.url + "/api/models/acme/twin").status_code == 200
        assert get(served.url + "/api/models/acme/bad").status_code == 403
        assert get(served.url + "/api/models/acme/twin").status_code == 200
        twin_page = _panel(page_checks(get(served.url + "/acme/twin")))
        bad_page = _panel(page_checks(get(served.url + "/acme/bad")))
    assert '<span class="badge ok">clean</span>' in twin_page and '<span class="badge bad">flagged</span>' in bad_page


def test_a_released_report_is_drawn_as_released_not_as_flagged_and_keeps_its_findings(scanned):
    """A report its owner released (``scan --release``) is neither clean nor holding the model:
    its badge is its own, and the findings it was released with stay listed."""
    prefix, _ = scanned
    with serving([prefix]) as served:
        page = _panel(page_checks(get(served.url + "/acme/released")))
    assert '<span class="badge warn">released</span>' in page, page
    assert '<span class="badge bad">' not in page
    rows = re.findall(r'<tr class="scan-finding">(.*?)</tr>', page)
    assert any(r.startswith("<td>sub/dir/weights.dat (archive/data.pkl)</td><td>critical</td>") for r in rows), rows
