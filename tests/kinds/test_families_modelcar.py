"""ModelCar images built by other tools (KServe's FROM busybox + COPY model /models): detected by
their layers, read as the files under /models through the confined layer reader."""

from __future__ import annotations

import io
import json
import tempfile

import pytest

from ocibridge.api import model_ops as api
from ocibridge.api.convert import convert
from ocibridge.cli import main
from ocibridge.kinds import NotAModel, identify
from ocibridge.oci.mediatypes import OCI_INDEX, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Index
from ocibridge.places.locate import open_target as open_store_target
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry.options import RegistryOptions
from tests.modelcar_images import BASE, copy_layer, kserve_modelcar, write_image
from tests.modelgen import tree
from tests.ollama_fixtures import write_gguf

IMAGE_LOSSES = {"image.base", "image.config.Env", "image.config.Cmd"}


@pytest.fixture
def model_files(tmp_path) -> dict[str, tuple[bytes, int]]:
    gguf = write_gguf(tmp_path / "w.gguf").read_bytes()
    return {
        "model.gguf": (gguf, 0o644),
        "config.json": (b'{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}\n', 0o644),
        "tokenizer/tokenizer.json": (b'{"vocab": {}}\n', 0o644),
        "serve.sh": (b"#!/bin/sh\nexec true\n", 0o755),
    }


def _expected(files: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, bool]]:
    return {path: (body, bool(mode & 0o111)) for path, (body, mode) in files.items()}


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Staging directories go to a temp dir of the test's own, checked empty afterwards."""
    staging = tmp_path / "system-tmp"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    yield staging


@pytest.mark.parametrize("docker", [True, False], ids=["docker-media-types", "oci-media-types"])
def test_a_kserve_modelcar_is_recognised_and_pulls_as_its_files(tmp_path, model_files, docker):
    ref = kserve_modelcar(tmp_path / "car", model_files, docker=docker)
    target = open_store_target(ref)
    found = identify(target.store, target.reference)
    assert found.family.name == "modelcar"
    api.pull(ref, str(tmp_path / "out"))
    assert tree(tmp_path / "out") == _expected(model_files)


@pytest.mark.parametrize("to", ["modelpack", "modelkit", "docker-model"])
def test_a_kserve_modelcar_converts_reporting_what_the_image_loses(tmp_path, model_files, to, capsys):
    ref = kserve_modelcar(tmp_path / "car", model_files)
    code = main(["convert", ref, f"oci:{tmp_path / 'out'}:x", "--to", to, "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["from"] == "modelcar"
    assert {loss["field"] for loss in report["lost"]} == IMAGE_LOSSES
    base = next(loss for loss in report["lost"] if loss["field"] == "image.base")
    assert base["value"] == "7 entries outside /models (base image layers)"
    # the metadata a directory push reads came from /models/config.json and the GGUF header
    store = LayoutStore(tmp_path / "out")
    assert identify(store, "x").family.name == (to if to != "modelpack" else "modelpack")
    api.pull(f"oci:{tmp_path / 'out'}:x", str(tmp_path / "files"))
    assert tree(tmp_path / "files") == _expected(model_files)
    # and back into a ModelCar image (ours, built by k8s modelcar): the same files under /models
    back = convert(f"oci:{tmp_path / 'out'}:x", f"oci:{tmp_path / 'back'}:car", "modelcar")
    assert back.conversion.target_family == "modelcar"
    api.pull(f"oci:{tmp_path / 'back'}:car", str(tmp_path / "again"))
    assert tree(tmp_path / "again") == _expected(model_files)


def test_the_text_report_names_each_lost_image_field(tmp_path, model_files, capsys):
    ref = kserve_modelcar(tmp_path / "car", model_files)
    assert main(["convert", ref, f"oci:{tmp_path / 'out'}:x", "--to", "modelpack"]) == 0
    lost = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("lost: ")]
    assert lost == ["lost: image.base = 7 entries outside /models (base image layers)",
                    'lost: image.config.Env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]',
                    'lost: image.config.Cmd = ["sh"]']


def test_later_layers_apply_in_order_with_whiteouts(tmp_path, model_files, private_tmp):
    """RUN mkdir /models; COPY; RUN rm /models/scratch.bin and an opaque tokenizer/ rewrite."""
    files = {**model_files, "scratch.bin": (b"x" * 100, 0o644)}
    ref = write_image(tmp_path / "car", "v1", [
        BASE,
        [("models", "dir", 0o775, b"")],
        copy_layer(files),
        [("models/.wh.scratch.bin", "whiteout", 0o644, b""),
         ("models/tokenizer", "dir", 0o755, b""),
         ("models/tokenizer/.wh..wh..opq", "whiteout", 0o644, b""),
         ("models/tokenizer/vocab.txt", "file", 0o644, b"a\nb\n")],
    ], docker=False)
    api.pull(ref, str(tmp_path / "out"))
    expected = _expected(model_files)
    del expected["tokenizer/tokenizer.json"]
    expected["tokenizer/vocab.txt"] = (b"a\nb\n", False)
    assert tree(tmp_path / "out") == expected
    assert not list(private_tmp.iterdir())  # the staged /models went with the pull


def test_a_top_layer_that_only_deletes_elsewhere_decides_nothing(tmp_path, model_files):
    """RUN rm -rf /tmp/cache after COPY: whiteouts outside /models; the image is still a ModelCar."""
    ref = write_image(tmp_path / "car", "v1", [BASE, copy_layer(model_files),
                                                [("tmp", "dir", 0o1777, b""), ("tmp/.wh.cache", "whiteout", 0, b"")]],
                      docker=True)
    target = open_store_target(ref)
    assert identify(target.store, target.reference).family.name == "modelcar"
    api.pull(ref, str(tmp_path / "out"))
    assert tree(tmp_path / "out") == _expected(model_files)


def test_an_image_whose_top_layer_is_not_models_is_a_container_image(tmp_path, model_files):
    ref = write_image(tmp_path / "img", "v1", [BASE, copy_layer(model_files),
                                                [("app", "dir", 0o755, b""), ("app/run", "file", 0o755, b"x")]],
                      docker=True)
    target = open_store_target(ref)
    with pytest.raises(NotAModel, match="is a container image"):
        identify(target.store, target.reference)


def test_an_index_of_modelcar_images_resolves_to_one(tmp_path, model_files):
    ref = kserve_modelcar(tmp_path / "car", model_files, docker=False)
    store = LayoutStore(tmp_path / "car")
    image = store.resolve("v1")
    index = Index(mediaType=OCI_INDEX, manifests=[
        Descriptor(mediaType=OCI_MANIFEST, digest=image.digest, size=image.size,
                   platform={"os": "linux", "architecture": "amd64"})]).to_json_bytes()
    store.push_manifest(Descriptor.for_bytes(OCI_INDEX, index), index, "multi")
    found = identify(store, "multi")
    assert found.family.name == "modelcar" and found.desc.digest == image.digest
    assert ref


@pytest.mark.parametrize("bad,message", [
    ([("models/escape", "sym", 0o777, "../etc/passwd")], "symlink points outside the tree"),
    ([("models/sh", "hard", 0o755, "bin/busybox")], "hard link to bin/busybox"),
    ([("models/abs", "sym", 0o777, "/etc/passwd")], "outside the tree"),
])
def test_links_out_of_models_are_refused_on_one_line(tmp_path, model_files, capsys, bad, message, private_tmp):
    ref = write_image(tmp_path / "car", "v1", [BASE, copy_layer(model_files) + bad], docker=True)
    code = main(["convert", ref, f"oci:{tmp_path / 'out'}:x", "--to", "modelkit"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith("ocibridge: error: ") and message in err[0], err
    assert not (tmp_path / "out").exists()
    assert not list(private_tmp.iterdir())


@pytest.mark.parametrize("cut", [1500, 0], ids=["truncated", "not-a-tar"])
def test_a_layer_that_is_no_readable_tar_is_refused_on_one_line(tmp_path, model_files, capsys, cut):
    from tests.modelcar_images import _tar

    layer = _tar(copy_layer(model_files))[:cut] if cut else b"not a tar at all " * 64
    ref = write_image(tmp_path / "car", "v1", [BASE, layer], docker=False)
    code = main(["convert", ref, f"oci:{tmp_path / 'out'}:x", "--to", "modelkit"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "is not a readable tar" in err[0], err


def test_models_as_a_symlink_is_refused(tmp_path, model_files, capsys):
    base = [*BASE, ("data", "dir", 0o755, b""), ("models", "sym", 0o777, "data")]
    ref = write_image(tmp_path / "car", "v1", [base, copy_layer(model_files)[1:]], docker=True)
    code = main(["pull", ref, str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("ocibridge: error: "), err
    assert not (tmp_path / "out").exists()


def test_a_diff_id_that_does_not_match_the_config_is_refused(tmp_path, model_files, capsys):
    kserve_modelcar(tmp_path / "car", model_files, docker=False)
    store = LayoutStore(tmp_path / "car")
    manifest = json.loads(store.fetch_bytes(store.resolve("v1")))
    config_desc = Descriptor.model_validate(manifest["config"])
    config = json.loads(store.fetch_bytes(config_desc))
    config["rootfs"]["diff_ids"][1] = "sha256:" + "0" * 64
    data = json.dumps(config).encode()
    new_config = Descriptor.for_bytes(config_desc.mediaType, data)
    store.push_blob(new_config, io.BytesIO(data))
    manifest["config"] = {"mediaType": new_config.mediaType, "digest": new_config.digest, "size": new_config.size}
    body = json.dumps(manifest).encode()
    store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, body), body, "bad")
    code = main(["convert", f"oci:{tmp_path / 'car'}:bad", f"oci:{tmp_path / 'out'}:x", "--to", "modelpack"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "diff_id" in err[0], err


def test_a_kserve_modelcar_in_a_registry_converts_and_pulls(registry, tmp_path, model_files, unique_repo):
    """Detection reads the top layer's headers over HTTP and stops early; the conversion reads
    every layer to its end (verified), and the files come out byte for byte."""
    ref = kserve_modelcar(tmp_path / "car", model_files)
    repo = f"{registry.host}/{unique_repo}"
    transfer = api.TransferOptions(plain_http=True)
    api.copy_reference(ref, f"{repo}-car:v1", transfer=transfer)
    target = open_store_target(f"{repo}-car:v1", plain_http=True)
    assert identify(target.store, "v1").family.name == "modelcar"
    result = convert(f"{repo}-car:v1", f"{repo}-mp:v1", "modelpack", registry_options=RegistryOptions(plain_http=True))
    assert {loss.field for loss in result.conversion.losses} == IMAGE_LOSSES
    api.pull(f"{repo}-mp:v1", str(tmp_path / "from-mp"), transfer=transfer)
    api.pull(f"{repo}-car:v1", str(tmp_path / "from-car"), transfer=transfer)
    assert tree(tmp_path / "from-mp") == tree(tmp_path / "from-car") == _expected(model_files)


def test_our_modelcar_copied_without_its_modelpack_form_reads_as_its_files(tmp_path):
    import shutil

    from support.data import data

    from ocibridge.transfer.copy import copy
    from tests.kinds.test_families import KIT_DIGEST

    shutil.copytree(data("kitops", "kit-latest-tar"), tmp_path / "kit")
    convert(f"oci:{tmp_path / 'kit'}@{KIT_DIGEST}", f"oci:{tmp_path / 'k8s'}:car", "modelcar")
    copy(LayoutStore(tmp_path / "k8s"), "car", LayoutStore(tmp_path / "alone", create=True), "car")
    back = convert(f"oci:{tmp_path / 'alone'}:car", f"oci:{tmp_path / 'out'}:kit", "modelkit")
    assert back.conversion.source_family == "modelcar" and not back.conversion.restored
    lost = {loss.field for loss in back.conversion.losses if not loss.kept}
    assert "image.annotations[io.ocibridge.modelcar.source]" in lost
    api.pull(f"oci:{tmp_path / 'out'}:kit", str(tmp_path / "a"))
    api.pull(f"oci:{tmp_path / 'kit'}@{KIT_DIGEST}", str(tmp_path / "b"))
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_a_plain_container_image_is_refused_by_pull_saying_what_it_is(tmp_path, capsys):
    """No model family claims an application image: pull names what it is instead of
    complaining about a missing file path annotation, and writes nothing."""
    app = [("app", "dir", 0o755, b""), ("app/main.py", "file", 0o644, b"print(1)\n")]
    for docker in (True, False):
        ref = write_image(tmp_path / "l", f"app-{docker}", [BASE, app], docker=docker)
        out = tmp_path / f"out-{docker}"
        assert main(["pull", ref, str(out), "-q"]) == 1
        err = capsys.readouterr().err
        assert err == (f"ocibridge: error: {ref} is a container image, not a model of a known family "
                       "(modelpack, modelkit, docker-model, modelcar, ollama)\n")
        assert not out.exists()
