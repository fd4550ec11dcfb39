"""serve's record of the files it grouped into a tar layer (hubserver/repo/grouped.py): the offsets
it writes are where the tar push builds holds each file's bytes (long names and all), and a record
that does not hold is not used at all."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

from ocibridge.hubserver.repo.grouped import GROUPED, members, record
from ocibridge.model.builder import BuildOptions, plan_layers
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.model.packing import tar_chunks
from ocibridge.oci.mediatypes import Kind, Variant, layer_media_type
from ocibridge.oci.models import Descriptor, Manifest


def _files() -> list[ModelFile]:
    contents = {f"data/train-{i:05d}.jsonl": f'{{"n": {i}}}\n'.encode() * (i % 7) for i in range(70)}
    contents["data/" + "long-name-" * 20 + ".jsonl"] = b"past ustar's 100 characters: a PAX header first\n"
    contents["data/\u00e9t\u00e9.jsonl"] = b"a name PAX writes in UTF-8\n"
    return [ModelFile.from_bytes(path, data, Kind.DATASET, digest="sha256:" + hashlib.sha256(data).hexdigest(),
                                 mode=0o755 if path.endswith("00003.jsonl") else 0o644)
            for path, data in contents.items()]


def _manifest(layers: list[Descriptor], placed: str | None) -> Manifest:
    config = Descriptor(mediaType="application/vnd.cnai.model.config.v1+json", digest="sha256:" + "0" * 64, size=2)
    return Manifest(mediaType="application/vnd.oci.image.manifest.v1+json", config=config, layers=layers,
                    annotations={GROUPED: placed} if placed is not None else None)


def test_the_record_places_each_file_where_the_tar_holds_it():
    files = _files()
    layers = plan_layers(ModelPackage(files=files), BuildOptions())
    assert [layer.variant for layer in layers] == [Variant.TAR]
    placed = record(layers)
    assert placed is not None
    tar = b"".join(tar_chunks(layers[0].files))
    layer = Descriptor(mediaType=layer_media_type(Kind.DATASET, Variant.TAR), digest="sha256:" + "1" * 64,
                       size=len(tar))
    found = members(_manifest([layer], placed))
    assert set(found) == {f.path for f in files}
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for info in archive.getmembers():
            member = found[info.name]
            assert (member.offset, member.size) == (info.offset_data, info.size)
            data = tar[member.offset:member.offset + member.size]
            assert member.digest == "sha256:" + hashlib.sha256(data).hexdigest()
            assert member.mode == (0o755 if info.name.endswith("00003.jsonl") else 0o644)


def test_a_record_that_does_not_hold_is_not_used():
    files = _files()
    layers = plan_layers(ModelPackage(files=files), BuildOptions())
    placed = json.loads(record(layers) or "{}")
    size = sum(512 + -(-f.size // 512) * 512 for f in files) + 4096
    tar_layer = Descriptor(mediaType=layer_media_type(Kind.DATASET, Variant.TAR), digest="sha256:" + "1" * 64,
                           size=size)
    assert members(_manifest([tar_layer], json.dumps(placed)))
    path, entry = next(iter(placed.items()))
    raw_layer = Descriptor(mediaType=layer_media_type(Kind.DATASET, Variant.RAW), digest="sha256:" + "2" * 64,
                           size=size)
    for forged in ({**placed, path: [entry[0], entry[1], size, *entry[3:]]},  # past the layer's end
                   {**placed, "../escape": entry},  # not a safe relative path
                   {**placed, path: [1, *entry[1:]]},  # no such layer
                   {**placed, path: [*entry[:3], "x" * 64, entry[4]]},  # not a SHA-256
                   {**placed, path: [entry[0], entry[1] + 1, *entry[2:]]}):  # not at a block
        assert members(_manifest([tar_layer], json.dumps(forged))) == {}
    assert members(_manifest([raw_layer], json.dumps(placed))) == {}  # a raw layer holds no files to place
    assert members(_manifest([tar_layer], "not json")) == {}
