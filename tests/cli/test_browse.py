"""Browsing a registry (issue 53 item 13): ``repo ls`` (the catalog, every page, by prefix),
``manifest fetch`` (the exact bytes, digest-verified; ``--descriptor``) and ``diff`` (files,
config fields, safetensors tensors told apart by chunk digests), against the real registry."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

import ocibridge
from ocibridge.stores.registry import v2catalog as catalog
from tests.support.fixtures import new_repo

CHUNK = 64 * 1024
TENSORS = 6  # 256 KiB each: a change in the first leaves four whose chunks are all the same


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], capture_output=True, timeout=120,
                          env=dict(os.environ), check=False)


def _model(root, *, changed: bool):
    root.mkdir(parents=True)
    tensors = {f"layer.{i}.weight": np.full(64 * 1024, i, dtype=np.float32) for i in range(TENSORS)}
    if changed:
        tensors["layer.0.weight"] = tensors["layer.0.weight"] + 1
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text('{"hidden": 4}\n')
    (root / ("NOTES.md" if changed else "README.md")).write_text("# notes\n")
    return root


@pytest.fixture(scope="module")
def two_versions(registry, tmp_path_factory):
    """v1 and v2 of one model: a tensor's values changed, a file renamed, the version field."""
    tmp = tmp_path_factory.mktemp("browse")
    repo = f"{registry.host}/{new_repo('browse')}"
    for tag, changed in (("v1", False), ("v2", True)):
        ocibridge.push(str(_model(tmp / tag, changed=changed)), f"{repo}:{tag}",
                       options=ocibridge.PushOptions(name="tiny", overrides={"version": tag},
                                                     chunk_threshold=100_000, chunk_size=CHUNK))
    return repo


def test_diff_names_files_config_and_the_one_tensor_changed(two_versions):
    old, new = f"{two_versions}:v1", f"{two_versions}:v2"
    done = run("diff", old, new, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == ocibridge.diff(old, new).as_dict()
    files = {f["path"]: f for f in result["files"]}
    assert files["README.md"]["change"] == "removed" and files["NOTES.md"]["change"] == "added"
    assert files["NOTES.md"]["new"]["size"] == len("# notes\n") and "config.json" not in files
    weights = files["model.safetensors"]
    assert weights["change"] == "changed" and weights["old"]["digest"] != weights["new"]["digest"]
    assert [(t["name"], t["change"], t["how"]) for t in weights["tensors"]] == [
        ("layer.0.weight", "changed", "bytes")]
    # told apart by chunk digests: the tensors whose chunks all agree were never read
    assert weights["sameByChunks"] == TENSORS - 2
    size = weights["old"]["size"]
    assert 0 < result["bytesRead"] < size  # only the chunks of the two tensors next to the change
    assert {"field": "descriptor.version", "old": "v1", "new": "v2"} in result["config"]

    text = run("diff", old, new)
    assert text.returncode == 0
    out = text.stdout.decode()
    assert "~ model.safetensors" in out and "~ tensor layer.0.weight" in out and "+ NOTES.md" in out
    assert "- README.md" in out and "descriptor.version" in out

    same = run("diff", old, old)
    assert same.returncode == 0 and b"no difference" in same.stdout


def test_diff_exit_code_says_whether_the_models_differ(two_versions):
    """``--exit-code``, as git diff's: 1 when they differ (the diff printed, nothing on stderr),
    0 when they do not; without it a difference is a result, exit 0 (docs/cli.md: exit 1 is a
    failure). A failure still says so on stderr, so a script tells the two apart."""
    old, new = f"{two_versions}:v1", f"{two_versions}:v2"
    differ = run("diff", old, new, "--exit-code")
    assert differ.returncode == 1 and differ.stderr == b"" and b"~ model.safetensors" in differ.stdout
    as_json = run("diff", old, new, "--exit-code", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["files"] and as_json.stderr == b""
    same = run("diff", old, old, "--exit-code")
    assert same.returncode == 0 and b"no difference" in same.stdout
    missing = run("diff", old, f"{two_versions}:nope", "--exit-code")
    assert missing.returncode == 1 and missing.stdout == b"" and missing.stderr.startswith(b"ocibridge: error: ")


def test_manifest_fetch_prints_the_exact_bytes_and_the_descriptor(two_versions):
    ref = f"{two_versions}:v1"
    resolved = ocibridge.resolve(ref)
    raw = run("manifest", "fetch", ref)
    assert raw.returncode == 0, raw.stderr
    assert f"sha256:{hashlib.sha256(raw.stdout).hexdigest()}" == resolved.digest
    assert len(raw.stdout) == resolved.descriptor.size
    described = run("manifest", "fetch", ref, "--descriptor")
    assert json.loads(described.stdout) == {"mediaType": resolved.descriptor.mediaType,
                                            "digest": resolved.digest, "size": resolved.descriptor.size}
    fetched = ocibridge.fetch_manifest(f"{two_versions}@{resolved.digest}")
    assert fetched.content == raw.stdout
    missing = run("manifest", "fetch", f"{two_versions}:nope")
    assert missing.returncode == 1 and missing.stderr.startswith(b"ocibridge: error: ")


def test_repo_ls_lists_the_catalog_under_a_prefix_every_page(registry, tmp_path, monkeypatch):
    prefix = new_repo("catalog")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    names = ["a", "b", "c/d", "e"]
    for name in names:
        ocibridge.push(str(model), f"{registry.host}/{prefix}/{name}:v1")
    done = run("repo", "ls", f"{registry.host}/{prefix}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == names  # as oras prints them: without the prefix
    everything = json.loads(run("repo", "ls", registry.host, "--json").stdout)["repositories"]
    assert {f"{prefix}/{n}" for n in names} <= set(everything)

    monkeypatch.setattr(catalog, "PAGE", 2)  # the real registry's Link header, followed page by page
    assert ocibridge.list_repositories(f"{registry.host}/{prefix}").repositories == tuple(names)

    bad = run("repo", "ls", f"{registry.host}/{prefix}:v1")
    assert bad.returncode == 2 and bad.stderr.startswith(b"ocibridge: error: repo ls takes")


def test_diff_text_shows_where_long_values_differ_and_counts_in_words(two_versions):
    """Issue 63 item 3: ``modelfs.diffIds`` (a list of digests, longer than a line) was cut to the
    same prefix on both sides, so nothing visible changed; and "1 tensors differ". Each side now
    shows the part after what both share, and every count agrees with its noun. (Issue 78 left
    ``modelfs.diffIds`` out of the config fields: such a list is checked here as a value.)"""
    from ocibridge.cli.browse import _values

    ids_old = [f"sha256:{c * 64}" for c in "abc"]
    ids_new = [*ids_old[:2], f"sha256:{'d' * 64}"]
    shown_old, shown_new = _values(ids_old, ids_new)
    assert shown_old != shown_new
    assert ids_old[2] in shown_old and ids_new[2] in shown_new  # the digest that differs, whole
    old, new = f"{two_versions}:v1", f"{two_versions}:v2"
    out = run("diff", old, new).stdout.decode()
    assert "(1 tensor differs;" in out and "tensors differ" not in out, out
