import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile

import pytest
import zstandard

from ocibridge.errors import SourceError
from ocibridge.kinds.directory.source import read_directory
from ocibridge.model.builder import ARTIFACT_TAG, AUTO_GROUP_THRESHOLD, BuildOptions, build
from ocibridge.model.classify import classify, infer_kind, parse_overrides
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, Family, Kind, Variant
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy
from tests.modelgen import make_model


def _push(src, layout, tag="v1", **opts):
    art = build(read_directory(src), BuildOptions(**opts))
    copy(art, ARTIFACT_TAG, LayoutStore(layout, create=True), tag)
    return art


def test_same_digest_in_two_layouts(tmp_path):
    model = make_model(tmp_path / "m")
    a = _push(model, tmp_path / "l1")
    b = _push(model, tmp_path / "l2")
    assert a.descriptor.digest == b.descriptor.digest
    la, lb = LayoutStore(tmp_path / "l1"), LayoutStore(tmp_path / "l2")
    assert la.resolve("v1").digest == lb.resolve("v1").digest == a.descriptor.digest


@pytest.mark.parametrize("variant", ["tar", "tar+gzip", "tar+zstd"])
def test_digest_ignores_mtime_owner_mode_bits_and_path(tmp_path, variant):
    opts = {"variants": {k: Variant(variant) for k in Kind}}
    first = make_model(tmp_path / "one" / "model")
    digest1 = _push(first, tmp_path / "l1", **opts).descriptor.digest
    # Another checkout path, other mtimes, other owners, group/other write bits: same digest.
    second = tmp_path / "elsewhere" / "deeper" / "model"
    shutil.copytree(first, second)
    for p in second.rglob("*"):
        os.utime(p, (1_700_000_000, 1_700_000_000))
        if os.geteuid() == 0:
            os.chown(p, 1234, 5678)
        mode = p.stat().st_mode & 0o777
        os.chmod(p, mode | 0o020)
    digest2 = _push(second, tmp_path / "l2", **opts).descriptor.digest
    assert digest1 == digest2


def test_content_change_changes_digest(tmp_path):
    model = make_model(tmp_path / "m")
    d1 = _push(model, tmp_path / "l1").descriptor.digest
    (model / "config.json").write_text('{"hidden": 5}\n')
    assert _push(model, tmp_path / "l2").descriptor.digest != d1


def test_default_layers_raw_with_annotations_and_diffids(tmp_path):
    art = build(read_directory(make_model(tmp_path / "m")), BuildOptions(family=Family.CNCF))
    m = art.manifest
    assert m.artifactType == "application/vnd.cncf.model.manifest.v1+json"
    assert m.config.mediaType == "application/vnd.cncf.model.config.v1+json"
    config = json.loads(art.config_bytes)
    assert config["modelfs"]["diffIds"] == [layer.digest for layer in m.layers]
    kinds = {}
    for layer in m.layers:
        a = layer.annotations
        assert layer.mediaType.endswith(".raw")
        path = a["org.cncf.model.filepath"]
        assert a[ANNOTATION_TITLE] == path
        meta = json.loads(a["org.cncf.model.file.metadata+json"])
        assert meta["uid"] == 0 and meta["mtime"] == "1970-01-01T00:00:00Z"
        kinds[path] = layer.mediaType.split(".model.")[1].split(".v1")[0]
    assert kinds["model.safetensors"] == "weight"
    assert kinds["weights/part-2.bin"] == "weight"
    assert kinds["config.json"] == "weight.config"
    assert kinds["README.md"] == "doc"
    assert kinds["scripts/run.sh"] == "code"
    assert kinds["data.csv"] == "dataset"
    run = next(x for x in m.layers if x.annotations["org.cncf.model.filepath"] == "scripts/run.sh")
    assert json.loads(run.annotations["org.cncf.model.file.metadata+json"])["mode"] == 0o755


def _plain(media_type: str, blob: bytes) -> bytes:
    if media_type.endswith("+gzip"):
        return gzip.decompress(blob)
    if media_type.endswith("+zstd"):
        return zstandard.ZstdDecompressor().decompressobj().decompress(blob)
    return blob


@pytest.mark.parametrize("variant", ["tar", "tar+gzip", "tar+zstd"])
def test_tar_layers_are_reproducible_and_diffids_match(tmp_path, variant):
    model = make_model(tmp_path / "m")
    art = build(read_directory(model), BuildOptions(variants={Kind.DOC: Variant(variant)}, group={Kind.WEIGHT_CONFIG}))
    config = json.loads(art.config_bytes)
    for layer, diff_id in zip(art.manifest.layers, config["modelfs"]["diffIds"], strict=True):
        blob = art.open_blob(layer).read()
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == layer.digest
        if layer.mediaType.endswith(".raw"):
            continue
        plain = _plain(layer.mediaType, blob)
        assert "sha256:" + hashlib.sha256(plain).hexdigest() == diff_id
        with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
            members = tar.getmembers()
            names = [x.name for x in members]
            assert names == sorted(names, key=str.encode)
            for x in members:
                assert (x.mtime, x.uid, x.gid, x.uname, x.gname) == (0, 0, 0, "", "")
    grouped = [x for x in art.manifest.layers if ".weight.config." in x.mediaType]
    assert len(grouped) == 1 and grouped[0].mediaType.endswith(".tar")
    if variant == "tar+gzip":
        doc = next(x for x in art.manifest.layers if ".doc." in x.mediaType)
        head = art.open_blob(doc).read(10)
        assert head[4:8] == b"\0\0\0\0" and head[3] == 0  # no mtime, no file name


def test_many_small_files_grouped_into_one_layer(tmp_path):
    root = tmp_path / "many"
    (root / "code").mkdir(parents=True)
    for i in range(AUTO_GROUP_THRESHOLD + 5):
        (root / "code" / f"f{i:04d}.py").write_text(f"x = {i}\n")
    (root / "w.safetensors").write_bytes(b"\1" * 100)
    art = build(read_directory(root))
    assert len(art.manifest.layers) == 2
    code = next(x for x in art.manifest.layers if ".code." in x.mediaType)
    assert code.mediaType.endswith(".tar")
    assert code.annotations["org.cnai.model.filepath"] == "code"


def test_kind_inference_and_overrides():
    assert infer_kind("requirements.txt", 10) is Kind.CODE
    assert infer_kind("vocab.txt", 10) is Kind.WEIGHT_CONFIG
    assert infer_kind("notes.txt", 10) is Kind.DOC
    assert infer_kind("LICENSE", 10) is Kind.DOC
    assert infer_kind("blob.xyz", 200 * 1024 * 1024) is Kind.WEIGHT
    assert infer_kind("blob.xyz", 10) is Kind.CODE
    overrides = parse_overrides(["*.json=doc", "special/*=dataset"])
    assert classify("config.json", 1, overrides) is Kind.DOC
    assert classify("special/a.bin", 1, overrides) is Kind.DATASET
    with pytest.raises(ValueError):
        parse_overrides(["*.json=nonsense"])


def test_symlink_outside_tree_is_refused(tmp_path):
    model = make_model(tmp_path / "m")
    os.symlink("/etc/passwd", model / "evil")
    with pytest.raises(SourceError, match="outside"):
        read_directory(model)


def test_symlink_inside_tree_is_kept(tmp_path):
    model = make_model(tmp_path / "m")
    os.symlink("model.safetensors", model / "alias.safetensors")
    art = build(read_directory(model))
    links = [x for x in art.manifest.layers if x.mediaType.endswith(".tar")]
    assert len(links) == 1


def test_created_at_only_when_asked(tmp_path, monkeypatch):
    from ocibridge.model.builder import created_now

    model = make_model(tmp_path / "m")
    plain = json.loads(build(read_directory(model)).config_bytes)
    assert "createdAt" not in plain["descriptor"]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    stamped = build(read_directory(model), BuildOptions(created_at=created_now()))
    assert json.loads(stamped.config_bytes)["descriptor"]["createdAt"] == "2023-11-14T22:13:20Z"


def test_iter_reader_any_chunking_and_linear():
    """Reads of any size give back the stream exactly; many tiny chunks per read and one huge
    chunk read in small pieces both stay linear (each took seconds when reads re-copied)."""
    import random

    from ocibridge.core.streams import IterReader

    rng = random.Random(5)
    data = rng.randbytes(200_000)
    cuts = sorted(rng.sample(range(1, len(data)), 300))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    reader, out = IterReader(iter(chunks)), []
    while piece := reader.read(rng.choice([1, 7, 512, 4096, 70_000])):
        out.append(piece)
    assert b"".join(out) == data and reader.read(10) == b"" and reader.read() == b""

    # (a read that copied what is left each time would take minutes here: the suite's timeout stops it)
    tiny = IterReader(b"x" * 64 for _ in range(1 << 16))  # 4 MiB in 64-byte chunks
    assert len(tiny.read(4 << 20)) == 4 << 20
    huge = IterReader(iter([bytes(16 << 20)]))  # 16 MiB in one chunk, read 4 KiB at a time
    total = 0
    while piece := huge.read(4096):
        total += len(piece)
    assert total == 16 << 20


@pytest.mark.parametrize("change", [b"grown!", b""])
def test_file_changed_after_listing_fails_the_tar_layer(tmp_path, change):
    src = tmp_path / "m"
    src.mkdir()
    (src / "a.txt").write_bytes(b"hello")
    package = read_directory(str(src))
    (src / "a.txt").write_bytes(b"hello" + change if change else b"hel")
    word = "grew" if change else "shrank"
    with pytest.raises(OSError, match=f"a.txt: file {word} while packing"):
        build(package, BuildOptions(variants={k: Variant.TAR for k in Kind}))
