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


def test_an_artifact_without_titles_is_valid_with_a_cri_o_warning(tmp_path, capsys):
    ref = _modctl_style(tmp_path)
    capsys.readouterr()
    assert main(["validate", ref]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{ref}: valid (sha256:")
    assert "warning: layers[0].annotations: no org.opencontainers.image.title: CRI-O 1.34+" in out
    assert "warning: containerd mounts images only" in out


def test_strict_turns_the_warnings_into_errors(tmp_path, capsys):
    ref = _modctl_style(tmp_path, "cncf")
    capsys.readouterr()
    assert main(["validate", ref, "--strict", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert any(r.startswith("(strict) layers[") and "CRI-O 1.33" in r for r in report["reasons"])


def test_a_modelcar_index_is_ready_for_containerd(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert main(["push", str(model), f"oci:{tmp_path}/s:v", "-q"]) == 0
    assert main(["k8s", "modelcar", f"oci:{tmp_path}/s:v", "--index", "--tag", "both"]) == 0
    capsys.readouterr()
    assert main(["validate", f"oci:{tmp_path}/s:both", "--strict", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"valid": True, "digest": report["digest"], "warnings": []}
