"""A model of no files (issue 75: a Hub repository whose last file was deleted) is built as
image-spec 1.1 asks: its one layer the empty descriptor, that descriptor's digest its one
ModelPack diffId; the same (empty) content gives the same digest; push of an empty directory
is still refused; pull's path judgement sees no file in it."""

from __future__ import annotations

import pytest

from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.errors import SourceError
from ocibridge.model.builder import BuildOptions
from ocibridge.model.known import plan_known
from ocibridge.model.paths import ArtifactPaths
from ocibridge.model.validate import validate_manifest
from ocibridge.oci.empty import EMPTY_DIGEST, empty_layer, is_empty_model
from ocibridge.oci.models import Manifest


def _empty(annotations: dict[str, str] | None = None):
    options = BuildOptions(annotations=annotations or {"io.ocibridge.commit.summary": "gone"}, allow_empty=True)
    return plan_known({}, "acme/m", options, ChunkPolicy(), excludes=()).artifact()


def test_an_empty_model_is_the_empty_descriptor_and_reproducible():
    built = _empty()
    assert built.manifest.layers == [empty_layer()]
    assert b'"data":"e30="' in built.manifest_bytes
    assert b'"diffIds":["' + EMPTY_DIGEST.encode() + b'"]' in built.config_bytes
    assert _empty().descriptor.digest == built.descriptor.digest
    assert _empty({"io.ocibridge.commit.summary": "other"}).descriptor.digest != built.descriptor.digest
    assert built.fetch_bytes(empty_layer()) == b"{}"  # the copy finds the layer's blob


def test_validate_takes_it_and_pull_finds_no_file():
    built = _empty()
    manifest = Manifest.model_validate_json(built.manifest_bytes)
    assert is_empty_model(manifest.layers)
    warnings: list[str] = []
    assert validate_manifest(built, manifest, warnings) == []
    assert warnings == []
    paths = ArtifactPaths(manifest)
    assert (paths.raw, paths.tars, paths.changesets) == ([], [], [])


def test_push_of_no_files_is_still_refused():
    with pytest.raises(SourceError, match="no files"):
        plan_known({}, "acme/m", BuildOptions(), ChunkPolicy(), excludes=()).artifact()



def test_an_empty_model_is_signed_by_cosign_and_gets_no_oms_signature(tmp_path, capsys):
    """A commit that deleted the last file is signed like any other in cosign's two forms, which
    sign the manifest. OMS wants at least one file (its specification, section 6.1): asked for
    with the others (``--form all``, a serve that signs every commit so) it is skipped and the
    result says why; asked for alone it is one error line and nothing is written."""
    import json

    import ocibridge
    from ocibridge.cli import main
    from ocibridge.errors import SignatureError
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.transfer.copy import copy
    from tests.signing_keys import key_pair

    built = _empty()
    with LayoutStore(tmp_path / "store", create=True) as store:
        copy(built, built.descriptor, store, "v1")
    ref = f"oci:{tmp_path}/store:v1"
    private, public = key_pair(tmp_path / "k")
    before = sorted(p.name for p in (tmp_path / "store" / "blobs" / "sha256").iterdir())
    with pytest.raises(SignatureError, match="no files to sign"):
        ocibridge.sign(ref, ocibridge.SignOptions(key=private), form="oms")
    assert sorted(p.name for p in (tmp_path / "store" / "blobs" / "sha256").iterdir()) == before

    signed = ocibridge.sign(ref, ocibridge.SignOptions(key=private), form="all")
    assert signed.digest == built.descriptor.digest
    assert set(signed.written) == {"classic", "bundle"}
    assert list(signed.skipped) == ["oms"] and "at least one" in signed.skipped["oms"]
    verified = ocibridge.verify(ref, ocibridge.VerifyOptions(keys=[public]))
    assert sorted(s.form for s in verified.signatures) == ["bundle", "classic"]

    capsys.readouterr()
    assert main(["sign", ref, "--key", str(private), "--form", "all"]) == 0
    said = capsys.readouterr().out
    assert "already there: classic, bundle" in said and "oms: not written: the model has no files" in said
    assert main(["sign", ref, "--key", str(private), "--form", "all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == {"oms": signed.skipped["oms"]}


@pytest.mark.parametrize(("to", "media_types"), [("modelkit", None), ("docker-model", None), ("modelpack", "cncf")])
def test_an_empty_model_converts_to_each_family_and_back_to_the_same_digest(tmp_path, to, media_types):
    """A model of no files converts like any other: to each OCI family of model artifacts, into a
    store that never held the empty descriptor's blob, and back to the original manifest, byte
    for byte; each form pulls to an empty directory."""
    import ocibridge
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.transfer.copy import copy

    built = _empty()
    with LayoutStore(tmp_path / "src", create=True) as store:
        copy(built, built.descriptor, store, "v1")
    there = ocibridge.convert(f"oci:{tmp_path}/src:v1", f"oci:{tmp_path}/other:x", to, media_types=media_types)
    alone = f"oci:{tmp_path}/alone:x"  # the converted form by itself: no {} blob beside it
    ocibridge.copy_reference(f"oci:{tmp_path}/other:x", alone)
    assert ocibridge.validate(alone).descriptor.digest == there.conversion.descriptor.digest  # raises if invalid
    back = ocibridge.convert(alone, f"oci:{tmp_path}/back:v1", "modelpack")
    assert back.conversion.descriptor.digest == built.descriptor.digest != there.conversion.descriptor.digest
    assert back.conversion.restored
    assert ocibridge.validate(f"oci:{tmp_path}/back:v1").descriptor.digest == built.descriptor.digest
    for ref, out in ((alone, tmp_path / "pulled-there"), (f"oci:{tmp_path}/back:v1", tmp_path / "pulled-back")):
        ocibridge.pull(ref, str(out))
        assert list(out.iterdir()) == []


def test_a_modelcar_of_an_empty_model_is_refused_in_one_line(tmp_path, capsys):
    """A ModelCar image is for a server to load files from /models: of a model of no files it
    would be an image validate refuses, so convert says so and writes nothing."""
    from ocibridge.cli import main
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.transfer.copy import copy

    built = _empty()
    with LayoutStore(tmp_path / "src", create=True) as store:
        copy(built, built.descriptor, store, "v1")
    assert main(["convert", f"oci:{tmp_path}/src:v1", f"oci:{tmp_path}/car:v1", "--to", "modelcar"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no files" in err and "empty /models" in err
    assert not (tmp_path / "car").exists()
