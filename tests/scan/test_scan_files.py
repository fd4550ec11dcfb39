"""The scanner on files (no registry): every attack of tests/support/attacks.py flagged by
content whatever its name, naming the file, the finding and the scanner; no finding that flags
on the project's own fixtures (tests/data, examples) nor on benign files of each kind; a
safetensors header check reads the header only; without the library, one line naming the extra."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from ocibridge.cli import main
from ocibridge.scanning import scan_directory, scan_files
from ocibridge.scanning.content import LocalFile
from ocibridge.scanning.formats import scan_content
from tests.support.attacks import attack_tree, onnx_external, system_pickle, write_tree

ROOT = Path(__file__).resolve().parents[2]


def test_each_attack_is_flagged_by_content_naming_file_finding_and_scanner(tmp_path, capsys):
    from tests.scan.test_scan_registry import EXPECTED

    tree = write_tree(tmp_path / "m", attack_tree())
    assert main(["scan", "--path", str(tree)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tree}: flagged (12 files, scanner ocibridge-scan ") and "picklescan" in out[0]
    report = scan_directory(tree)
    assert {f.path for f in report.files if any(x.flags for x in f.findings)} == set(EXPECTED)
    for path, finding in EXPECTED.items():
        assert any(line.strip().startswith(path) and finding in line for line in out), (path, out)


@pytest.mark.parametrize("where", ["tests/data", "examples"])
def test_the_projects_own_fixtures_are_not_flagged(where):
    report = scan_directory(ROOT / where)
    assert report.verdict == "clean", [f.line() for f in report.flagged]
    assert len(report.files) > 3
    kinds = {f.format for f in report.files}
    assert "safetensors" in kinds and (where == "examples" or {"gguf", "zip"} <= kinds)


def test_benign_files_of_every_kind_are_not_flagged(tmp_path):
    import torch
    from safetensors.numpy import save_file

    torch.save({"w": torch.zeros(3), "b": torch.ones(2, 2, dtype=torch.bfloat16)}, tmp_path / "pytorch_model.bin")
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "renamed.safetensors.bak")
    torch.save({"w": torch.ones(3)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    np.save(tmp_path / "floats.npy", np.arange(10.0))
    np.savez_compressed(tmp_path / "arrays.npz", a=np.arange(3), b=np.ones(2))
    (tmp_path / "plain.pkl").write_bytes(pickle.dumps({"a": [1, 2, 3], "b": "x"}, protocol=5))
    save_file({"x": np.ones((4, 4), dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "model.onnx").write_bytes(onnx_external("weights/model.onnx.data"))
    (tmp_path / "config.json").write_text(json.dumps({"class_name": "Dense", "config": {"units": 4}}))
    (tmp_path / "README.md").write_text("cos\nmodel card\n")
    report = scan_directory(tmp_path)
    assert report.verdict == "clean", [f.line() for f in report.findings]
    assert not report.findings  # nothing to say at all: no noise on real files
    kinds = {f.path: f.format for f in report.files}
    assert kinds["model.onnx"] == "onnx" and kinds["floats.npy"] == "npy" and kinds["plain.pkl"] == "pickle"


def test_objects_in_an_npz_and_a_lambda_in_an_hdf5_model_config(tmp_path):
    """np.savez of an object array (a zip of .npy: each member judged), and a legacy Keras .h5 whose
    root attribute model_config names a Lambda layer (HDF5 keeps the attribute's JSON as written)."""
    np.savez(tmp_path / "arrays.npz", ok=np.arange(3), bad=np.array([{"a": 1}], dtype=object))
    config = json.dumps({"class_name": "Sequential", "config": {"layers": [
        {"class_name": "Lambda", "config": {"name": "evil", "function": ["4wEAAAAA", None, None]}}]}})
    (tmp_path / "model.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(88) + b"model_config\x00" + config.encode())
    found = {f.path: [x.what for x in f.findings if x.flags] for f in scan_directory(tmp_path).files}
    assert found["arrays.npz"] == ["numpy array of Python objects: loading it unpickles (allow_pickle=True)"]
    assert found["model.h5"] == ["Keras Lambda layer in the HDF5 model_config: its Python code runs when the "
                                 "model loads"]


def test_protocol_0_and_a_pickle_under_any_name(tmp_path):
    old = b"cos\nsystem\n(S'echo pwned'\ntR."
    report = scan_files([("notes.txt", write_tree(tmp_path, {"notes.txt": old}) / "notes.txt"),
                         ("tokenizer.model", write_tree(tmp_path, {"t.model": system_pickle()}) / "t.model")])
    assert [f.what for f in report.flagged] == ["pickle calls os.system (code execution on load)"] * 2


class _Counting:
    def __init__(self, inner):
        self.inner, self.size, self.read_bytes = inner, inner.size, 0

    def read(self, start=0, end=None):
        data = self.inner.read(start, end)
        self.read_bytes += len(data)
        return data


def test_a_safetensors_check_reads_its_header_only(tmp_path):
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((64, 1024, 256), dtype=np.float32)}, str(tmp_path / "big.safetensors"))
    content = _Counting(LocalFile(tmp_path / "big.safetensors"))
    kind, found = scan_content("big.safetensors", content)
    assert (kind, found) == ("safetensors", [])
    assert content.size > 64 << 20 and content.read_bytes < 1 << 16, content.read_bytes


def test_without_the_library_one_line_names_the_extra(tmp_path, monkeypatch, capsys):
    from ocibridge.scanning import library

    library._library.cache_clear()
    monkeypatch.setitem(sys.modules, "picklescan", None)
    monkeypatch.setitem(sys.modules, "picklescan.scanner", None)
    try:
        assert main(["scan", "--path", str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert err == "ocibridge: error: scanning needs picklescan: pip install 'ocibridge[scan]'\n"
    finally:
        library._library.cache_clear()


def test_a_clean_scan_requirement_needs_exactly_one_key_source(tmp_path, capsys):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "ocibridgeCleanScan"}]}))
    assert main(["pull", "oci:nowhere:v1", str(tmp_path / "out"), "--policy", str(policy)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ocibridgeCleanScan" in err and "exactly one of keyPath" in err


def test_a_door_judges_a_stored_model_before_its_tag_moves(tmp_path, capsys):
    """A layout's model (its raw files copied to scratch, its weights in one tar layer unpacked
    member by member), pushed by digest: the door scans it, attaches the report and refuses or quarantines as asked."""
    from ocibridge.scanning.screening import judge_stored
    from ocibridge.scanning.stored import newest, stored_reports
    from ocibridge.stores.layout import LayoutStore
    from tests.signing_keys import key_pair

    tree = write_tree(tmp_path / "m", attack_tree())
    assert main(["push", str(tree), f"oci:{tmp_path}/layout:v1", "-q", "--group", "weight"]) == 0  # weights: one tar
    capsys.readouterr()
    store = LayoutStore(tmp_path / "layout")
    subject = store.resolve("v1")
    from ocibridge.signing import keys

    private, public = key_pair(tmp_path / "k")
    verdict = judge_stored(store, subject, mode="refuse", key=keys.load_private_key(private, None), identity="m")
    assert verdict.refused and not verdict.quarantined
    assert "critical: pickle calls" in verdict.line() and "ocibridge-scan" in verdict.line()
    flagged = {f.path for f in verdict.report.files if any(x.flags for x in f.findings)}
    assert len(flagged) == len(attack_tree())
    held = newest(stored_reports(store, subject, [("k", keys.load_public_key(public))]))
    assert held is not None and held.referrer.digest == verdict.referrer and held.report.verdict == "flagged"
    assert judge_stored(store, subject, mode="quarantine", attach=False).quarantined


def test_a_pickle_past_the_opcode_budget_is_flagged_as_scanned_in_part(tmp_path, monkeypatch):
    """The library keeps each opcode in memory: a pickle that hides its call behind more opcodes
    than the budget is stopped there and flagged, not read on (nor passed as clean)."""
    from ocibridge.scanning import library

    hidden = b"\x80\x02(" + b"N" * 5000 + b"l0" + system_pickle()[2:]  # 5000 Nones, dropped, then the call
    path = write_tree(tmp_path, {"big.pkl": hidden}) / "big.pkl"
    assert [f.what for f in scan_files([("big.pkl", path)]).flagged] == [
        "pickle calls os.system (code execution on load)"]
    monkeypatch.setattr(library, "MAX_OPCODES", 1000)
    assert [(f.severity, f.what) for f in scan_files([("big.pkl", path)]).findings] == [
        ("high", "pickle of more than 1000 opcodes: scanned in part")]
