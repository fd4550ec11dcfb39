"""Mirror jobs with ``scan``: against a real registry, a clean model and a torch checkpoint whose
pickle calls os.system are mirrored; each copy is scanned at the target before its tag is
written. ``refuse``: the clean one is tagged with its signed clean report, the bad one is left
untagged and the run fails naming file, finding and scanner. ``quarantine``: both are tagged, the
bad one with its signed flagged report, which a policy asking for a clean scan refuses."""

from __future__ import annotations

import json
import pickle
import sys
import uuid
from pathlib import Path

import pytest

from ocibridge.api.policy import check_policy
from ocibridge.api.scan_ops import scan_reports
from ocibridge.cli import main
from ocibridge.cli.mirror import mirror_command
from ocibridge.errors import OcibridgeError
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from tests.signing_keys import key_pair
from tests.support.attacks import torch_zip, write_tree

FINDING = "pickle calls os.system"


@pytest.fixture(scope="module")
def sources(registry, tmp_path_factory) -> str:
    """One source repository: ``clean`` (a torch checkpoint of plain data) and ``bad`` (its
    pickle calls os.system)."""
    root = tmp_path_factory.mktemp("scan-sources")
    repo = f"{registry.host}/scanmirror/{uuid.uuid4().hex[:8]}/models"
    clean = write_tree(root / "clean", {"pytorch_model.bin": torch_zip(pickle.dumps({"w": [1, 2]}, protocol=2)),
                                        "config.json": b'{"model_type": "tiny"}\n'})
    bad = write_tree(root / "bad", {"pytorch_model.bin": torch_zip(), "config.json": b'{"model_type": "tiny"}\n'})
    assert main(["push", str(clean), f"{repo}:clean", "-q"]) == 0
    assert main(["push", str(bad), f"{repo}:bad", "-q"]) == 0
    return repo


def _job(path: Path, source: str, target: str, mode: str, key: Path | None) -> Path:
    signed = f'scan_key = "{key}"\n' if key is not None else ""
    path.write_text(f'[defaults]\nscan = "{mode}"\n{signed}\n[[sync]]\nsource = "{source}"\ntarget = "{target}"\n')
    return path


def _tags(reference: str) -> set[str]:
    """The model tags, less the referrers' fallback tags (this registry has no referrers API)."""
    store = open_repository(parse_registry_reference(reference))
    try:
        return {t for t in store.tags() if not t.startswith(("sha256-", "ocibridge-ref-"))}
    finally:
        store.close()


def _policy(path: Path, public: Path) -> Path:
    path.write_text(json.dumps({"default": [{"type": "ocibridgeCleanScan", "keyPath": str(public)}]}))
    return path


def test_refuse_tags_the_clean_copy_with_its_report_and_leaves_the_flagged_one_untagged(
        sources, registry, tmp_path, capsys):
    private, public = key_pair(tmp_path / "k")
    target = f"{registry.host}/scanmirror/{uuid.uuid4().hex[:8]}/refused"
    job = _job(tmp_path / "job.toml", sources, target, "refuse", private)
    assert mirror_command(str(job), as_json=True) == 1
    out = json.loads(capsys.readouterr().out)
    by_tag = {a["source"].rsplit(":", 1)[1]: a for a in out["artifacts"]}
    assert by_tag["clean"]["status"] == "copied"
    assert by_tag["clean"]["scan"]["verdict"] == "clean" and by_tag["clean"]["scan"]["signed"] is True
    bad = by_tag["bad"]
    assert bad["status"] == "failed" and bad["scan"] is None
    assert "refused by the scan" in bad["reason"] and "pytorch_model.bin" in bad["reason"], bad["reason"]
    assert FINDING in bad["reason"] and "ocibridge-scan" in bad["reason"], bad["reason"]

    assert _tags(target) == {"clean"}  # the flagged copy was never tagged
    (report,) = scan_reports(f"{target}:clean")
    assert report.report.verdict == "clean" and report.signed
    assert report.referrer.digest == by_tag["clean"]["scan"]["report"]
    assert check_policy(f"{target}:clean", _policy(tmp_path / "policy.json", public)).allowed is True

    assert mirror_command(str(job)) == 1  # a re-run: the clean copy is there, the flagged one refused again
    text = capsys.readouterr().out
    assert f"skipped {sources}:clean: already mirrored" in text
    refused = f"FAILED  {sources}:bad -> {target}:bad: refused by the scan: pytorch_model.bin "
    assert refused in text and FINDING in text, text
    assert _tags(target) == {"clean"}


def test_quarantine_tags_the_flagged_copy_with_its_flagged_report(sources, registry, tmp_path, capsys):
    private, public = key_pair(tmp_path / "k")
    target = f"{registry.host}/scanmirror/{uuid.uuid4().hex[:8]}/quarantined"
    assert mirror_command(str(_job(tmp_path / "job.toml", sources, target, "quarantine", private)),
                          as_json=True) == 0
    by_tag = {a["source"].rsplit(":", 1)[1]: a for a in json.loads(capsys.readouterr().out)["artifacts"]}
    assert [by_tag[t]["status"] for t in ("clean", "bad")] == ["copied", "copied"]
    assert by_tag["bad"]["scan"]["quarantined"] is True and FINDING in by_tag["bad"]["scan"]["finding"]
    assert by_tag["clean"]["scan"]["quarantined"] is False

    assert _tags(target) == {"clean", "bad"}
    (report,) = scan_reports(f"{target}:bad")
    assert report.report.verdict == "flagged" and report.signed
    assert [f.what for f in report.report.flagged] == [f"{FINDING} (code execution on load)"]
    policy = _policy(tmp_path / "policy.json", public)
    assert check_policy(f"{target}:bad", policy).allowed is False
    assert check_policy(f"{target}:clean", policy).allowed is True

    again = f"{registry.host}/scanmirror/{uuid.uuid4().hex[:8]}/text"  # the text report says each verdict
    assert mirror_command(str(_job(tmp_path / "text.toml", sources, again, "quarantine", None))) == 0
    text = capsys.readouterr().out
    assert "        scan: clean (report sha256:" in text
    assert f"        scan: quarantined: pytorch_model.bin (archive/data.pkl): critical: {FINDING}" in text, text


def test_a_scan_key_without_scan_and_a_run_without_the_scanner_say_one_line(
        sources, registry, tmp_path, monkeypatch, capsys):
    from ocibridge.mirror import load_job
    from ocibridge.scanning import library

    private, _ = key_pair(tmp_path / "k")
    target = f"{registry.host}/scanmirror/{uuid.uuid4().hex[:8]}/none"
    lone_key = tmp_path / "lone.toml"
    lone_key.write_text(f'[[sync]]\nsource = "{sources}"\ntarget = "{target}"\nscan_key = "{private}"\n')
    with pytest.raises(OcibridgeError, match="scan_key signs the scan reports"):
        load_job(lone_key)

    library._library.cache_clear()
    monkeypatch.setitem(sys.modules, "picklescan", None)
    monkeypatch.setitem(sys.modules, "picklescan.scanner", None)
    try:
        assert mirror_command(str(_job(tmp_path / "job.toml", sources, target, "refuse", None))) == 1
        captured = capsys.readouterr()
        assert captured.err == "ocibridge: scanning needs picklescan: pip install 'ocibridge[scan]'\n"
    finally:
        library._library.cache_clear()
    assert _tags(target) == set()  # nothing was copied
