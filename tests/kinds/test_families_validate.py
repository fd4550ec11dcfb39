"""validate: conformance to the model-spec as written, runtime readiness as separate warnings."""

from __future__ import annotations

import json

from ocibridge.cli import main
from ocibridge.oci.mediatypes import ANNOTATION_TITLE
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_model


def _modctl_style(tmp_path, family: str = "cnai") -> str:
    """An artifact as modctl writes it: file path annotations, no org.opencontainers.image.title."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "-q", "--media-types", family]) == 0
    layout = LayoutStore(tmp_path / "s")
    desc = layout.resolve("v")
    manifest = Manifest.model_validate_json(layout.fetch_bytes(desc))
    for layer in manifest.layers:
        (layer.annotations or {}).pop(ANNOTATION_TITLE, None)
    data = manifest.to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "modctl")
    return f"oci:{tmp_path}/s:modctl"


def test_an_artifact_without_titles_is_valid_with_a_cri_o_note_when_asked(tmp_path, capsys):
    ref = _modctl_style(tmp_path)
    capsys.readouterr()
    assert main(["validate", ref]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{ref}: valid (sha256:")
    assert "warning:" not in out  # runtime readiness only when asked (issue 32)
    assert main(["validate", ref, "--runtime", "cri-o"]) == 0
    out = capsys.readouterr().out
    assert "warning: layers[0].annotations: no org.opencontainers.image.title: CRI-O 1.34+" in out
    assert "containerd" not in out
    assert main(["validate", ref, "--runtime", "cri-o@1.33"]) == 0  # 1.33 reads org.cnai.model.filepath
    assert "warning:" not in capsys.readouterr().out


def test_strict_with_a_runtime_turns_its_notes_into_errors(tmp_path, capsys):
    ref = _modctl_style(tmp_path, "cncf")
    capsys.readouterr()
    assert main(["validate", ref, "--strict", "--json"]) == 0  # conforming: no runtime asked
    assert main(["validate", ref, "--strict", "--json", "--runtime", "cri-o@1.33"]) == 1
    capsys.readouterr()
    assert main(["validate", ref, "--strict", "--json", "--runtime", "cri-o@1.33"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert any(r.startswith("(strict) layers[") and "CRI-O 1.33" in r for r in report["reasons"])


def test_a_plain_modelpack_artifact_passes_strict(tmp_path, capsys):
    """`validate --strict` failed every plain ModelPack artifact ("containerd mounts images
    only"): a runtime note is not a spec violation (issue 32)."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "-q"]) == 0
    capsys.readouterr()
    assert main(["validate", f"oci:{tmp_path}/s:v", "--strict", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True and report["warnings"] == []
    assert main(["validate", f"oci:{tmp_path}/s:v", "--runtime", "containerd@2.1"]) == 0
    assert "warning: containerd mounts images only" in capsys.readouterr().out
    assert main(["validate", f"oci:{tmp_path}/s:v", "--runtime", "containerd", "--strict"]) == 1
    assert "(strict) containerd mounts images only" in capsys.readouterr().err


def test_a_spec_warning_fails_strict(tmp_path, capsys):
    """A layer without the file metadata annotation conforms but is warned about; --strict fails."""
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "-q"]) == 0
    layout = LayoutStore(tmp_path / "s")
    desc = layout.resolve("v")
    manifest = Manifest.model_validate_json(layout.fetch_bytes(desc))
    for layer in manifest.layers:
        for key in list(layer.annotations or {}):
            if key.endswith(".file.metadata+json"):
                del layer.annotations[key]
    data = manifest.to_json_bytes()
    layout.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "nometa")
    capsys.readouterr()
    ref = f"oci:{tmp_path}/s:nometa"
    assert main(["validate", ref]) == 0
    assert "warning: layers[0].annotations: no " in capsys.readouterr().out
    assert main(["validate", ref, "--strict"]) == 1
    err = capsys.readouterr().err
    assert "(strict) layers[0].annotations: no " in err and "Traceback" not in err


def test_an_unknown_runtime_is_one_line(tmp_path, capsys):
    assert main(["validate", f"oci:{tmp_path}/s:v", "--runtime", "docker"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cri-o" in err


def test_a_modelcar_index_is_ready_for_containerd(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "-q"]) == 0
    assert main(["k8s", "modelcar", f"oci:{tmp_path}/s:v", "--index", "--tag", "both"]) == 0
    capsys.readouterr()
    assert main(["validate", f"oci:{tmp_path}/s:both", "--strict", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"valid": True, "digest": report["digest"], "family": "modelpack", "warnings": []}


# -- validate of the other families: said what it is, checked as far as it can be --------------

def _in_registry(registry, unique_repo, src: str, tag: str) -> str:
    ref = f"{registry.host}/{unique_repo}:{tag}"
    assert main(["copy", src, ref, "-q"]) == 0
    return ref


def test_a_modelkit_and_a_docker_model_are_named_and_checked_not_called_invalid(registry, unique_repo,
                                                                                  tmp_path, capsys):
    """A user validating a ModelKit or a Docker model artifact was told 'invalid: not a ModelPack
    artifact'. Each is a well-formed model of its family: validate says which, checks its config
    and layers through the ModelPack form convert would write, and exits 0."""
    import shutil

    from support.data import data

    from tests.kinds.test_families_pairs import DOCKER_DIGEST, KIT_DIGEST

    shutil.copytree(data("kitops", "kit-latest-tar"), tmp_path / "kit")
    shutil.copytree(data("docker-model", "gguf-dummy-v0.1"), tmp_path / "docker")
    kit = _in_registry(registry, unique_repo, f"oci:{tmp_path / 'kit'}@{KIT_DIGEST}", "kit")
    docker = _in_registry(registry, unique_repo, f"oci:{tmp_path / 'docker'}@{DOCKER_DIGEST}", "docker")
    capsys.readouterr()
    for ref, title, family in ((kit, "KitOps ModelKit", "modelkit"), (docker, "Docker model artifact", "docker-model")):
        assert main(["validate", ref]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"{ref}: valid {title} (sha256:"), out
        assert any("--to modelpack" in line for line in out), out  # how to get a ModelPack artifact
        assert not any("containerd" in line for line in out), out  # only when asked
        assert main(["validate", ref, "--runtime", "containerd"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert any(line.startswith("  warning: containerd mounts images only") for line in out), out
        assert main(["validate", ref, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["valid"] is True and report["family"] == family


def test_a_modelkit_whose_config_does_not_parse_is_invalid_saying_so(registry, unique_repo, tmp_path, capsys):
    import io

    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:kit"
    assert main(["push", str(model), ref, "-q", "--to", "modelkit"]) == 0
    target = __import__("ocibridge.places.locate", fromlist=["x"]).open_target(ref, plain_http=True)
    desc = target.store.resolve("kit")
    manifest = Manifest.model_validate_json(target.store.fetch_bytes(desc))
    broken = b"{not json"
    manifest.config = Descriptor.for_bytes(manifest.config.mediaType, broken)
    target.store.push_blob(manifest.config, io.BytesIO(broken))
    data = manifest.to_json_bytes()
    target.store.push_manifest(Descriptor.for_bytes(desc.mediaType, data), data, "broken")
    capsys.readouterr()
    assert main(["validate", f"{registry.host}/{unique_repo}:broken"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{registry.host}/{unique_repo}:broken: invalid KitOps ModelKit"
    assert len(err) >= 2 and "config" in err[1] and "Traceback" not in "".join(err)


def test_a_modelcar_image_is_valid_and_no_containerd_warning(registry, unique_repo, tmp_path, capsys):
    """A ModelCar image is what containerd mounts: no 'containerd mounts images only' warning."""
    model = make_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}"
    assert main(["push", str(model), f"{ref}:v1", "-q"]) == 0
    assert main(["convert", f"{ref}:v1", f"{ref}:car", "--to", "modelcar", "-q"]) == 0
    capsys.readouterr()
    assert main(["validate", f"{ref}:car", "--strict", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "modelcar" and report["warnings"] == []


def test_a_container_image_is_invalid_saying_what_it_is(registry, unique_repo, tmp_path, capsys):
    from tests.modelcar_images import BASE, write_image

    src = write_image(tmp_path / "img", "v1", [BASE], docker=False)
    ref = _in_registry(registry, unique_repo, src, "img")
    capsys.readouterr()
    assert main(["validate", ref]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{ref}: invalid", f"  - {ref} is a container image, not a model of a known family "
                                      "(modelpack, modelkit, docker-model, modelcar, ollama)"]
