"""The OCI models (ocibridge.oci.models, what every command uses) against the JSON Schemas made
from them (ocibridge.api.schemas, what schemas/oci-*.schema.json hold): on any document, what the
models accept their schema accepts too, and what the schema refuses the models refuse; the models
are stricter only on integers written as floats and on a digest's form, which no schema says."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocibridge.api.schemas import json_schema
from ocibridge.errors import OcibridgeError
from ocibridge.oci import models
from ocibridge.oci.mediatypes import OCI_INDEX, OCI_MANIFEST

if TYPE_CHECKING:
    import jsonschema

DIGEST = "sha256:" + "ab" * 32
NAMES = ("Descriptor", "Manifest", "Index", "Platform", "RootFS", "ImageConfig")

json_leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "é"])
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.sampled_from(["a", "b", "size"]), inner, max_size=3), max_leaves=6)
# mostly well-typed values, sometimes not: the two must agree either way
text = st.sampled_from(["application/x", "", "amd64"]) | json_value
size = st.integers(-1, 2**40) | json_value
digest = st.sampled_from([DIGEST, "sha512:" + "c" * 128]) | st.just("sha256:short")
platform = st.fixed_dictionaries(
    {"architecture": text, "os": text},
    optional={"os.version": text, "os_version": text, "variant": text, "os.features": json_value})
descriptor = st.fixed_dictionaries(
    {"mediaType": text, "digest": digest, "size": size},
    optional={"urls": st.lists(text, max_size=2) | json_value,
              "annotations": st.dictionaries(st.sampled_from(["k", "org.x"]), text, max_size=2) | json_value,
              "artifactType": text, "platform": platform | json_value, "data": json_value})
manifest = st.fixed_dictionaries(
    {"config": descriptor},
    optional={"schemaVersion": st.just(2) | json_value, "mediaType": st.just(OCI_MANIFEST) | text,
              "artifactType": text, "layers": st.lists(descriptor, max_size=3) | json_value,
              "subject": descriptor, "annotations": st.dictionaries(st.just("k"), text, max_size=1),
              "unknown": json_value})
index = st.fixed_dictionaries(
    {}, optional={"schemaVersion": st.just(2) | json_value, "mediaType": st.just(OCI_INDEX) | text,
                  "manifests": st.lists(descriptor, max_size=3) | json_value, "subject": descriptor,
                  "annotations": st.dictionaries(st.just("k"), text, max_size=1), "unknown": json_value})
image_config = st.fixed_dictionaries(
    {}, optional={"created": text, "architecture": text, "os": text, "config": json_value,
                  "rootfs": st.fixed_dictionaries({}, optional={"type": text, "diff_ids": st.lists(text) | json_value}),
                  "history": st.lists(st.dictionaries(st.just("created_by"), text)) | json_value,
                  "variant": text})
DOCS = {"Descriptor": descriptor, "Manifest": manifest, "Index": index, "Platform": platform,
        "ImageConfig": image_config}


SCHEMAS = {name: json_schema(getattr(models, name)) for name in NAMES}


def _read(cls: type, doc: object) -> object:
    try:
        return cls.model_validate(doc)
    except (ValueError, OcibridgeError) as e:
        return e


def _schema_error(name: str, doc: object) -> jsonschema.ValidationError | None:
    import jsonschema  # not at collection, where every worker paid for it (its format checkers build grammars)

    return jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMAS[name]).iter_errors(doc))


def _same(name: str, doc: object) -> None:
    plain = _read(getattr(models, name), doc)
    refused = _schema_error(name, doc)
    if refused is not None:
        assert isinstance(plain, Exception), \
            f"{name}: the schema refuses what the model took ({refused.message}): {doc!r}"
        return
    if isinstance(plain, Exception):  # stricter on purpose: integers as JSON integers, digests well formed,
        # and a platform's os_version (read as os.version's other spelling, as the pydantic twin read it) a string
        assert (isinstance(plain, models.WireError) and "integer" in plain.message) \
            or "digest" in str(plain) or "os_version" in str(plain), (plain, doc)
        return
    # what was read writes back as a document of the same schema
    assert _schema_error(name, json.loads(plain.to_json_bytes())) is None, doc


@pytest.mark.parametrize("name", sorted(DOCS))
def test_models_accept_only_what_their_schema_accepts(name: str) -> None:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(DOCS[name])
    def check(doc: dict) -> None:
        _same(name, doc)

    check()


def test_stricter_than_the_schema_only_on_integers_and_digests() -> None:
    doc = {"mediaType": "a", "digest": DIGEST, "size": 1}
    for bad in (True, "5", 5.0):
        with pytest.raises(models.WireError, match="size: Input should be a valid integer"):
            models.Descriptor.model_validate({**doc, "size": bad})
    assert _schema_error("Descriptor", {**doc, "size": 5.0}) is None  # an integer to JSON Schema
    assert _schema_error("Descriptor", {**doc, "size": True}) is not None
    assert _schema_error("Descriptor", {**doc, "size": -1}) is not None  # the bound of the field's metadata
    assert _schema_error("Descriptor", {**doc, "digest": "sha256:short"}) is None
    with pytest.raises(OcibridgeError, match="invalid digest"):
        models.Descriptor.model_validate({**doc, "digest": "sha256:short"})


def test_unknown_fields_survive_a_round_trip_in_order() -> None:
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {
        "mediaType": "a", "digest": DIGEST, "size": 0, "data": "e30=", "x": None},
        "layers": [], "z-last": {"keep": None}}, separators=(",", ":")).encode()
    manifest = models.Manifest.model_validate_json(raw)
    assert manifest.config.model_extra == {"data": "e30=", "x": None}
    # None fields are dropped from the canonical form (as the pydantic models do); nested
    # values of unknown fields are kept as they are
    assert manifest.to_json_bytes() == raw.replace(b',"x":null', b"")


def test_errors_say_where() -> None:
    doc = {"config": {"mediaType": "a", "digest": DIGEST, "size": 1},
           "layers": [{"mediaType": "a", "digest": DIGEST, "size": -1}]}
    with pytest.raises(OcibridgeError, match=r"^malformed manifest: layers\.0\.size: .*greater than or equal to 0"):
        models.parse_manifest_bytes(json.dumps(doc).encode())
    with pytest.raises(OcibridgeError, match="malformed manifest: config: Field required"):
        models.parse_manifest_bytes(b'{"layers": []}', OCI_MANIFEST)
    with pytest.raises(OcibridgeError, match="invalid digest"):
        models.Descriptor(mediaType="a", digest="sha256:zz", size=1)
    with pytest.raises(models.WireError, match="greater than or equal to 0"):
        models.Descriptor(mediaType="a", digest=DIGEST, size=-1)


def test_copy_with_update_keeps_the_original() -> None:
    desc = models.Descriptor(mediaType="a", digest=DIGEST, size=1, annotations={"k": "v"})
    copied = desc.model_copy(update={"annotations": None, "newField": 1})
    assert desc.annotations == {"k": "v"} and desc.model_extra == {}
    assert copied.annotations is None and copied.model_extra == {"newField": 1}
    assert copied != desc and desc.model_copy() == desc
    assert json.loads(copied.to_json_bytes()) == {"mediaType": "a", "digest": DIGEST, "size": 1, "newField": 1}
