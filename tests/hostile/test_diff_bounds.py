"""``ocibridge diff`` bounded and honest (issue 63 item 1, issue 62 red team): files and sizes
always, tensors within ``--max-read`` (what was left out said), and a safetensors header whose
tensors overlap or lie outside the file marks that file's entry instead of a wrong diff or a
crash. The CLI runs as a process against the real registry."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

import ocibridge
from tests.cli.test_browse import two_versions  # noqa: F401  # the module's two versions, shared
from tests.support.fixtures import new_repo


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ), check=False)


def test_max_read_keeps_files_and_says_what_tensors_it_left(two_versions):  # noqa: F811
    old, new = f"{two_versions}:v1", f"{two_versions}:v2"
    done = run("diff", old, new, "--max-read", "100K")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "~ model.safetensors" in out and "+ NOTES.md" in out and "- README.md" in out  # no reads needed
    assert "descriptor.version" in out  # the configs, within the budget
    assert "(no tensor compared: reading the headers would pass the read budget" in out, out
    assert "(at most 100.0 KiB) to compare configs and tensors" in out, out
    result = json.loads(run("diff", old, new, "--max-read", "100K", "--json").stdout)
    assert result["complete"] is False and result["readBudget"] == 100 * 1024
    assert 0 < result["bytesRead"] <= 100 * 1024
    whole = json.loads(run("diff", old, new, "--json").stdout)
    assert whole["complete"] is True and whole["readBudget"] is None

    bad = run("diff", old, new, "--max-read", "lots")
    assert bad.returncode != 0 and bad.stderr.startswith("ocibridge: error: --max-read")
    assert "Traceback" not in bad.stderr


def _safetensors(path, header: dict[str, object], data: bytes) -> None:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize(("header", "said"), [
    ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, "tensors 'a' and 'b' overlap"),
    ({"a": {"dtype": "F32", "shape": [250], "data_offsets": [0, 1000]}}, "tensor 'a' lies outside the file's data"),
], ids=["overlapping", "out-of-file"])
def test_a_hostile_header_marks_its_file_and_the_rest_is_diffed(header, said, registry, tmp_path):
    repo = f"{registry.host}/{new_repo('hostile')}"
    for number in (1, 2):
        root = tmp_path / f"v{number}"
        root.mkdir()
        _safetensors(root / "model.safetensors", header, bytes([number]) * 24)
        (root / "config.json").write_text(f'{{"hidden": {number}}}\n')
        ocibridge.push(str(root), f"{repo}:v{number}", options=ocibridge.PushOptions(chunks=False))
    done = run("diff", f"{repo}:v1", f"{repo}:v2", "--json")
    assert done.returncode == 0, done.stderr
    files = {f["path"]: f for f in json.loads(done.stdout)["files"]}
    weights = files["model.safetensors"]
    assert weights["change"] == "changed" and weights["tensors"] is None
    assert said in weights["notCompared"], weights
    text = run("diff", f"{repo}:v1", f"{repo}:v2")
    assert text.returncode == 0 and said in text.stdout and "Traceback" not in text.stderr
