"""ocibridge scan against a real registry: attacks generated here, pushed, scanned by content
(each flagged naming the file, the finding and the scanner), the report attached as a signed
referrer; inspect shows the newest verdict; --rescan attaches a newer one; a policy asking for a
clean scan refuses a flagged or unscanned model; push --scan refuses before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ocibridge.cli import main
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.scanning.report import PREDICATE_TYPE
from ocibridge.signing.attest import find_attestations
from ocibridge.stores.registry import open_repository
from tests.signing_keys import key_pair
from tests.support.attacks import attack_tree, torch_zip, write_tree

#: what each attack must be flagged for, by the file it is in
EXPECTED = {
    "pytorch_model.bin": "pickle calls os.system",
    "model.safetensors": "pickle calls os.system",
    "flax_model.msgpack": "pickle calls os.system",
    "weights.dat": "pickle calls os.system",
    "sub/dir/pytorch_model.bin": "pickle calls os.system",
    "raw.pkl": "pickle calls os.system",
    "model.joblib": "pickle calls posix.system",
    "compressed.joblib": "pickle calls posix.system",
    "objects.npy": "numpy array of Python objects",
    "model.keras": "Keras Lambda layer 'evil'",
    "model.onnx": "ONNX external data path '../../etc/passwd'",
    "lying.safetensors": "tensor 'w' lies outside the file's data",
}
SCANNER = "ocibridge-scan"


def benign(root: Path) -> Path:
    """A small model of real files: safetensors, a torch checkpoint, config and tokenizer."""
    import torch
    from safetensors.numpy import save_file

    root.mkdir(parents=True)
    save_file({"w": np.ones((8, 8), dtype=np.float32)}, str(root / "model.safetensors"))
    torch.save({"w": torch.zeros(4)}, root / "pytorch_model.bin")
    (root / "config.json").write_text('{"model_type": "tiny"}\n')
    return root


def _policy(path: Path, public: Path) -> Path:
    path.write_text(json.dumps({"default": [{"type": "ocibridgeCleanScan", "keyPath": str(public)}]}))
    return path


@pytest.fixture
def attacks(tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(write_tree(tmp_path / "attacks", attack_tree())), ref, "-q"]) == 0
    capsys.readouterr()
    return ref


def test_every_attack_is_flagged_by_content_and_the_report_is_signed(attacks, tmp_path, capsys):
    private, public = key_pair(tmp_path / "k")
    assert main(["scan", attacks, "--key", str(private)]) == 1
    out = capsys.readouterr().out
    assert ": flagged (" in out.splitlines()[0] and SCANNER in out.splitlines()[0]
    for path, finding in EXPECTED.items():
        assert any(line.strip().startswith(f"{path}") and finding in line for line in out.splitlines()), (path, out)
    assert "report attached: sha256:" in out and "(signed)" in out
    store = open_repository(parse_registry_reference(attacks))
    (found,) = [a for a in find_attestations(store, store.resolve("v1")) if a.predicate_type == PREDICATE_TYPE]
    assert main(["verify", attacks, "--key", str(public), "--attestation-type", PREDICATE_TYPE]) == 0
    assert main(["inspect", attacks]) == 0
    scan_line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Scan:")]
    assert scan_line and "flagged" in scan_line[0] and "signed" in scan_line[0] and SCANNER in scan_line[0]


def test_a_clean_model_scans_clean_and_a_policy_asking_for_a_clean_scan_obeys_the_newest(
        tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(benign(tmp_path / "m")), ref, "-q"]) == 0
    private, public = key_pair(tmp_path / "k")
    _, other = key_pair(tmp_path / "o", "other")
    policy = _policy(tmp_path / "policy.json", public)
    capsys.readouterr()
    assert main(["pull", ref, str(tmp_path / "none"), "--policy", str(policy)]) == 1  # no report: refused
    assert "no scan report" in capsys.readouterr().err and not (tmp_path / "none").exists()
    assert main(["scan", ref]) == 0  # unsigned: anyone's word, no policy counts it
    capsys.readouterr()
    assert main(["pull", ref, str(tmp_path / "unsigned"), "--policy", str(policy)]) == 1
    capsys.readouterr()
    assert main(["scan", ref, "--key", str(private)]) == 0
    assert ": clean (" in capsys.readouterr().out
    assert main(["pull", ref, str(tmp_path / "out"), "--policy", str(policy), "-q"]) == 0
    assert (tmp_path / "out" / "model.safetensors").is_file()
    from ocibridge.api.policy import check_policy

    assert check_policy(ref, policy).allowed is True
    assert main(["pull", ref, str(tmp_path / "other"), "--policy", str(_policy(tmp_path / "o.json", other))]) == 1
    capsys.readouterr()
    # a newer report, flagged, by the same key (a later scanner finding more): the newest counts
    from ocibridge.scanning.files import now
    from ocibridge.scanning.library import scanner
    from ocibridge.scanning.report import FileScan, Finding, ScanReport
    from ocibridge.scanning.stored import attach_report
    from ocibridge.signing import keys

    store = open_repository(parse_registry_reference(ref))
    subject = store.resolve("v1")
    finding = Finding("pytorch_model.bin", "critical", "pickle calls os.system (code execution on load)",
                      "archive/data.pkl")
    later = ScanReport(scanner(), (FileScan("pytorch_model.bin", 1, "zip", (finding,)),), now(), subject.digest)
    attach_report(store, subject, later, keys.load_private_key(private, None), "x")
    assert main(["pull", ref, str(tmp_path / "flagged"), "--policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pytorch_model.bin (archive/data.pkl): critical: pickle calls os.system" in err
    assert SCANNER in err and not (tmp_path / "flagged").exists()


def test_a_flagged_model_is_refused_under_the_policy(attacks, tmp_path, capsys):
    private, public = key_pair(tmp_path / "k")
    assert main(["scan", attacks, "--key", str(private)]) == 1
    capsys.readouterr()
    policy = _policy(tmp_path / "policy.json", public)
    assert main(["pull", attacks, str(tmp_path / "out"), "--policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    assert "is flagged" in err and SCANNER in err and "compressed.joblib" in err  # (the first flagged file)
    assert not (tmp_path / "out").exists()
    from ocibridge.api.policy import check_policy

    verdict = check_policy(attacks, policy)  # the API's verdict: the same refusal, word for word
    assert verdict.allowed is False and verdict.reasons == (err.removeprefix("ocibridge: error: ").strip(),)


def test_rescan_attaches_a_newer_report_and_skips_what_this_version_scanned(tmp_path, registry, capsys):
    from tests.support.fixtures import new_repo

    prefix = new_repo("scanprefix")
    bad, good = f"{registry.host}/{prefix}/bad:v1", f"{registry.host}/{prefix}/good:v1"
    assert main(["push", str(write_tree(tmp_path / "bad", {"sub/dir/weights.dat": torch_zip()})), bad, "-q"]) == 0
    assert main(["push", str(benign(tmp_path / "good")), good, "-q"]) == 0
    capsys.readouterr()
    assert main(["scan", "--rescan", f"{registry.host}/{prefix}"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    bad_line = next(line for line in lines if "/bad:v1" in line)
    assert "flagged: sub/dir/weights.dat (archive/data.pkl): critical: pickle calls os.system" in bad_line
    assert "clean" in next(line for line in lines if "/good:v1" in line)
    assert main(["scan", "--rescan", f"{registry.host}/{prefix}"]) == 1
    assert all("already scanned by this version" in line for line in capsys.readouterr().out.splitlines())
    assert main(["scan", "--rescan", f"{registry.host}/{prefix}", "--all"]) == 1
    assert all("report sha256:" in line for line in capsys.readouterr().out.splitlines())
    from ocibridge.api.scan_ops import scan_reports

    assert len(scan_reports(bad)) == 2  # the first and the one --all added; the newest counts


def test_push_scan_refuses_a_flagged_source_before_anything_is_written(tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}:v1"
    source = write_tree(tmp_path / "m", {"model.safetensors": torch_zip(), "config.json": b"{}"})
    assert main(["push", str(source), ref, "--scan", "refuse"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    assert "model.safetensors (archive/data.pkl): critical: pickle calls os.system" in err and SCANNER in err
    assert main(["tags", f"{registry.host}/{unique_repo}"]) != 0  # the repository was never written
    capsys.readouterr()


def test_push_scan_quarantine_stores_it_with_its_flagged_report(tmp_path, registry, unique_repo, capsys):
    ref = f"{registry.host}/{unique_repo}:v1"
    private, public = key_pair(tmp_path / "k")
    source = write_tree(tmp_path / "m", {"model.onnx": attack_tree()["model.onnx"]})
    assert main(["push", str(source), ref, "--scan", "quarantine", "--scan-key", str(private)]) == 0
    out = capsys.readouterr().out
    assert "scan: flagged, quarantined: model.onnx: high: ONNX external data path" in out and "(signed)" in out
    assert main(["pull", ref, str(tmp_path / "out"), "--policy", str(_policy(tmp_path / "p.json", public))]) == 1
    assert "ONNX external data path '../../etc/passwd'" in capsys.readouterr().err
    clean = f"{registry.host}/{unique_repo}:clean"
    assert main(["push", str(benign(tmp_path / "good")), clean, "--scan", "refuse", "--scan-key", str(private),
                 "-q"]) == 0
    assert main(["pull", clean, str(tmp_path / "good-out"), "--policy", str(tmp_path / "p.json"), "-q"]) == 0


def test_header_checks_read_the_header_not_the_tensors(tmp_path, fault_proxy, unique_repo, capsys):
    """A 96 MiB safetensors (push binds a chunk table from 64 MiB): its scan moves its header's
    chunk, not the file."""
    from safetensors.numpy import save_file

    root = tmp_path / "big"
    root.mkdir()
    save_file({"w": np.zeros((96, 1024, 256), dtype=np.float32)}, str(root / "model.safetensors"))
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(root), ref, "-q"]) == 0
    capsys.readouterr()
    fault_proxy.requests.clear()
    assert main(["scan", ref]) == 0
    moved = sum(r.response_bytes for r in fault_proxy.requests if "/blobs/" in r.path and r.method == "GET")
    assert moved < 8 << 20, moved
