"""The MLSteam ``manifest.json`` (schemas v2023.1 and v2024.1) as pydantic models.

Unknown fields are kept (``extra="allow"``): the manifest travels verbatim as a layer anyway,
and the models serve validation and the mapping to ModelPack, so nothing a newer writer adds
is lost or refused. Known fields are checked as the vendor's JSON Schemas intend.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr
from pydantic import ValidationError as PydanticValidationError

from ocibridge.core import boundedjson
from ocibridge.errors import SourceError

MANIFEST_NAME = "manifest.json"
SCHEMA_2023 = "v2023.1"
SCHEMA_2024 = "v2024.1"
SUPPORTED_SCHEMAS = (SCHEMA_2023, SCHEMA_2024)

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Framework = Literal["tensorflow", "tensorflow.keras", "pytorch", "pytorch.lightning"]
CleanupPolicy = Literal["never", "after-load"]
IntegrityMode = Literal["skip", "permissive", "enforce", "strictly-enforce"]
#: A hook reference (v2024.1): a relative path, ``{"built-in": name, ...}`` or
#: ``{"file": path, "function": name}``.
HookRef = StrictStr | dict[str, Any]


class InvalidManifest(SourceError):
    """A ``manifest.json`` that is not a valid MLSteam manifest; names the field."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class IOItem(_Open):
    name: StrictStr | None = None
    type: StrictStr | None = None


class Submodel(_Open):
    name: NonEmpty
    version: NonEmpty | None = None
    description: StrictStr | None = None
    framework: Framework | None = None
    loader: HookRef | None = None
    in_memory_model_extraction: StrictBool | None = None
    inputs: list[IOItem] | None = None
    outputs: list[IOItem] | None = None
    enc_model_cleanup: CleanupPolicy | None = None
    enc_model_cleanup_files: list[StrictStr] | None = None


class FileIntegrityCheck(_Open):
    models: IntegrityMode | None = None
    hooks: IntegrityMode | None = None
    src: IntegrityMode | None = None
    manifest: IntegrityMode | None = None


class Service(_Open):
    name: NonEmpty
    predictor: HookRef | None = None


class MlarchiveManifest(_Open):
    """The whole manifest. ``schema`` is absent in v2023.1 files (so it defaults to that)."""

    schema_: StrictStr | None = Field(default=None, alias="schema")
    name: NonEmpty | None = None
    version: NonEmpty | None = None
    in_memory_model_extraction: StrictBool | None = None
    file_integrity_check: FileIntegrityCheck | None = None
    models: Annotated[list[Submodel], Field(min_length=1)]
    services: list[Service] | None = None

    @property
    def schema_version(self) -> str:
        return self.schema_ or SCHEMA_2023

    def extra_fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidManifest(f"{MANIFEST_NAME}: {message}")


def parse_manifest(data: bytes) -> MlarchiveManifest:
    """Parse and check a manifest; every problem becomes one line naming the field."""
    try:
        doc = boundedjson.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidManifest(f"{MANIFEST_NAME}: not valid JSON: {e}") from None
    _require(isinstance(doc, dict), "must be a JSON object")
    try:
        manifest = MlarchiveManifest.model_validate(doc)
    except PydanticValidationError as e:
        reasons = []
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            reasons.append(f"{where}: {err['msg']}")
        raise InvalidManifest(f"{MANIFEST_NAME}: " + "; ".join(reasons)) from None
    schema = manifest.schema_version
    _require(
        schema in SUPPORTED_SCHEMAS,
        f"schema: {schema!r} is not supported (known: {', '.join(SUPPORTED_SCHEMAS)})",
    )
    if schema == SCHEMA_2023:
        for i, model in enumerate(manifest.models):
            _require(model.version is not None, f"models.{i}.version: required in {SCHEMA_2023}")
            _require(
                model.framework is not None, f"models.{i}.framework: required in {SCHEMA_2023}"
            )
    else:
        _require(manifest.version is not None, f"version: required in {schema}")
    names = [m.name for m in manifest.models]
    for i, name in enumerate(names):
        _require(names.index(name) == i, f"models.{i}.name: duplicate model name {name!r}")
    return manifest


def hook_file(ref: HookRef | None) -> str | None:
    """The archive-relative file a loader or predictor reference names, if any."""
    if isinstance(ref, str):
        return ref
    file = ref.get("file") if isinstance(ref, dict) else None
    if isinstance(file, str):
        return file
    return None
