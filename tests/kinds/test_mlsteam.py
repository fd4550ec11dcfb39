"""MLSteam .mlarchive ⇄ ModelPack: archives built by the vendor SDK round-trip with the same files.

The archives come from ``mlsteam_model_sdk.core.dev.archive.build_archive`` (what the SDK's
``dev mv`` commands call) with manifests from its ``gen_manifest`` and validated by its
``read_manifest``. The SDK's manifest generator only writes v2024.1, so the v2023.1 manifest is
written by hand from the spec, validated by the SDK against its v2023.1 schema, and zipped by
the SDK's archive builder all the same.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest
from support.noise import noise

from ocibridge.kinds.mlsteam import (
    ANNOTATION_IN_MEMORY,
    ANNOTATION_INTEGRITY,
    ANNOTATION_MODELS,
    ANNOTATION_SCHEMA,
    ANNOTATION_SERVICES,
    export_mlarchive,
    parse_manifest,
    read_mlarchive,
)
from ocibridge.kinds.mlsteam.exporter import STORE_WEIGHTS_FROM
from ocibridge.model.builder import ARTIFACT_TAG, build
from ocibridge.model.config import parse_config
from ocibridge.model.validate import validate
from ocibridge.oci.mediatypes import Kind, Variant, parse_layer_media_type
from ocibridge.oci.models import Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import copy


def _hooks(root: Path, marker: Path | None = None) -> Path:
    """Hook files; with ``marker``, importing either would create that file."""
    hooks = root / "hooks"
    hooks.mkdir(parents=True)
    side_effect = f"open({str(marker)!r}, 'w').write('ran')\n" if marker else ""
    (hooks / "load.py").write_text(side_effect + "def load(env, **kw):\n    return env\n")
    (hooks / "predict.py").write_text(
        side_effect + "def predict(env, model, inputs, **kw):\n    return inputs\n"
    )
    return hooks


def make_sdk_archive_v2024(tmp: Path, marker: Path | None = None, name: str = "demo.mlarchive") -> Path:
    """Two submodels (one file, one directory), hooks and src, v2024.1 manifest by the SDK."""
    from mlsteam_model_sdk.core.dev.archive import build_archive  # the SDK: in the tests, not at collection
    from mlsteam_model_sdk.core.dev.manifest import (  # (it imports jsonschema: every worker paid for it)
        ManifestSchema,
        ModelLoaderDictSpec,
        ServicePredictorDictSpec,
        ServiceSpec,
        SubmodelSpec,
        gen_manifest,
        read_manifest,
    )

    proj = tmp / "proj"
    (proj / "weights").mkdir(parents=True)
    classifier = proj / "weights" / "classifier.pt"
    classifier.write_bytes(noise(300_000, 1))
    detector = proj / "detector"
    (detector / "variables").mkdir(parents=True)
    (detector / "saved_model.pb").write_bytes(noise(50_000, 2))
    (detector / "variables" / "variables.data-00000-of-00001").write_bytes(b"\0" * 200_000)
    (detector / "variables" / "variables.index").write_bytes(noise(999, 3))
    hooks = _hooks(proj, marker)
    src = proj / "code"
    (src / "utils").mkdir(parents=True)
    (src / "utils" / "__init__.py").write_text("")
    (src / "utils" / "pre.py").write_text("def scale(x):\n    return x / 255\n")
    (src / "requirements.txt").write_text("numpy\n")
    manifest, _hints = gen_manifest(
        name="demo",
        version="1.2.0",
        models=[
            SubmodelSpec(
                name="classifier",
                description="image classifier",
                loader=ModelLoaderDictSpec(file="load.py", function="load"),
                enc_model_cleanup="after-load",
                enc_model_cleanup_files=["models/classifier"],
            ),
            SubmodelSpec(name="detector", loader=ModelLoaderDictSpec(built_in="tensorflow")),
        ],
        services=[
            ServiceSpec(name="main", predictor=ServicePredictorDictSpec(file="predict.py", function="predict"))
        ],
        schema=ManifestSchema.V2024_1,
        in_memory_model_extraction=False,
        file_integrity_check_models="enforce",
        file_integrity_check_hooks="permissive",
        file_integrity_check_src="skip",
        file_integrity_check_manifest="strictly-enforce",
        validate=True,
    )
    manifest["models"][0]["framework"] = "pytorch"
    manifest["models"][1]["framework"] = "tensorflow"
    manifest_file = proj / "manifest.json"
    manifest_file.write_text(json.dumps(manifest, indent=2))
    assert read_manifest(manifest_file=str(manifest_file), validate=True).schema is ManifestSchema.V2024_1
    archive = tmp / name
    build_archive(
        archive_file=str(archive),
        submodels=[("classifier", str(classifier)), ("detector", str(detector))],
        manifest_file=str(manifest_file),
        src_dir=str(src),
        hooks_dir=str(hooks),
        preserve_model_files_in_src=False,
        preserve_hooks_dir_in_src=False,
        default_exclude_patterns=["__pycache__"],
    )
    return archive


V2023_MANIFEST = {
    "models": [
        {
            "name": "mnist",
            "version": "3",
            "description": "digits",
            "framework": "tensorflow.keras",
            "inputs": [{"name": "image", "type": "numpy.ndarray"}],
            "outputs": [{"name": "digit", "type": "int"}],
            "enc_model_cleanup": "after-load",
            "enc_model_cleanup_files": ["models/mnist/*.h5"],
        }
    ]
}


def make_sdk_archive_v2023(tmp: Path) -> Path:
    """A v2023.1 manifest (hand-written from the spec, validated by the SDK), zipped by the SDK."""
    from mlsteam_model_sdk.core.dev.archive import build_archive
    from mlsteam_model_sdk.core.dev.manifest import ManifestSchema, read_manifest

    proj = tmp / "proj23"
    proj.mkdir(parents=True)
    weights = proj / "mnist.h5"
    weights.write_bytes(noise(120_000, 7))
    hooks = _hooks(proj)
    manifest_file = proj / "manifest.json"
    manifest_file.write_text(json.dumps(V2023_MANIFEST))
    assert read_manifest(manifest_file=str(manifest_file)).schema is ManifestSchema.V2023_1
    archive = tmp / "mnist.mlarchive"
    build_archive(
        archive_file=str(archive),
        submodels=[("mnist", str(weights))],
        manifest_file=str(manifest_file),
        src_dir=None,
        hooks_dir=str(hooks),
        preserve_model_files_in_src=False,
        preserve_hooks_dir_in_src=False,
        default_exclude_patterns=None,
    )
    return archive


def zip_files(path: Path) -> dict[str, bytes]:
    """Every file entry (directory entries left out) and its bytes."""
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}


def push_to_layout(archive: Path, layout_dir: Path, tag: str = "v1"):
    art = build(read_mlarchive(archive))
    layout = LayoutStore(layout_dir, create=True)
    copy(art, ARTIFACT_TAG, layout, tag)
    return art, layout


@pytest.fixture(params=["v2023.1", "v2024.1"])
def sdk_archive(request, tmp_path) -> Path:
    if request.param == "v2023.1":
        return make_sdk_archive_v2023(tmp_path)
    return make_sdk_archive_v2024(tmp_path)


def test_sdk_archive_round_trips_through_a_layout(sdk_archive, tmp_path):
    original = zip_files(sdk_archive)
    assert any(n.startswith("models/") for n in original) and "manifest.json" in original
    art, layout = push_to_layout(sdk_archive, tmp_path / "layout")
    desc = layout.resolve("v1")
    assert desc.digest == art.descriptor.digest
    validate(layout, "v1")

    out = tmp_path / "out" / "back.mlarchive"
    export_mlarchive(layout, desc, out)
    exported = zip_files(out)
    assert exported == original
    assert exported["manifest.json"] == original["manifest.json"]
    with zipfile.ZipFile(out) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
        assert zf.testzip() is None
    assert not [p for p in out.parent.iterdir() if p != out]  # no temp files left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file, not mkstemp's 0600


def test_export_is_read_by_the_sdk(tmp_path):
    from mlsteam_model_sdk.core.dev.archive import extract_archive
    from mlsteam_model_sdk.core.dev.manifest import ManifestSchema, read_manifest

    archive = make_sdk_archive_v2024(tmp_path)
    _, layout = push_to_layout(archive, tmp_path / "layout")
    out = tmp_path / "back.mlarchive"
    export_mlarchive(layout, layout.resolve("v1"), out)
    extracted = tmp_path / "extracted"
    extract_archive(str(out), str(extracted))
    back = read_manifest(manifest_file=str(extracted / "manifest.json"), validate=True)
    assert back.schema is ManifestSchema.V2024_1
    assert [m["name"] for m in back.manifest["models"]] == ["classifier", "detector"]
    proj = tmp_path / "proj"
    assert (extracted / "models/classifier/classifier.pt").read_bytes() == (
        proj / "weights/classifier.pt"
    ).read_bytes()
    assert (extracted / "models/detector/variables/variables.index").read_bytes() == (
        proj / "detector/variables/variables.index"
    ).read_bytes()
    assert (extracted / "src/utils/pre.py").read_bytes() == (proj / "code/utils/pre.py").read_bytes()
    assert (extracted / "hooks/load.py").read_bytes() == (proj / "hooks/load.py").read_bytes()


def test_layers_and_config_of_a_multi_model_archive(tmp_path):
    archive = make_sdk_archive_v2024(tmp_path)
    package = read_mlarchive(archive)
    assert package.source_format == "mlarchive"
    art = build(package)
    manifest: Manifest = art.manifest
    layers = {}
    for layer in manifest.layers:
        lt = parse_layer_media_type(layer.mediaType)
        layers[layer.annotations["org.cnai.model.filepath"]] = (lt.kind, lt.variant)
    assert layers == {
        "hooks": (Kind.CODE, Variant.TAR),
        "manifest.json": (Kind.WEIGHT_CONFIG, Variant.RAW),
        "models/classifier/classifier.pt": (Kind.WEIGHT, Variant.RAW),
        "models/detector/saved_model.pb": (Kind.WEIGHT, Variant.RAW),
        "models/detector/variables/variables.data-00000-of-00001": (Kind.WEIGHT, Variant.RAW),
        "models/detector/variables/variables.index": (Kind.WEIGHT, Variant.RAW),
        "src": (Kind.CODE, Variant.TAR),
    }
    config = parse_config(art.config_bytes)
    assert config.descriptor.name == "demo"
    assert config.descriptor.version == "1.2.0"
    assert "classifier" in config.descriptor.description and "detector" in config.descriptor.description
    assert config.config.format == "pytorch,tensorflow"
    ann = manifest.annotations
    assert ann[ANNOTATION_SCHEMA] == "v2024.1"
    models = json.loads(ann[ANNOTATION_MODELS])
    assert [m["name"] for m in models] == ["classifier", "detector"]
    assert models[0]["enc_model_cleanup"] == "after-load"
    assert models[0]["enc_model_cleanup_files"] == ["models/classifier"]
    assert models[0]["loader"] == {"file": "load.py", "function": "load"}
    assert models[1]["loader"] == {"built-in": "tensorflow"}
    assert json.loads(ann[ANNOTATION_SERVICES]) == [
        {"name": "main", "predictor": {"file": "predict.py", "function": "predict"}}
    ]
    assert json.loads(ann[ANNOTATION_INTEGRITY]) == {
        "models": "enforce", "hooks": "permissive", "src": "skip", "manifest": "strictly-enforce"
    }
    assert ann[ANNOTATION_IN_MEMORY] == "false"


def test_v2023_mapping(tmp_path):
    package = read_mlarchive(make_sdk_archive_v2023(tmp_path))
    assert package.descriptor == {"name": "mnist", "version": "3", "description": "digits"}
    assert package.config == {"format": "tensorflow.keras"}
    assert package.annotations[ANNOTATION_SCHEMA] == "v2023.1"
    models = json.loads(package.annotations[ANNOTATION_MODELS])
    assert models[0]["inputs"] == [{"name": "image", "type": "numpy.ndarray"}]
    assert models[0]["outputs"] == [{"name": "digit", "type": "int"}]
    assert ANNOTATION_SERVICES not in package.annotations


def test_builds_are_reproducible(tmp_path):
    archive = make_sdk_archive_v2024(tmp_path)
    first = build(read_mlarchive(archive))
    second = build(read_mlarchive(archive))
    assert first.descriptor.digest == second.descriptor.digest
    _, layout = push_to_layout(archive, tmp_path / "layout")
    a, b = tmp_path / "a.mlarchive", tmp_path / "b.mlarchive"
    export_mlarchive(layout, layout.resolve("v1"), a)
    export_mlarchive(layout, layout.resolve("v1"), b)
    assert a.read_bytes() == b.read_bytes()
    # Exporting and reading again gives the very same artifact.
    assert build(read_mlarchive(a)).descriptor.digest == first.descriptor.digest


def test_unknown_fields_are_kept():
    doc = {
        "schema": "v2024.1",
        "version": "1",
        "future_top": {"x": 1},
        "models": [{"name": "m", "future_model_field": [1, 2]}],
        "services": [{"name": "main", "predictor": {"built-in": "echo", "opt": True}}],
    }
    manifest = parse_manifest(json.dumps(doc).encode())
    assert manifest.extra_fields() == {"future_top": {"x": 1}}
    assert manifest.models[0].model_extra == {"future_model_field": [1, 2]}
    from ocibridge.kinds.mlsteam.mapping import annotations_of

    models = json.loads(annotations_of(manifest)[ANNOTATION_MODELS])
    assert models == [{"name": "m", "future_model_field": [1, 2]}]


def test_hooks_are_never_imported_or_run(tmp_path):
    marker = tmp_path / "hook-ran"
    archive = make_sdk_archive_v2024(tmp_path, marker=marker)
    assert b"hook-ran" in zip_files(archive)["hooks/load.py"]
    modules_before = set(sys.modules)
    _, layout = push_to_layout(archive, tmp_path / "layout")
    out = tmp_path / "back.mlarchive"
    export_mlarchive(layout, layout.resolve("v1"), out)
    assert zip_files(out)["hooks/load.py"] == zip_files(archive)["hooks/load.py"]
    assert not marker.exists()
    assert not {m for m in set(sys.modules) - modules_before if m in ("load", "predict", "utils")}


def test_cli_export_stores_weights_and_the_sdk_reads_it(tmp_path, capsys):
    """`ocibridge pull REF x.mlarchive`: weights of 1 MiB or more are stored (deflate would run
    at ~40 MB/s for a 0-20 % gain), the rest deflated; the SDK extracts it all."""
    from mlsteam_model_sdk.core.dev.archive import build_archive, extract_archive
    from mlsteam_model_sdk.core.dev.manifest import ManifestSchema, read_manifest

    from ocibridge.cli import main

    proj = tmp_path / "proj"
    (proj / "w").mkdir(parents=True)
    (proj / "w" / "big.pt").write_bytes(noise(STORE_WEIGHTS_FROM + 4321, 11))
    (proj / "w" / "small.json").write_bytes(b'{"layers": 2}' * 100)
    hooks = _hooks(proj)
    manifest_file = proj / "manifest.json"
    manifest_file.write_text(json.dumps(V2023_MANIFEST))
    archive = tmp_path / "in.mlarchive"
    build_archive(archive_file=str(archive), submodels=[("mnist", str(proj / "w"))],
                  manifest_file=str(manifest_file), src_dir=None, hooks_dir=str(hooks),
                  preserve_model_files_in_src=False, preserve_hooks_dir_in_src=False,
                  default_exclude_patterns=None)
    ref = f"oci:{tmp_path / 'layout'}:m"
    assert main(["push", str(archive), ref]) == 0
    out = tmp_path / "back.mlarchive"
    assert main(["pull", ref, str(out)]) == 0
    assert zip_files(out) == zip_files(archive)
    with zipfile.ZipFile(out) as zf:
        methods = {i.filename: i.compress_type for i in zf.infolist()}
    assert methods.pop("models/mnist/big.pt") == zipfile.ZIP_STORED
    assert set(methods.values()) == {zipfile.ZIP_DEFLATED}
    extract_archive(str(out), str(tmp_path / "x"))
    assert (tmp_path / "x/models/mnist/big.pt").read_bytes() == (proj / "w/big.pt").read_bytes()
    assert read_manifest(manifest_file=str(tmp_path / "x/manifest.json")).schema is ManifestSchema.V2023_1
    digests = []
    for source in (archive, out):  # the export is read back into the very same artifact
        capsys.readouterr()
        assert main(["push", str(source), f"oci:{tmp_path / 'again'}:m", "--json"]) == 0
        digests.append(json.loads(capsys.readouterr().out)["digest"])
    assert digests[0] == digests[1]
    # Deflate everything when asked (the Python API): same files, smaller only by what deflates.
    layout = LayoutStore(tmp_path / "layout")
    deflated = tmp_path / "deflated.mlarchive"
    export_mlarchive(layout, layout.resolve("m"), deflated, compress_weights=True)
    with zipfile.ZipFile(deflated) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    assert zip_files(deflated) == zip_files(archive)
