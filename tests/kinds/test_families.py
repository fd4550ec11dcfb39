"""OCI model families: detection, conversion between every pair, round trips, pulls."""

from __future__ import annotations

import io
import itertools
import json
import shutil

import pytest
from support.data import data
from support.mirror_jobs import mirror_job

import ocibridge
from ocibridge import PushOptions
from ocibridge.api import model_ops as api
from ocibridge.api.convert import convert
from ocibridge.cli import main
from ocibridge.kinds import NotAModel, WriteOptions, convert_artifact, identify
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_INDEX, OCI_LAYER_TAR, OCI_MANIFEST, Family
from ocibridge.oci.models import Descriptor, Index, Manifest
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry.options import RegistryOptions
from tests.modelgen import make_model, tree

KIT_DIGEST = "sha256:9e968bb72078b3787d2362f20657d1d69d6aeda467bfacf0ed04d65423e480ea"
DOCKER_DIGEST = "sha256:2475c4c8713d635fc76ae73aea2a56cad511da0f717eac7614b8b5aa0505b36c"
#: (family name for --to, media types) → the key a conversion reports
TARGETS = {
    "modelpack-cnai": ("modelpack", Family.CNAI),
    "modelpack-cncf": ("modelpack", Family.CNCF),
    "modelkit": ("modelkit", Family.CNAI),
    "docker-model": ("docker-model", Family.CNAI),
}


def _kit(tmp_path) -> str:
    shutil.copytree(data("kitops", "kit-latest-tar"), tmp_path / "kit")
    return f"oci:{tmp_path / 'kit'}@{KIT_DIGEST}"


def _docker(tmp_path) -> str:
    shutil.copytree(data("docker-model", "gguf-dummy-v0.1"), tmp_path / "docker")
    return f"oci:{tmp_path / 'docker'}@{DOCKER_DIGEST}"


def _modelpack(tmp_path, family: Family) -> str:
    from ocibridge.model.builder import BuildOptions

    model = make_model(tmp_path / f"model-{family.value}")
    ref = f"oci:{tmp_path / ('mp-' + family.value)}:v1"
    api.push(str(model), ref, options=PushOptions(build=BuildOptions(family=family)))
    return ref


SOURCES = {
    "modelkit": _kit,
    "docker-model": _docker,
    "modelpack-cnai": lambda p: _modelpack(p, Family.CNAI),
    "modelpack-cncf": lambda p: _modelpack(p, Family.CNCF),
}


def _convert(src: str, dst: str, key: str):
    to, media = TARGETS[key]
    return convert(src, dst, to, options=WriteOptions(media_types=media))


def _layout(ref: str) -> str:
    """The layout directory of an ``oci:PATH[:TAG|@DIGEST]`` reference."""
    from ocibridge.oci.reference import parse_layout_reference

    return parse_layout_reference(ref).path


def _digest(ref: str) -> str:
    target = open_store_target(ref)
    return target.store.resolve(target.reference).digest


def _files(ref: str, out) -> dict:
    api.pull(ref, str(out))
    return tree(out)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_family_is_recognised_by_its_media_types(tmp_path, name):
    ref = SOURCES[name](tmp_path)
    target = open_store_target(ref)
    found = identify(target.store, target.reference)
    assert found.family.key(found.manifest, WriteOptions()) == name


@pytest.mark.parametrize("source,target", [
    (a, b) for a, b in itertools.product(sorted(SOURCES), sorted(TARGETS)) if a != b])
def test_every_pair_round_trips_to_the_same_digest_and_files(tmp_path, source, target):
    src = SOURCES[source](tmp_path)
    layout = _layout(src)
    there = _convert(src, f"oci:{layout}:there", target)
    assert there.conversion.source_family == source
    assert there.conversion.target_family == target
    # every layer is the same blob: at most the config (and the manifest) are new
    assert {x.digest for x in there.conversion.store.manifest.layers} == {
        x.digest for x in there.conversion.source.manifest.layers}
    assert there.stats.blobs_copied <= 1 and there.stats.bytes_copied == (
        there.conversion.store.config.size if there.stats.blobs_copied else 0)
    back = _convert(f"oci:{layout}:there", f"oci:{tmp_path / 'out'}:back", source)
    assert back.conversion.restored
    assert back.conversion.descriptor.digest == _digest(src)
    assert _files(f"oci:{layout}:there", tmp_path / "b") == _files(src, tmp_path / "a")


def test_a_chain_through_three_families_comes_back(tmp_path):
    src = _kit(tmp_path)
    out = tmp_path / "out"
    _convert(src, f"oci:{out}:docker", "docker-model")
    _convert(f"oci:{out}:docker", f"oci:{out}:mp", "modelpack-cncf")
    back = _convert(f"oci:{out}:mp", f"oci:{out}:kit", "modelkit")
    assert back.conversion.restored
    assert back.conversion.descriptor.digest == KIT_DIGEST


def test_kit_metadata_maps_onto_modelpack_as_kit_does(tmp_path):
    result = _convert(_kit(tmp_path), f"oci:{tmp_path / 'out'}:mp", "modelpack-cncf")
    store = LayoutStore(tmp_path / "out")
    manifest = Manifest.model_validate_json(store.fetch_bytes(result.conversion.descriptor))
    config = json.loads(store.fetch_bytes(manifest.config))
    assert config["descriptor"]["name"] == "tiny-llama-fixture"
    assert config["descriptor"]["version"] == "0.1.0"
    assert config["descriptor"]["licenses"] == ["Apache-2.0", "CC-BY-4.0"]
    assert config["descriptor"]["createdAt"] == "2025-10-01T12:00:00Z"
    assert config["config"]["format"] == "gguf"
    kinds = [layer.mediaType for layer in manifest.layers]
    assert kinds == ["application/vnd.cncf.model.weight.v1.tar", "application/vnd.cncf.model.weight.config.v1.tar",
                     "application/vnd.cncf.model.code.v1.tar", "application/vnd.cncf.model.dataset.v1.tar",
                     "application/vnd.cncf.model.doc.v1.tar"]
    ocibridge.validate(f"oci:{tmp_path / 'out'}:mp")


def test_docker_metadata_maps_onto_modelpack_as_docker_does(tmp_path):
    result = _convert(_docker(tmp_path), f"oci:{tmp_path / 'out'}:mp", "modelpack-cnai")
    store = LayoutStore(tmp_path / "out")
    manifest = Manifest.model_validate_json(store.fetch_bytes(result.conversion.descriptor))
    config = json.loads(store.fetch_bytes(manifest.config))
    assert config["descriptor"] == {"createdAt": "2025-10-01T12:00:00Z", "family": "llama"}
    assert config["config"] == {"architecture": "llama", "format": "gguf", "paramSize": "183",
                                "quantization": "Unknown"}
    assert [layer.mediaType.rsplit(".model.", 1)[1] for layer in manifest.layers] == [
        "weight.v1.raw", "doc.v1.raw", "weight.config.v1.raw", "weight.v1.raw"]
    ocibridge.validate(f"oci:{tmp_path / 'out'}:mp")


def test_modelpack_to_docker_types_each_file(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF" + bytes(60))
    (model / "mmproj-f16.gguf").write_bytes(b"GGUF" + bytes(30))
    (model / "LICENSE").write_text("MIT\n")
    (model / "chat.jinja").write_text("{{ x }}\n")
    (model / "README.md").write_text("# m\n")
    api.push(str(model), f"oci:{tmp_path / 'mp'}:v1")
    result = _convert(f"oci:{tmp_path / 'mp'}:v1", f"oci:{tmp_path / 'out'}:d", "docker-model")
    store = LayoutStore(tmp_path / "out")
    manifest = Manifest.model_validate_json(store.fetch_bytes(result.conversion.descriptor))
    by_path = {layer.annotations["org.cncf.model.filepath"]: layer.mediaType for layer in manifest.layers}
    assert by_path == {
        "LICENSE": "application/vnd.docker.ai.license",
        "README.md": "application/vnd.docker.ai.model.file",
        "chat.jinja": "application/vnd.docker.ai.chat.template.jinja",
        "mmproj-f16.gguf": "application/vnd.docker.ai.mmproj",
        "model.gguf": "application/vnd.docker.ai.gguf.v3",
    }
    assert manifest.config.mediaType == "application/vnd.docker.ai.model.config.v0.1+json"
    assert sorted(loss.field for loss in result.conversion.losses) == ["descriptor.name", "layers[README.md].kind"]
    assert all(loss.kept for loss in result.conversion.losses)


def test_edited_metadata_drops_the_way_back_and_reports_losses(tmp_path, capsys):
    src = _docker(tmp_path)
    out = tmp_path / "out"
    code = main(["convert", src, f"oci:{out}:mp", "--to", "modelpack", "--arch", "llama2", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert not report["keptForRoundTrip"]
    assert {loss["field"] for loss in report["lost"]} == {"docker.context_size", "docker.gguf", "docker.size"}
    manifest = json.loads(LayoutStore(out).fetch_bytes(
        LayoutStore(out).resolve("mp")))
    assert not any(k.startswith("io.ocibridge.origin.") for k in manifest.get("annotations", {}))
    # the way back writes a new Docker config (the original cannot be restored)
    main(["convert", f"oci:{out}:mp", f"oci:{out}:d", "--to", "docker-model"])
    text = capsys.readouterr().out
    assert "restored" not in text
    assert _digest(f"oci:{out}:d") != DOCKER_DIGEST


def test_cli_convert_prints_one_line_per_lost_field(tmp_path, capsys):
    code = main(["convert", _docker(tmp_path), f"oci:{tmp_path / 'out'}:mp", "--to", "modelkit",
                 "--description", "tiny"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("converted ") and "(docker-model)" in lines[0] and "(modelkit)" in lines[0]
    lost = [line.strip() for line in lines if line.strip().startswith("lost: ")]
    assert "lost: config.architecture = llama" in lost
    assert "lost: docker.context_size = 2048" in lost


def _image(tmp_path) -> str:
    """A plain container image in a layout: one empty tar layer and an image config."""
    store = LayoutStore(tmp_path / "img", create=True)
    layer = bytes(1024)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    for media, blob in ((OCI_LAYER_TAR, layer), (OCI_CONFIG, config)):
        store.push_blob(Descriptor.for_bytes(media, blob), io.BytesIO(blob))
    manifest = Manifest(config=Descriptor.for_bytes(OCI_CONFIG, config),
                        layers=[Descriptor.for_bytes(OCI_LAYER_TAR, layer)]).to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest, "v1")
    return f"oci:{tmp_path / 'img'}:v1"


def test_a_container_image_is_refused_saying_what_it_is(tmp_path, capsys):
    ref = _image(tmp_path)
    target = open_store_target(ref)
    with pytest.raises(NotAModel, match="is a container image"):
        identify(target.store, target.reference)
    code = main(["convert", ref, f"oci:{tmp_path / 'out'}:x", "--to", "modelkit"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("ocibridge: error: ") and "container image" in err[0]


def test_an_index_whose_entries_lost_artifact_type_resolves_to_its_model(tmp_path):
    ref = _modelpack(tmp_path, Family.CNAI)
    store = LayoutStore(tmp_path / "mp-cnai")
    model = store.resolve("v1")
    image_ref = _image(tmp_path)
    image_store = LayoutStore(tmp_path / "img")
    image = image_store.resolve("v1")
    from ocibridge.transfer.copy import copy

    copy(image_store, "v1", store, None)
    index = Index(mediaType=OCI_INDEX, manifests=[
        Descriptor(mediaType=OCI_MANIFEST, digest=image.digest, size=image.size),
        Descriptor(mediaType=OCI_MANIFEST, digest=model.digest, size=model.size),  # no artifactType
    ]).to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(OCI_INDEX, index), index, "all")
    assert image_ref
    found = identify(store, "all")
    assert found.desc.digest == model.digest and found.family.name == "modelpack"
    assert ocibridge.validate(f"oci:{tmp_path / 'mp-cnai'}:all").digest == model.digest
    assert _files(f"oci:{tmp_path / 'mp-cnai'}:all", tmp_path / "a") == _files(ref, tmp_path / "b")
    conversion = convert_artifact(store, "all", "modelkit")
    assert conversion.source.desc.digest == model.digest


def test_convert_within_one_registry_mounts_every_layer(registry, tmp_path, unique_repo):
    kit = _kit(tmp_path)
    repo = f"{registry.host}/{unique_repo}"
    api.copy_reference(kit, f"{repo}-kit:v1", transfer=api.TransferOptions(plain_http=True))
    options = RegistryOptions(plain_http=True)
    there = convert(f"{repo}-kit:v1", f"{repo}-docker:v1", "docker-model", registry_options=options)
    assert there.stats.blobs_mounted == 5 and there.stats.blobs_copied == 1  # the new config
    back = convert(f"{repo}-docker:v1", f"{repo}-kit2:v1", "modelkit", registry_options=options)
    assert back.conversion.restored and back.conversion.descriptor.digest == KIT_DIGEST
    # the original config too is a blob of the kit repository: everything is mounted
    assert back.stats.blobs_mounted == 6 and back.stats.blobs_copied == 0
    transfer = api.TransferOptions(plain_http=True)
    api.pull(f"{repo}-docker:v1", str(tmp_path / "pulled"), transfer=transfer)
    api.pull(kit, str(tmp_path / "direct"))
    assert tree(tmp_path / "pulled") == tree(tmp_path / "direct")


def test_mirror_converts_a_modelkit_into_a_docker_model_and_back(registry, tmp_path, unique_repo):
    """A job's convert key takes family names; accept lists the families to take."""
    from ocibridge.mirror import load_job, run_job

    kit = _kit(tmp_path)
    repo = f"{registry.host}/{unique_repo}"
    job = mirror_job(tmp_path / "job.toml",
                     {"source": kit, "target": f"{repo}-docker:v1", "accept": ["modelkit"], "convert": "docker-model"},
                     {"source": f"{repo}-docker:v1", "target": f"{repo}-kit:v1", "accept": ["docker-model"],
                      "convert": "modelkit"}, plain_http=[registry.host])
    summary = run_job(load_job(job))
    assert summary.exit_code == 0, summary.format_text()
    target = open_store_target(f"{repo}-kit:v1", plain_http=True)
    assert target.store.resolve("v1").digest == KIT_DIGEST
    docker = open_store_target(f"{repo}-docker:v1", plain_http=True)
    assert identify(docker.store, "v1").family.name == "docker-model"


# -- Ollama and ModelCar: exported from the ModelPack form ----------------------------------------
@pytest.fixture
def ollama_store(tmp_path, monkeypatch):
    from tests.ollama_fixtures import gguf_store

    root = tmp_path / "ollama-models"
    gguf_store(root, tmp_path)
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    return root


@pytest.mark.parametrize("via", ["modelkit", "docker-model", "modelpack-cncf"])
def test_an_ollama_model_goes_through_another_family_and_back_exactly(ollama_store, tmp_path, via):
    original = _digest("ollama:tiny")
    there = _convert("ollama:tiny", f"oci:{tmp_path / 'out'}:there", via)
    assert there.conversion.source_family == "ollama"
    back = convert(f"oci:{tmp_path / 'out'}:there", "ollama:tiny-back", "ollama")
    assert back.conversion.target_family == "ollama" and not back.conversion.losses
    assert _digest("ollama:tiny-back") == original
    assert _files(f"oci:{tmp_path / 'out'}:there", tmp_path / "a") == _files("ollama:tiny", tmp_path / "b")


def test_into_ollama_what_it_cannot_hold_is_reported_lost(ollama_store, tmp_path, capsys):
    from tests.ollama_fixtures import write_gguf

    model = tmp_path / "g"
    model.mkdir()
    write_gguf(model / "model.gguf")
    (model / "README.md").write_text("# hi\n")
    api.push(str(model), f"oci:{tmp_path / 'mp'}:v1", options=PushOptions(overrides={"version": "1.0"}))
    code = main(["convert", f"oci:{tmp_path / 'mp'}:v1", "ollama:g", "--to", "ollama", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    lost = {loss["field"] for loss in report["lost"]}
    assert {"file README.md", "descriptor.name", "descriptor.version", "config.architecture"} <= lost
    assert identify(open_store_target("ollama:g").store, "latest").family.name == "ollama"


def test_a_modelcar_reads_back_as_the_artifact_it_was_built_from(tmp_path):
    src = _kit(tmp_path)
    layout = tmp_path / "k8s"
    car = convert(src, f"oci:{layout}:car", "modelcar")
    store = LayoutStore(layout)
    image = Manifest.model_validate_json(store.fetch_bytes(store.resolve("car")))
    assert image.config.mediaType == OCI_CONFIG and car.conversion.target_family == "modelcar"
    assert identify(store, "car").family.name == "modelcar"
    back = convert(f"oci:{layout}:car", f"oci:{layout}:kit", "modelkit")
    assert back.conversion.source_family == "modelcar"
    assert back.conversion.restored and back.conversion.descriptor.digest == KIT_DIGEST
    assert _files(f"oci:{layout}:car", tmp_path / "a") == _files(src, tmp_path / "b")


@pytest.mark.parametrize("name, digest", [("modelkit", KIT_DIGEST), ("docker-model", DOCKER_DIGEST)])
def test_a_pull_of_another_family_reports_the_digest_named(tmp_path, capsys, name, digest):
    """The files come from the model's ModelPack form, but the digest printed is the one the user
    named (what `resolve` and the registry show); --json also gives the form's own digest."""
    ref = SOURCES[name](tmp_path)
    assert main(["pull", ref, str(tmp_path / "out"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["digest"] == digest
    form = convert(ref, f"oci:{tmp_path / 'form'}:mp", "modelpack").conversion.descriptor.digest
    assert out["modelpackDigest"] == form != digest
    assert main(["pull", ref, str(tmp_path / "out2")]) == 0
    assert capsys.readouterr().out.startswith(f"pulled {digest} into ")
