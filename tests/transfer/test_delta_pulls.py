"""Delta pulls (issue 43): a new version whose chunk table shares chunks with a blob the model
cache holds moves only its other chunks (counted on the registry log through the proxy), gives
files byte-identical to a full pull, re-hashes every reused chunk (a tampered cached blob costs
a fetch, never a wrong byte), and a model without a table downloads whole as before."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import blake3
import numpy as np
import pytest
from safetensors.numpy import save_file
from support.entry_probe import run_entry
from support.fixtures import new_repo

import ocibridge
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE
from ocibridge.core import notices

MiB = 1024 * 1024
TENSORS = 10  # of 4 MiB each: a changed one spans 5 chunks of 1 MiB (the header shifts them)


def _model(directory: Path, changed: int | None) -> Path:
    """A safetensors model of ``TENSORS`` float32 tensors (40 MiB); ``changed``: that one
    tensor has other values (the same shape: the header, hence every offset, stays). Random
    values (uniform: what a chunk's reuse depends on is its bytes alone, and they are drawn
    in a fifth of the time normal ones take)."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(43)
    tensors = {f"layers.{i:02d}.weight": rng.random((1024, 1024), dtype=np.float32) for i in range(TENSORS)}
    if changed is not None:
        other = np.random.default_rng(7)
        tensors[f"layers.{changed:02d}.weight"] = other.random((1024, 1024), dtype=np.float32)
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text('{"model_type": "toy"}')
    return directory


@pytest.fixture(scope="module")
def versions(registry, tmp_path_factory):
    """v1 and v2 (one tensor in ten changed) pushed with chunk tables, and v1/v2 without:
    (repo, repo without tables, v1 dir, v2 dir)."""
    base = tmp_path_factory.mktemp("delta")
    v1, v2 = _model(base / "v1", None), _model(base / "v2", 3)
    chunked, plain = new_repo(), new_repo()
    for tag, src in (("v1", v1), ("v2", v2)):
        ocibridge.push(str(src), f"{registry.host}/{chunked}:{tag}",
                       options=ocibridge.PushOptions(chunk_threshold=16 << 20))
        ocibridge.push(str(src), f"{registry.host}/{plain}:{tag}")
    return chunked, plain, v1, v2


def _layer_of(snapshot: Path) -> str:
    return "sha256:" + hashlib.sha256((snapshot / "model.safetensors").read_bytes()).hexdigest()


def _moved(proxy, digest: str) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{digest}"))


def _same_tree(a: Path, b: Path) -> None:
    names = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _path(ref: str) -> tuple[Path, list[str]]:
    heard: list[str] = []
    with notices.heard_by(heard.append):
        where = ocibridge.path(ref)
    return where, heard


def test_v2_after_v1_moves_only_its_changed_chunks(versions, fault_proxy, tmp_path, monkeypatch):
    repo, _, _, v2 = versions
    _path(f"{fault_proxy.host}/{repo}:v1")
    snap, heard = _path(f"{fault_proxy.host}/{repo}:v2")
    layer = _layer_of(snap)
    size = (v2 / "model.safetensors").stat().st_size
    moved = _moved(fault_proxy, layer)
    assert 0 < moved <= 0.15 * size, (moved, size)
    assert moved == 5 * DEFAULT_CHUNK_SIZE  # the changed tensor's 4 MiB, shifted by the header: 5 chunks
    ranged = [r for r in fault_proxy.requests_matching("GET", f"/blobs/{layer}")]
    assert len(ranged) == 1 and ranged[0].range is not None  # one run, one Range request
    chunks = -(-size // DEFAULT_CHUNK_SIZE)
    assert [h for h in heard if h.startswith("reused ")] == [
        f"reused {chunks - 5} of {chunks} chunks ({(size - 5 * MiB) / MiB:.1f} MiB) of {layer}; fetched 5.0 MiB"]
    _same_tree(snap, v2)
    # a full pull of v2 into a fresh cache gives the same bytes
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "fresh"))
    fault_proxy.clear()
    full, heard = _path(f"{fault_proxy.host}/{repo}:v2")
    assert _moved(fault_proxy, layer) == size
    assert not [h for h in heard if h.startswith("reused ")]
    _same_tree(full, snap)


def test_a_tampered_cached_chunk_is_fetched_not_used(versions, fault_proxy):
    repo, _, v1, v2 = versions
    first, _ = _path(f"{fault_proxy.host}/{repo}:v1")
    blob = first / "model.safetensors"  # a hard link to the cache's blob
    os.chmod(blob, 0o644)
    with open(blob, "r+b") as f:  # chunk 30: one v2 shares with v1
        f.seek(30 * MiB + 123)
        f.write(b"\xff" * 16)
    os.chmod(blob, 0o444)
    snap, heard = _path(f"{fault_proxy.host}/{repo}:v2")
    layer = _layer_of(snap)
    assert _moved(fault_proxy, layer) == 6 * DEFAULT_CHUNK_SIZE  # the 5 changed and the tampered one
    assert any(h.startswith("reused ") for h in heard)
    _same_tree(snap, v2)


def test_without_a_table_v2_downloads_whole(versions, fault_proxy):
    _, plain, _, v2 = versions
    _path(f"{fault_proxy.host}/{plain}:v1")
    snap, heard = _path(f"{fault_proxy.host}/{plain}:v2")
    assert _moved(fault_proxy, _layer_of(snap)) == (v2 / "model.safetensors").stat().st_size
    assert not [h for h in heard if h.startswith("reused ")]
    _same_tree(snap, v2)


def test_the_cli_says_what_it_reused_on_stderr_and_in_json(versions, fault_proxy):
    repo, _, _, _ = versions
    assert run_entry(("path", f"{fault_proxy.host}/{repo}:v1"), ())[0] == 0
    code, out, err, _ = run_entry(("path", f"{fault_proxy.host}/{repo}:v2", "--json"), ())
    assert code == 0, err
    doc = json.loads(out)
    (delta,) = doc["delta"]
    assert delta["reused"] == delta["chunks"] - 5 and delta["fetchedBytes"] == 5 * MiB
    assert f"reused {delta['reused']} of {delta['chunks']} chunks" in err


def _pull(ref: str, dest: Path, **kw) -> list[str]:
    heard: list[str] = []
    with notices.heard_by(heard.append):
        ocibridge.pull(ref, str(dest), **kw)
    return [h for h in heard if h.startswith("reused ")]


def test_pull_over_the_old_version_moves_only_the_changed_chunks(versions, fault_proxy, tmp_path):
    repo, _, v1, v2 = versions
    out = tmp_path / "out"
    assert _pull(f"{fault_proxy.host}/{repo}:v1", out) == []  # nothing held: whole
    fault_proxy.clear()
    said = _pull(f"{fault_proxy.host}/{repo}:v2", out, options=ocibridge.PullOptions(on_existing="overwrite"))
    layer = "sha256:" + hashlib.sha256((v2 / "model.safetensors").read_bytes()).hexdigest()
    assert _moved(fault_proxy, layer) == 5 * DEFAULT_CHUNK_SIZE  # the old file in DEST gave the rest
    assert len(said) == 1 and said[0].startswith("reused 36 of 41 chunks")
    _same_tree(out, v2)
    code, json_out, err, _ = run_entry(("pull", f"{fault_proxy.host}/{repo}:v1", str(out), "--overwrite", "--json"), ())
    assert code == 0, err
    (delta,) = json.loads(json_out)["delta"]  # back to v1: v2's file in DEST gives what the two share
    assert delta["reused"] == 36 and delta["chunks"] == 41 and delta["requests"] == 1
    _same_tree(out, v1)


def test_a_pull_whose_files_dest_holds_reads_no_chunk_table(versions, fault_proxy, tmp_path):
    """The chunk table is read when the first layer is fetched, from the store the pull's cache
    fetches from: a pull of v1 over v1 fetches no layer, so no table either (before, the table's
    GET came first, whatever the pull then needed)."""
    repo, _, v1, _ = versions
    out = tmp_path / "out"
    _pull(f"{fault_proxy.host}/{repo}:v1", out)
    fault_proxy.clear()
    assert _pull(f"{fault_proxy.host}/{repo}:v1", out, options=ocibridge.PullOptions(on_existing="overwrite")) == []
    assert [r.path for r in fault_proxy.requests if "/blobs/" in r.path] == []
    _same_tree(out, v1)


def test_a_pull_with_nothing_here_to_diff_against_reads_the_table_once_to_check_the_layer(
        versions, fault_proxy, tmp_path):
    """No model cache and an empty DEST: no chunk of the layer is held here, so no delta; the
    table is read once all the same, to check the layer by its chunks as it lands (issue 91: no
    whole-blob SHA-256), and the layer comes whole, the files as a full pull gives them."""
    from ocibridge.cache.deltas import _TABLE_ANNOTATION
    from ocibridge.chunks.chain import bound_table_descriptor
    from ocibridge.chunks.chunktable import ANNOTATION_DIGEST
    from ocibridge.oci.models import Manifest

    assert _TABLE_ANNOTATION == ANNOTATION_DIGEST  # what a pull asks before it loads a chunk module
    repo, _, v1, _ = versions
    fetched = ocibridge.fetch_manifest(f"{fault_proxy.host}/{repo}:v1")
    manifest = Manifest.model_validate_json(fetched.content)
    table = bound_table_descriptor(manifest)
    assert table is not None  # v1 binds a table: else this proves nothing
    fault_proxy.clear()
    assert _pull(f"{fault_proxy.host}/{repo}:v1", tmp_path / "fresh") == []
    assert len(fault_proxy.requests_matching("GET", f"/blobs/{table.digest}")) == 1
    layer = "sha256:" + hashlib.sha256((v1 / "model.safetensors").read_bytes()).hexdigest()
    assert _moved(fault_proxy, layer) == (v1 / "model.safetensors").stat().st_size
    _same_tree(tmp_path / "fresh", v1)


def test_pull_into_an_empty_directory_reuses_the_model_cache(versions, fault_proxy, tmp_path):
    repo, _, _, v2 = versions
    _path(f"{fault_proxy.host}/{repo}:v1")
    said = _pull(f"{fault_proxy.host}/{repo}:v2", tmp_path / "fresh")
    layer = "sha256:" + hashlib.sha256((v2 / "model.safetensors").read_bytes()).hexdigest()
    assert _moved(fault_proxy, layer) == 5 * DEFAULT_CHUNK_SIZE
    assert len(said) == 1
    _same_tree(tmp_path / "fresh", v2)


def test_a_pull_reads_every_chunk_the_model_cache_holds_not_one_byte_fetched(versions, fault_proxy, tmp_path):
    """v1 and v2 in the model cache (issue 53 item 8): v1's layer is there whole, so a pull of
    v1 into a fresh directory (the CLI as a process) fetches none of its bytes; it fetched the
    5 MiB v2 does not share when the layer's own table was skipped."""
    repo, _, v1, _ = versions
    for tag in ("v1", "v2"):
        assert run_entry(("path", f"{fault_proxy.host}/{repo}:{tag}", "-q"), ())[0] == 0
    fault_proxy.clear()
    code, out, err, _ = run_entry(("pull", f"{fault_proxy.host}/{repo}:v1", str(tmp_path / "fresh"), "--json"), ())
    assert code == 0, err
    layer = "sha256:" + hashlib.sha256((v1 / "model.safetensors").read_bytes()).hexdigest()
    assert _moved(fault_proxy, layer) == 0
    (delta,) = json.loads(out)["delta"]
    assert delta["reused"] == delta["chunks"] == 41 and delta["fetchedBytes"] == 0, delta
    _same_tree(tmp_path / "fresh", v1)


def test_a_lazy_read_of_v2_uses_the_chunks_v1_left_in_the_cache(versions, fault_proxy):
    from ocibridge.api.lazy_ops import open_model

    repo, _, _, v2 = versions
    _path(f"{fault_proxy.host}/{repo}:v1")
    data = (v2 / "model.safetensors").read_bytes()
    with open_model(f"{fault_proxy.host}/{repo}:v2", warn=None) as model:
        layer = model.file("model.safetensors").layer.digest
        start, end = 30 * MiB + 5, 33 * MiB  # chunks 30-32: the same in v1
        assert model.read("model.safetensors", start, end) == data[start:end]
        assert _moved(fault_proxy, layer) == 0
        start, end = 13 * MiB, 14 * MiB  # in the changed tensor: fetched
        assert model.read("model.safetensors", start, end) == data[start:end]
        assert 0 < _moved(fault_proxy, layer) <= 2 * DEFAULT_CHUNK_SIZE


def test_a_whole_read_of_v2_reads_chunks_v1_left_not_one_fetch(versions, fault_proxy, monkeypatch):
    """A whole sequential read normally becomes one fetch of the layer (lazyread.layerfill);
    not when the cache holds chunks of it: then only the changed chunks move."""
    import fsspec

    from ocibridge.lazyread import blobreader

    monkeypatch.setattr(blobreader, "FILL_MIN_SIZE", 8 * MiB)
    monkeypatch.setattr(blobreader, "FILL_AFTER", 2 * MiB)
    repo, _, _, v2 = versions
    _path(f"{fault_proxy.host}/{repo}:v1")
    data = (v2 / "model.safetensors").read_bytes()
    fs = fsspec.filesystem("ocibridge", skip_instance_cache=True)
    ref = f"{fault_proxy.host}/{repo}:v2"
    with fs.open(f"{ref}/model.safetensors", "rb") as f:
        assert f.read() == data
    layer = fs.model(ref).file("model.safetensors").layer.digest
    fs.model(ref).close()
    assert 0 < _moved(fault_proxy, layer) <= 0.15 * len(data)


def test_a_killed_delta_resumes_from_what_it_wrote(versions, fault_proxy):
    """``path`` of v2 killed while its delta fetches the changed chunks leaves the blob's partial
    file; the next ``path`` reuses the chunks it holds (checked against the table) and fetches
    only the rest."""
    import signal
    import subprocess
    import sys
    import time

    from support.faultproxy import throttle

    from ocibridge.cache.modelcache import model_cache_root

    repo, _, _, v2 = versions
    _path(f"{fault_proxy.host}/{repo}:v1")
    data = (v2 / "model.safetensors").read_bytes()
    layer = "sha256:" + hashlib.sha256(data).hexdigest()
    fault_proxy.add("GET", f"/blobs/{layer}", throttle(MiB, 2 * MiB), times=None)  # 2 chunks at once, 3 in 3 s
    ref = f"{fault_proxy.host}/{repo}:v2"
    child = subprocess.Popen([sys.executable, "-m", "ocibridge", "path", ref, "-q"],
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    name = f".ocibridge-partial-{layer.split(':')[1]}"
    deadline = time.monotonic() + 60
    partial = None
    while time.monotonic() < deadline:  # until two fetched chunks are written past the reused 12
        found = list(model_cache_root().rglob(name))
        if found and found[0].stat().st_size >= 14 * MiB:
            partial = found[0]
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert partial is not None and partial.exists()
    first = _moved(fault_proxy, layer)
    assert 2 * MiB <= first < 5 * MiB
    fault_proxy.clear()
    snap, heard = _path(ref)
    second = _moved(fault_proxy, layer) - first
    assert 0 < second <= 5 * MiB - 2 * MiB  # not the chunks the killed run had written
    assert [h for h in heard if h.startswith("reused ") and "from an interrupted run" in h], heard
    _same_tree(snap, v2)
    assert not partial.exists()


def test_the_delta_pulls_example_of_lazy_md_runs(versions, registry, tmp_path):
    """docs/lazy.md, "Delta pulls": its ``bash`` blocks run as written (./v1, ./v2 as above; fenced
    ``bash``, not ``sh``, so test_doc_examples, which has no v1 and v2, leaves them to this test)."""
    import re
    import shutil
    import subprocess
    import sys

    text = (Path(__file__).resolve().parents[2] / "docs" / "lazy.md").read_text()
    section = text[text.index("## Delta pulls"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
    assert blocks
    _, _, v1, v2 = versions
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(v1, work / "v1")
    shutil.copytree(v2, work / "v2")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ocibridge").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ocibridge "$@"\n')
    (bin_dir / "ocibridge").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "REGISTRY": f"{registry.host}/{new_repo('doc')}", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for code in blocks:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (done.stdout, done.stderr)
    assert (work / "out" / "model.safetensors").read_bytes() == (v2 / "model.safetensors").read_bytes()


def test_the_limits_table_of_lazy_md_is_what_fixed_chunks_give():
    """docs/lazy.md, "What fixed chunks cannot reuse": the figures, measured again here (the
    chunks named by BLAKE3, as push's tables name them; random values, uniform as _model's)."""
    from safetensors.numpy import save

    def chunks(blob: bytes) -> list[str]:
        view = memoryview(blob)
        return [blake3.blake3(view[i:i + MiB]).hexdigest() for i in range(0, len(blob), MiB)]

    rng = np.random.default_rng(43)
    base = {f"layers.{i:02d}.weight": rng.random((1024, 1024), dtype=np.float32) for i in range(40)}
    old = set(chunks(save(base)))

    def reused(tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> str:
        new = chunks(save(tensors, metadata=metadata))
        return f"{sum(c in old for c in new)} of {len(new)}"

    tuned = dict(base)
    for i in range(0, 40, 10):
        tuned[f"layers.{i:02d}.weight"] = np.random.default_rng(i).random((1024, 1024), dtype=np.float32)
    renamed = {k.replace("layers.00", "layer.00"): v for k, v in base.items()}
    added = {**base, "zz.bias": np.zeros(16, dtype=np.float32)}
    reshaped = {**base, "layers.05.weight": base["layers.05.weight"][:1000]}
    measured = [reused(tuned), reused(renamed), reused(added), reused(base, {"v": "2"}), reused(reshaped)]
    assert measured == ["141 of 161", "160 of 161", "0 of 161", "0 of 161", "22 of 160"]
    text = (Path(__file__).resolve().parents[2] / "docs" / "lazy.md").read_text()
    for row in ("| 141 of 161 |", "| 160 of 161 |", "| 0 of 161 |", "| 22 of 160 (the chunks before it) |"):
        assert row in text, row


@pytest.mark.parametrize("tamper", ["garbage", "lying", "fifo", "dev-zero", "huge-chunk-size"])
def test_a_tampered_chunk_index_costs_a_fetch_never_a_wrong_byte_nor_a_hang(versions, fault_proxy, tamper):
    """The chunk index (models/chunks/tables/blake3/<blob hex>: push's tables name BLAKE3) is in
    a cache others may write: a table file of garbage, one whose digests lie about the blob, a
    FIFO (open would wait for ever), a link to /dev/zero (a read without end) or an absurd chunk
    size is not trusted: v2 is whole and byte-identical, whatever the index said."""
    repo, _, _, v2 = versions
    first, _ = _path(f"{fault_proxy.host}/{repo}:v1")
    tables = Path(os.environ["OCIBRIDGE_CACHE"]) / "models" / "chunks" / "tables" / "blake3"
    blob_hex = _layer_of(first).split(":")[1]
    table = tables / blob_hex
    assert table.is_file()
    size = (first / "model.safetensors").stat().st_size
    os.chmod(table, 0o644)
    if tamper == "garbage":
        table.write_bytes(os.urandom(4096))
    elif tamper == "lying":  # every line names one chunk v2 needs, at every offset of v1's blob
        lines = table.read_text().splitlines()
        wanted = blake3.blake3((v2 / "model.safetensors").read_bytes()[3 * MiB:4 * MiB]).hexdigest()
        table.write_text("\n".join([lines[0], *([wanted] * (len(lines) - 1))]) + "\n")
    elif tamper == "huge-chunk-size":
        table.write_text(f"ocibridge-chunks 1 999999999 {size}\n" + "0" * 64 + "\n")
    else:
        table.unlink()
        if tamper == "fifo":
            os.mkfifo(table)
        else:
            table.symlink_to("/dev/zero")
    snap, _ = _path(f"{fault_proxy.host}/{repo}:v2")
    _same_tree(snap, v2)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_the_pushed_chunk_table_cache_neither_waits_nor_floods(tmp_path, monkeypatch, kind):
    """``$OCIBRIDGE_CACHE/chunk-tables`` (push's memory of chunk tables) holding a FIFO or a link
    to /dev/zero: looked up, it is no entry (within a second), not a wait or a read without end."""
    import threading

    from ocibridge.chunks import chunkcache

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path))
    digest = "sha256:" + "ab" * 32
    path = chunkcache._path(digest, DEFAULT_CHUNK_SIZE, "blake3")
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    found: list[object] = []
    reader = threading.Thread(
        target=lambda: found.append(chunkcache.lookup(digest, 4 * MiB, DEFAULT_CHUNK_SIZE, "blake3")), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive() and found == [None]
