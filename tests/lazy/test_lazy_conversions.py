"""Conversions and re-labelling mirrors carry the chunk table the source binds (issue 29): the
converted model reads lazily, verified, moving ~2 chunks; a family whose layers become tar
drops the table and says so; a forged bound table fails the conversion and writes nothing; a
table the source only has as an unsigned referrer is not carried as bound."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from safetensors import safe_open
from support.faultproxy import status
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.convert import convert
from ocibridge.api.lazy_ops import attach_chunks, open_model, open_tensors
from ocibridge.api.model_ops import push
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ARTIFACT_TYPE, DEFAULT_CHUNK_SIZE
from ocibridge.cli import main
from ocibridge.errors import NotFound
from ocibridge.kinds.family import WriteOptions
from ocibridge.mirror import load_job, run_job
from ocibridge.oci.mediatypes import Family
from ocibridge.stores.registry import open_repository
from tests.lazy.test_lazy_reads import _forged, write_safetensors

SMALL = 4096  # floats of the tensor read
FLOATS = (17 * 1024 * 1024) // 4  # a 17 MiB file: over the 16 MiB threshold, so it has a table


@pytest.fixture(scope="module")
def chunked(registry, tmp_path_factory):
    """A 17 MiB safetensors file and a small config pushed with ``--chunks``: (repo, file, table)."""
    src = tmp_path_factory.mktemp("conv") / "model"
    src.mkdir()
    file = src / "model.safetensors"
    write_safetensors(file, [("a.big", FLOATS - SMALL), ("b.small", SMALL)])
    (src / "config.json").write_text('{"architectures": ["Tiny"]}')
    repo = new_repo()
    result = ocibridge.push(str(src), f"{registry.host}/{repo}:v1",
                            options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    return repo, file, result.extra["chunks"]["table"]


def _blob_bytes(proxy) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", "/blobs/"))


def _convert_cli(src: str, dst: str, to: str, capsys, *extra: str) -> dict:
    assert main(["convert", src, dst, "--to", to, "-q", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _reads_one_tensor_lazily(ref: str, file: Path, proxy) -> None:
    """``b.small`` equals what safetensors reads from the file, moving the header's chunk and
    the tensor's (plus the table), through the bound chain, with no warning."""
    proxy.clear()
    warnings: list[str] = []
    tensors = open_tensors(ref, "model.safetensors", warn=warnings.append, cache=False)
    try:
        got = tensors.get_tensor("b.small")
        with safe_open(str(file), framework="numpy") as real:
            assert got.tobytes() == real.get_tensor("b.small").tobytes()
    finally:
        tensors.blob.close()
    assert not warnings
    moved = _blob_bytes(proxy)
    assert 0 < moved <= 2 * DEFAULT_CHUNK_SIZE + 64 * 1024, moved  # two chunks and the table
    assert moved < file.stat().st_size // 8


def _serve_forged_table(registry, repo: str, table: str, proxy) -> None:
    """The proxy answers the bound table's digest with a well-formed table of the same size
    naming the real layer, whose chunk digests are of other bytes (a registry's forgery)."""
    with open_model(f"{registry.host}/{repo}:v1", warn=None, cache=False) as model:
        layer = model.file("model.safetensors").layer
    proxy.add("GET", f"/blobs/{table}",
              status(200, body=_forged(layer), headers={"Content-Type": "application/octet-stream"}), times=None)


def _chunk_referrers(registry, repo: str, digest: str) -> list:
    with open_repository(host=registry.host, repository=repo) as store:
        subject = store.resolve(digest)
        return store.referrers(subject, ARTIFACT_TYPE)


def test_convert_to_docker_carries_the_table_and_reads_lazily(chunked, registry, fault_proxy, capsys):
    repo, file, table = chunked
    out = new_repo()
    report = _convert_cli(f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1", "docker-model", capsys)
    assert report["to"] == "docker-model" and not [x for x in report["lost"] if x["field"] == "chunk table"]
    assert report["referrers"] == [_chunk_referrers(registry, out, "v1")[0].digest]
    assert report["chunks"] == {"table": table, "layers": 1, "referrer": report["referrers"][0]}
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        assert model.manifest.annotations[ANNOTATION_DIGEST] == table  # every entry survived
        assert model.chain.how.endswith("bound by the manifest")
        assert model.descriptor.digest == report["reference"].split("@")[1]
    _reads_one_tensor_lazily(f"{fault_proxy.host}/{out}:v1", file, fault_proxy)
    # the same input converted again: the same manifest (and referrer) digest
    again = _convert_cli(f"{registry.host}/{repo}:v1", f"{registry.host}/{new_repo()}:v1", "docker-model", capsys)
    assert again["reference"].split("@")[1] == report["reference"].split("@")[1]
    assert again["referrers"] == report["referrers"]
    # and back: the original manifest, restored byte for byte, still binding the same table
    back = _convert_cli(f"{registry.host}/{out}:v1", f"{registry.host}/{new_repo()}:v1", "modelpack", capsys)
    with open_repository(host=registry.host, repository=repo) as store:
        assert back["restored"] and back["reference"].split("@")[1] == store.resolve("v1").digest
    assert back["chunks"]["table"] == table
    # the text report says what the converted manifest binds
    assert main(["convert", f"{registry.host}/{repo}:v1", f"{registry.host}/{new_repo()}:v1",
                 "--to", "docker-model", "-q"]) == 0
    assert f"chunk table {table} bound (1 layer(s))" in capsys.readouterr().out


def test_convert_to_cncf_names_carries_the_table(chunked, registry, fault_proxy):
    repo, file, table = chunked
    out = new_repo()
    result = convert(f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1", "modelpack",
                     options=WriteOptions(media_types=Family.CNCF))
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        assert model.manifest.layers[0].mediaType.startswith("application/vnd.cncf.model.")
        assert model.manifest.annotations[ANNOTATION_DIGEST] == table
    assert not [loss for loss in result.conversion.losses if loss.field == "chunk table"]
    _reads_one_tensor_lazily(f"{fault_proxy.host}/{out}:v1", file, fault_proxy)


def test_convert_to_modelcar_drops_the_table_and_says_so(chunked, registry, capsys):
    repo, file, table = chunked
    out = new_repo()
    report = _convert_cli(f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1", "modelcar", capsys)
    [dropped] = [x for x in report["lost"] if x["field"] == "chunk table"]
    assert dropped["value"].startswith(f"{table} of ") and "dropped" in dropped["value"]
    digest = report["reference"].split("@")[1]
    with open_repository(host=registry.host, repository=out) as store:
        image = json.loads(store.fetch_bytes(store.resolve(digest)))
        assert ANNOTATION_DIGEST not in (image.get("annotations") or {})
        assert store.referrers(store.resolve(digest), ARTIFACT_TYPE) == []
    # the ModelPack form the image is built beside (and names) binds none either: a lazy read of
    # it falls back to the whole blob, verified, and says so
    form = f"{registry.host}/{out}@{image['annotations']['io.ocibridge.modelcar.source']}"
    warnings: list[str] = []
    with open_model(form, warn=warnings.append, cache=False) as model:
        assert ANNOTATION_DIGEST not in (model.manifest.annotations or {})
        assert model.read("model.safetensors", 0, 8) == file.read_bytes()[:8]
        assert model.bytes_fetched >= file.stat().st_size
    assert len(warnings) == 1 and "no chunk table" in warnings[0] and "reading the whole blob" in warnings[0]
    # the text report names it too
    assert main(["convert", f"{registry.host}/{repo}:v1", f"{registry.host}/{new_repo()}:v1",
                 "--to", "modelcar", "-q"]) == 0
    assert f"lost: chunk table = {table} of " in capsys.readouterr().out


def test_convert_to_modelkit_keeps_the_raw_weights_entry(chunked, registry, fault_proxy, capsys):
    """A ModelKit keeps raw files as raw layers: the weights' entry follows them."""
    repo, file, table = chunked
    out = new_repo()
    report = _convert_cli(f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1", "modelkit", capsys)
    assert not [x for x in report["lost"] if x["field"] == "chunk table"]
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        assert model.manifest.annotations[ANNOTATION_DIGEST] == table
        [weights] = [layer for layer in model.manifest.layers if layer.size == file.stat().st_size]
        assert weights.mediaType.endswith(".raw")
    _reads_one_tensor_lazily(f"{fault_proxy.host}/{out}:v1", file, fault_proxy)


def test_a_table_is_cut_to_the_layers_that_stay_raw_and_byte_identical():
    from ocibridge.chunks.carry import describe_reduction, rebind, reduce_table
    from ocibridge.chunks.chunktable import LayerChunks, build_table
    from ocibridge.oci.models import Descriptor

    a = LayerChunks("sha256:" + "a" * 64, 20, ("0" * 64,), "sha256")
    b = LayerChunks("sha256:" + "b" * 64, 20, ("1" * 64,), "sha256")
    full = build_table([a, b], 64 * 1024)
    raw = Descriptor(mediaType="application/vnd.cncf.model.weight.v1.raw", digest=a.digest, size=20)
    tar = Descriptor(mediaType="application/vnd.cncf.model.weight.v1.tar", digest=b.digest, size=20)
    resized = Descriptor(mediaType="application/vnd.cncf.model.weight.v1.raw", digest=b.digest, size=21)
    cut = reduce_table(full, [raw, tar, resized])
    assert list(cut.layers) == [a.digest]
    assert describe_reduction(full, cut) == ("reduced to 1 of 2 layer(s) (the others no longer raw files "
                                             "with the same digest)")
    assert "dropped" in (describe_reduction(full, reduce_table(full, [tar])) or "")
    assert describe_reduction(full, reduce_table(full, [raw, resized.model_copy(update={"size": 20})])) is None
    from ocibridge.oci.models import Manifest

    bare = Manifest(mediaType="application/vnd.oci.image.manifest.v1+json", config=raw, layers=[raw],
                    annotations={ANNOTATION_DIGEST: "sha256:" + "c" * 64, "io.ocibridge.chunks.size": "9"})
    assert rebind(bare, cut).annotations == {ANNOTATION_DIGEST: cut.descriptor().digest,
                                             "io.ocibridge.chunks.size": str(cut.descriptor().size)}
    assert rebind(bare, reduce_table(full, [tar])).annotations is None


def test_a_forged_bound_table_fails_the_conversion_and_writes_nothing(chunked, registry, fault_proxy, capsys):
    repo, _, table = chunked
    _serve_forged_table(registry, repo, table, fault_proxy)
    out = new_repo()
    for to in ("docker-model", "modelcar"):
        code = main(["convert", f"{fault_proxy.host}/{repo}:v1", f"{registry.host}/{out}:v1", "--to", to, "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0 and len(err) == 1 and "chunk table" in err[0] and "Traceback" not in err[0], err
    with open_repository(host=registry.host, repository=out) as store, pytest.raises(NotFound):
        store.resolve("v1")


def test_an_unsigned_referrer_table_is_not_carried_as_bound(registry, tmp_path, capsys):
    src = tmp_path / "m"
    src.mkdir()
    (src / "w.bin").write_bytes(os.urandom(17 * 1024 * 1024))
    repo, out = new_repo(), new_repo()
    push(str(src), f"{registry.host}/{repo}:v1")
    attached = attach_chunks(f"{registry.host}/{repo}:v1")
    assert not attached.bound
    report = _convert_cli(f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1", "docker-model", capsys)
    assert report["referrers"] == []
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        assert ANNOTATION_DIGEST not in (model.manifest.annotations or {}) and model.chain.table is None
    assert _chunk_referrers(registry, out, "v1") == []


def _converting_job(tmp_path, source: str, target: str, family: str) -> Path:
    """A mirror job of one artifact, converted to ``family``, over plain HTTP on both sides."""
    hosts = dict.fromkeys(ref.split("/", 1)[0] for ref in (source, target))
    plain = "".join(f'[registries."{host}"]\nplain_http = true\n\n' for host in hosts)
    job = tmp_path / "job.toml"
    job.write_text(f'{plain}[[sync]]\nsource = "{source}"\ntarget = "{target}"\nconvert = "{family}"\n')
    return job


@pytest.mark.parametrize("family", ["cncf", "docker-model"])
def test_a_converting_mirror_carries_the_table(chunked, registry, fault_proxy, tmp_path, family):
    repo, file, table = chunked
    out = new_repo()
    summary = run_job(load_job(_converting_job(tmp_path, f"{registry.host}/{repo}:v1", f"{registry.host}/{out}:v1",
                                               family)))
    assert summary.exit_code == 0, summary.format_text()
    [result] = summary.artifacts
    assert result.status == "copied" and result.referrers == 1
    assert result.referrers_left_behind == 0  # the original's chunk referrer is replaced, not left
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        media = model.manifest.layers[0].mediaType
        assert media.startswith("application/vnd.cncf.model." if family == "cncf" else "application/vnd.docker.ai.")
        assert model.manifest.annotations[ANNOTATION_DIGEST] == table
        assert [r.digest for r in _chunk_referrers(registry, out, "v1")] != []
    _reads_one_tensor_lazily(f"{fault_proxy.host}/{out}:v1", file, fault_proxy)


def test_a_relabelling_mirror_refuses_a_forged_bound_table(chunked, registry, fault_proxy, tmp_path):
    repo, _, table = chunked
    _serve_forged_table(registry, repo, table, fault_proxy)
    out = new_repo()
    summary = run_job(load_job(_converting_job(tmp_path, f"{fault_proxy.host}/{repo}:v1",
                                               f"{registry.host}/{out}:v1", "cncf")))
    [result] = summary.artifacts
    assert summary.exit_code != 0 and result.status == "failed" and "chunk table" in result.reason
    with open_repository(host=registry.host, repository=out) as store, pytest.raises(NotFound):
        store.resolve("v1")


def test_a_conversion_into_a_layout_keeps_the_chain_for_a_later_copy(chunked, registry, fault_proxy, tmp_path):
    """Converted into an OCI layout, the table and its referrer are there; `copy --referrers` to
    a registry then gives a model that reads lazily."""
    from ocibridge.api.copy import copy_reference

    repo, file, table = chunked
    layout = f"oci:{tmp_path / 'layout'}:v1"
    result = convert(f"{registry.host}/{repo}:v1", layout, "docker-model")
    assert result.chunks() is not None and result.chunks()["table"] == table
    out = new_repo()
    copy_reference(layout, f"{registry.host}/{out}:v1", referrers=True)
    _reads_one_tensor_lazily(f"{fault_proxy.host}/{out}:v1", file, fault_proxy)


def test_a_bound_table_the_source_lacks_is_dropped_and_reported(chunked, registry, fault_proxy, capsys):
    """The source names a table its registry does not serve (404): the conversion drops the
    binding (it would name a blob nobody can check) and says why."""
    repo, _, table = chunked
    fault_proxy.add("GET", f"/blobs/{table}", status(404, body=b'{"errors":[{"code":"BLOB_UNKNOWN"}]}'), times=None)
    fault_proxy.add("HEAD", f"/blobs/{table}", status(404), times=None)
    out = new_repo()
    report = _convert_cli(f"{fault_proxy.host}/{repo}:v1", f"{registry.host}/{out}:v1", "docker-model", capsys)
    [dropped] = [x for x in report["lost"] if x["field"] == "chunk table"]
    assert table in dropped["value"] and "is not in" in dropped["value"]
    assert report["chunks"] is None and report["referrers"] == []
    with open_model(f"{registry.host}/{out}:v1", warn=None, cache=False) as model:
        assert ANNOTATION_DIGEST not in (model.manifest.annotations or {})
