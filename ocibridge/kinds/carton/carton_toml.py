"""``carton.toml`` (spec v1) as pydantic models. Unknown tables and fields are kept, as the
spec says readers must ignore (not refuse) them; the file itself travels verbatim as a layer,
so the models only serve validation and the mapping to ModelPack."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from ocibridge.core import tomltext
from ocibridge.kinds.carton.errors import CartonError
from ocibridge.kinds.carton.manifest import TOML_NAME

SUPPORTED_SPEC_VERSIONS = (1,)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class TensorSpec(_Open):
    name: StrictStr
    dtype: StrictStr
    shape: StrictStr | list[StrictStr | StrictInt] | None = None
    description: StrictStr | None = None
    internal_name: StrictStr | None = None


class RunnerInfo(_Open):
    runner_name: StrictStr
    required_framework_version: StrictStr
    runner_compat_version: StrictInt | None = None
    opts: dict[str, Any] | None = None


class CartonToml(_Open):
    spec_version: StrictInt
    model_name: StrictStr | None = None
    short_description: StrictStr | None = None
    model_description: StrictStr | None = None
    license: StrictStr | None = None
    repository: StrictStr | None = None
    homepage: StrictStr | None = None
    required_platforms: list[StrictStr] | None = None
    input: list[TensorSpec] | None = None
    output: list[TensorSpec] | None = None
    self_test: list[dict[str, Any]] | None = None
    example: list[dict[str, Any]] | None = None
    runner: RunnerInfo


def parse_carton_toml(data: bytes) -> CartonToml:
    """Parse and check; the spec version first, so a future format gets a clear message."""
    try:
        doc = tomltext.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomltext.TomlError) as e:
        raise CartonError(f"{TOML_NAME} is not valid TOML: {e}") from None
    version = doc.get("spec_version")
    if version is None:
        raise CartonError(f"{TOML_NAME}: spec_version is missing")
    if version not in SUPPORTED_SPEC_VERSIONS or isinstance(version, bool):
        raise CartonError(
            f"{TOML_NAME}: spec_version {version!r} is not supported (known: "
            f"{', '.join(map(str, SUPPORTED_SPEC_VERSIONS))})"
        )
    try:
        return CartonToml.model_validate(doc)
    except PydanticValidationError as e:
        reasons = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise CartonError(f"{TOML_NAME}: " + "; ".join(reasons)) from None
