import json
import os
import subprocess

import pytest

from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError, UnsafePath
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, BuildOptions, build
from ocibridge.model.extract import extract
from ocibridge.oci.digest import sha256_bytes
from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME, OCI_MANIFEST, Kind, Variant
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.modelgen import make_model, tree


def _built(tmp_path, **opts):
    model = make_model(tmp_path / "model")
    layout = LayoutStore(tmp_path / "layout", create=True)
    art = build(read_directory(model), BuildOptions(**opts))
    copy(art, ARTIFACT_TAG, layout, "v1")
    return model, layout, art


def _leftovers(root):
    return [p for p in root.rglob("*") if ".ocibridge-tmp-" in p.name]


@pytest.mark.parametrize("variant", [None, "tar", "tar+gzip", "tar+zstd"])
def test_pull_is_byte_identical_with_modes(tmp_path, variant):
    opts = {"variants": {k: Variant(variant) for k in Kind}} if variant else {}
    model, layout, _ = _built(tmp_path, **opts)
    result = extract(layout, "v1", tmp_path / "out")
    assert tree(tmp_path / "out") == tree(model)
    assert sorted(result.files) == sorted(tree(model))
    assert not _leftovers(tmp_path / "out")


def test_retag_replaces_entry_and_layout_is_valid(tmp_path):
    model, layout, art = _built(tmp_path)
    (model / "README.md").write_text("changed\n")
    art2 = build(read_directory(model))
    copy(art2, ARTIFACT_TAG, layout, "v1")
    index = json.loads((tmp_path / "layout" / "index.json").read_text())
    tagged = [m for m in index["manifests"] if m.get("annotations", {}).get(ANNOTATION_REF_NAME) == "v1"]
    assert len(tagged) == 1 and tagged[0]["digest"] == art2.descriptor.digest
    assert json.loads((tmp_path / "layout" / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    assert layout.resolve(art.descriptor.digest).digest == art.descriptor.digest  # old one still by digest


def test_skopeo_reads_the_layout(tmp_path):
    _, layout, art = _built(tmp_path)
    out = tmp_path / "skopeo-copy"
    proc = subprocess.run(
        ["skopeo", "copy", f"oci:{tmp_path / 'layout'}:v1", f"oci:{out}:copied"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    copied = LayoutStore(out)
    assert copied.resolve("copied").digest == art.descriptor.digest
    for layer in art.manifest.layers:
        assert (out / "blobs" / "sha256" / layer.digest.split(":")[1]).read_bytes() == \
            (tmp_path / "layout" / "blobs" / "sha256" / layer.digest.split(":")[1]).read_bytes()


def test_corrupt_blob_is_detected_and_nothing_is_written(tmp_path):
    _, layout, art = _built(tmp_path)
    weight = next(x for x in art.manifest.layers if x.annotations["org.cnai.model.filepath"] == "model.safetensors")
    blob = layout.blob_path(weight.digest)
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(DigestMismatch):
        extract(layout, "v1", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # the pull made it; the failure takes it away again


def test_layout_push_blob_rejects_wrong_content(tmp_path):
    import io

    layout = LayoutStore(tmp_path / "l", create=True)
    desc = Descriptor(mediaType="application/octet-stream", digest=sha256_bytes(b"right"), size=5)
    with pytest.raises(DigestMismatch):
        layout.push_blob(desc, io.BytesIO(b"wrong"))
    assert not layout.exists(desc)
    assert not _leftovers(tmp_path / "l")


def _evil_layout(tmp_path, path: str):
    layout = LayoutStore(tmp_path / "evil", create=True)
    import io

    content = b"owned"
    layer = Descriptor(
        mediaType="application/vnd.cnai.model.weight.v1.raw",
        digest=sha256_bytes(content),
        size=len(content),
        annotations={"org.cnai.model.filepath": path},
    )
    layout.push_blob(layer, io.BytesIO(content))
    config = b'{"descriptor":{},"config":{},"modelfs":{"type":"layers","diffIds":["%s"]}}' % (
        layer.digest.encode()
    )
    cdesc = Descriptor.for_bytes("application/vnd.cnai.model.config.v1+json", config)
    layout.push_blob(cdesc, io.BytesIO(config))
    manifest = Manifest(config=cdesc, layers=[layer]).to_json_bytes()
    mdesc = Descriptor(mediaType=OCI_MANIFEST, digest=sha256_bytes(manifest), size=len(manifest))
    layout.push_manifest(mdesc, manifest, "evil")
    return layout


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/owned", "a/../../b", ""])
def test_pull_refuses_paths_outside_dir(tmp_path, path):
    layout = _evil_layout(tmp_path, path)
    with pytest.raises((UnsafePath, OcibridgeError)):
        extract(layout, "evil", tmp_path / "out" / "inner")
    assert not (tmp_path / "out" / "escape.txt").exists()
    inner = tmp_path / "out" / "inner"
    assert not inner.exists() or list(inner.iterdir()) == []


def test_pull_refuses_writing_through_a_symlink_in_dest(tmp_path):
    layout = _evil_layout(tmp_path, "sub/file.txt")
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", out / "sub")
    with pytest.raises(UnsafePath):
        extract(layout, "evil", out)
    assert not (tmp_path / "elsewhere" / "file.txt").exists()


def test_unknown_tag_lists_known_tags(tmp_path):
    _, layout, _ = _built(tmp_path)
    with pytest.raises(NotFound, match="tags: v1"):
        layout.resolve("nope")


def test_thousands_of_small_files_pack_into_few_layers(tmp_path):
    """Far more files than push groups (AUTO_GROUP_THRESHOLD): two layers, every file back."""
    root = tmp_path / "many"
    for d in range(20):
        sub = root / "data" / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"s{f:03d}.csv").write_text(f"{d},{f}\n")
    (root / "model.onnx").write_bytes(b"\0" * 1000)
    layout = LayoutStore(tmp_path / "layout", create=True)
    art = build(read_directory(root))
    copy(art, ARTIFACT_TAG, layout, "many")
    assert len(art.manifest.layers) == 2
    out = tmp_path / "out"
    result = extract(layout, "many", out)
    assert len(result.files) == 2_001
    assert (out / "data" / "d017" / "s007.csv").read_text() == "17,7\n"


def test_index_lists_each_manifest_once_and_skopeo_reads_it_without_a_tag(tmp_path):
    _, layout, art = _built(tmp_path)
    entries = lambda: json.loads((tmp_path / "layout" / "index.json").read_text())["manifests"]  # noqa: E731
    assert [(m["digest"], m["annotations"][ANNOTATION_REF_NAME]) for m in entries()] == \
        [(art.descriptor.digest, "v1")]
    # one artifact, one entry: skopeo picks it without being told a tag
    proc = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{tmp_path / 'layout'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sha256_bytes(proc.stdout.encode()) == art.descriptor.digest
    # a second tag adds a tagged entry; an untagged push of a listed manifest adds nothing
    copy(art, ARTIFACT_TAG, layout, "v2")
    layout.push_manifest(art.descriptor, art.manifest_bytes)
    assert sorted(m["annotations"][ANNOTATION_REF_NAME] for m in entries()) == ["v1", "v2"]
    # a manifest that loses its last tag stays listed, untagged, and its blobs stay reachable
    model2 = make_model(tmp_path / "model2", seed=3)
    art2 = build(read_directory(model2))
    copy(art2, ARTIFACT_TAG, layout, "v1")
    copy(art2, ARTIFACT_TAG, layout, "v2")
    listed = {m["digest"]: (m.get("annotations") or {}).get(ANNOTATION_REF_NAME) for m in entries()}
    assert len(entries()) == 3 and listed[art.descriptor.digest] is None
    assert layout.resolve(art.descriptor.digest).digest == art.descriptor.digest
    assert all(layout.exists(b) for b in [art.manifest.config, *art.manifest.layers])


def _cli(*args):
    from ocibridge.cli import main

    return main(list(args))


def test_failed_copy_into_a_new_layout_leaves_no_directory(tmp_path, capsys):
    _built(tmp_path)
    assert _cli("copy", f"oci:{tmp_path}/layout:missing", f"oci:{tmp_path}/new:v") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ocibridge: error:") and "tag not found" in err
    assert not (tmp_path / "new").exists()
    # one whose parent is missing is refused before anything is made (core/parentdir.py)
    assert _cli("copy", f"oci:{tmp_path}/layout:v1", f"oci:{tmp_path}/new/deep/store:v") == 1
    err = capsys.readouterr().err
    assert err == (f"ocibridge: error: oci:{tmp_path}/new/deep/store:v: no such directory {tmp_path}/new/deep "
                   f"to make store in (create it first: mkdir -p {tmp_path}/new/deep)\n"), err
    assert not (tmp_path / "new").exists()
    # a directory the user made is kept, and left as it was: empty
    (tmp_path / "mine").mkdir()
    assert _cli("pull", f"oci:{tmp_path}/layout:missing", f"oci:{tmp_path}/mine:v") == 1
    assert list((tmp_path / "mine").iterdir()) == []


def test_file_vanishing_mid_push_leaves_no_new_layout(tmp_path, capsys, monkeypatch):
    """A real file-system error after some blobs were stored: blobs and layout both go."""
    import ocibridge.kinds.directory.source as directory  # the directory format's reader

    model = make_model(tmp_path / "m")
    listed = directory.read_directory

    def read_then_lose_a_file(*args, **kwargs):
        package = listed(*args, **kwargs)
        os.unlink(model / "weights" / "part-2.bin")
        return package

    monkeypatch.setattr(directory, "read_directory", read_then_lose_a_file)
    (tmp_path / "fresh").mkdir()  # a new layout is made in a directory that exists (core/parentdir.py)
    assert _cli("push", str(model), f"oci:{tmp_path}/fresh/store:v1", "--concurrency", "1") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "part-2.bin" in err
    assert list((tmp_path / "fresh").iterdir()) == []
    # into an existing layout: it is left exactly as it was
    _, layout, art = _built(tmp_path)
    before = sorted(p.name for p in (tmp_path / "layout").rglob("*"))
    index = (tmp_path / "layout" / "index.json").read_bytes()
    (model / "weights" / "part-2.bin").write_bytes(b"back again")
    assert _cli("push", str(model), f"oci:{tmp_path}/layout:v2", "--concurrency", "1") == 1
    assert sorted(p.name for p in (tmp_path / "layout").rglob("*")) == before
    assert (tmp_path / "layout" / "index.json").read_bytes() == index


def _small_files(root, count, size):
    for d in range(count // 100):
        sub = root / "data" / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"s{f:03d}.csv").write_bytes(bytes([d % 256, f % 256]) * (size // 2))
    return root


def _pack(src, layout_dir):
    import ocibridge.api.model_ops as api

    return api.push(str(src), f"oci:{layout_dir}:v", transfer=api.TransferOptions(concurrency=1))


def test_small_files_pack_in_linear_time_and_memory_independent_of_content(tmp_path, monkeypatch):
    """Issue 2's 'Done when': many small files pack in time linear in their number, and memory
    holds metadata only, never content (tracemalloc peaks; CPU time so other load matters less)."""
    import time
    import tracemalloc

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    peaks = {}
    for size in (100, 40_000):  # 0.1 MB vs 40 MB of content in 1,000 files
        src = _small_files(tmp_path / f"m{size}", 1000, size)
        tracemalloc.start()
        try:
            _pack(src, tmp_path / f"l{size}")
            peaks[size] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks[40_000] < peaks[100] + 4_000_000, peaks  # content does not stay in memory
    assert peaks[40_000] < 16_000_000, peaks
    cpu = {}
    for count in (1000, 4000):  # 1,000 files of 100 bytes: the tree the memory check packed
        src = tmp_path / "m100" if count == 1000 else _small_files(tmp_path / f"n{count}", count, 100)
        taken = []
        for attempt in range(2):  # the best of two: a busy machine's cache misses count as CPU time too
            start = time.process_time()
            _pack(src, tmp_path / f"t{count}-{attempt}")
            taken.append(time.process_time() - start)
        cpu[count] = min(taken)
    assert cpu[4000] < 7 * cpu[1000], cpu  # 4x the files: ~4x the time (quadratic would be 16x)
