import io

import pytest

from ocibridge.errors import DigestMismatch, InvalidReference
from ocibridge.oci.digest import VerifyingReader, sha256_bytes, verify_bytes
from ocibridge.oci.mediatypes import (
    Family,
    Kind,
    Variant,
    family_of_artifact,
    layer_media_type,
    parse_layer_media_type,
)
from ocibridge.oci.models import Index, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import parse_layout_reference, parse_registry_reference


@pytest.mark.parametrize(
    "text, registry, repository, tag, digest",
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("user/model:v1", "docker.io", "user/model", "v1", None),
        ("localhost:5000/team/m", "localhost:5000", "team/m", "latest", None),
        ("127.0.0.1:5000/m:1.0", "127.0.0.1:5000", "m", "1.0", None),
        ("ghcr.io/org/m@sha256:" + "a" * 64, "ghcr.io", "org/m", None, "sha256:" + "a" * 64),
        ("ghcr.io/org/m:t@sha256:" + "b" * 64, "ghcr.io", "org/m", "t", "sha256:" + "b" * 64),
        ("index.docker.io/x/y", "docker.io", "x/y", "latest", None),
        ("[::1]:5000/m:v", "[::1]:5000", "m", "v", None),
    ],
)
def test_registry_references(text, registry, repository, tag, digest):
    ref = parse_registry_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert ref.reference == (digest or tag)


@pytest.mark.parametrize(
    "bad",
    ["", "host.io/UPPER", "host:5000/repo:bad tag", "repo@sha256:123", "http://h/r", "a/b:" + "x" * 200],
)
def test_invalid_registry_references(bad):
    with pytest.raises(InvalidReference):
        parse_registry_reference(bad)


def test_layout_references():
    assert parse_layout_reference("oci:/tmp/x:v1").path == "/tmp/x"
    assert parse_layout_reference("oci:/tmp/x:v1").tag == "v1"
    ref = parse_layout_reference("oci:rel/dir")
    assert (ref.path, ref.tag, ref.reference) == ("rel/dir", None, "latest")
    pinned = parse_layout_reference("oci:/a/b@sha256:" + "c" * 64)
    assert pinned.digest == "sha256:" + "c" * 64 and pinned.path == "/a/b"
    assert parse_layout_reference("oci:/x:1/y").path == "/x:1/y"  # a colon before the last slash is path
    # a name after the first ':' splits there, as skopeo splits it, whether the layout exists or not
    new = parse_layout_reference("oci:no-such-layout-here:acme/x:v1")
    assert (new.path, new.tag) == ("no-such-layout-here", "acme/x:v1")
    with pytest.raises(InvalidReference):
        parse_layout_reference("oci:")


def test_media_types_both_families():
    for family in Family:
        for kind in Kind:
            for variant in Variant:
                mt = layer_media_type(kind, variant, family)
                parsed = parse_layer_media_type(mt)
                assert parsed is not None
                assert (parsed.family, parsed.kind, parsed.variant) == (family, kind, variant)
    # The seed's bare form means raw; weight.config is not mistaken for weight.
    assert parse_layer_media_type("application/vnd.cnai.model.weight.v1").variant is Variant.RAW
    assert parse_layer_media_type("application/vnd.cncf.model.weight.config.v1.tar").kind is Kind.WEIGHT_CONFIG
    assert parse_layer_media_type("application/vnd.oci.image.layer.v1.tar") is None
    assert parse_layer_media_type("application/vnd.cnai.model.weight.v1.rar") is None
    assert family_of_artifact("application/vnd.cncf.model.manifest.v1+json", None) is Family.CNCF
    assert family_of_artifact(None, "application/vnd.cnai.model.config.v1+json") is Family.CNAI


def test_verifying_reader_accepts_good_and_rejects_bad():
    data = b"hello world" * 1000
    good = VerifyingReader(io.BytesIO(data), sha256_bytes(data), len(data))
    assert good.read() == data and good.read() == b"" and good.verified
    bad = VerifyingReader(io.BytesIO(data[:-1] + b"X"), sha256_bytes(data), len(data))
    with pytest.raises(DigestMismatch):
        while bad.read(100):
            pass
    longer = VerifyingReader(io.BytesIO(data + b"!"), sha256_bytes(data), len(data))
    with pytest.raises(DigestMismatch):
        longer.read()
    with pytest.raises(DigestMismatch):
        verify_bytes(b"x", sha256_bytes(b"y"))


def test_manifest_round_trip_keeps_unknown_fields():
    raw = (
        b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
        b'"config":{"mediaType":"a/b","digest":"sha256:' + b"0" * 64 + b'","size":1,"x-extra":7},'
        b'"layers":[],"vendorField":{"k":"v"}}'
    )
    m = parse_manifest_bytes(raw)
    assert isinstance(m, Manifest)
    out = m.to_json_bytes()
    assert b'"vendorField":{"k":"v"}' in out and b'"x-extra":7' in out
    idx = parse_manifest_bytes(b'{"schemaVersion":2,"manifests":[]}')
    assert isinstance(idx, Index)
