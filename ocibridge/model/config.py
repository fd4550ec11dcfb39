"""The ModelPack config (``application/vnd.<family>.model.config.v1+json``) as pydantic models.

Strict types and ``extra="forbid"`` everywhere, so the model accepts and rejects exactly what
the model-spec JSON Schema does (checked against the spec's 27 test vectors).
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr
from pydantic import ValidationError as PydanticValidationError

from ocibridge.errors import ValidationError

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII,  # \d is 0-9 only
)


def is_rfc3339(value: str) -> bool:
    """Whether ``value`` is an RFC 3339 date-time (``createdAt``)."""
    return _RFC3339.match(value) is not None


def _rfc3339(value: str) -> str:
    if not is_rfc3339(value):
        raise ValueError("must be an RFC 3339 date-time such as 2025-01-01T00:00:00Z")
    return value


DateTime = Annotated[StrictStr, AfterValidator(_rfc3339)]
LanguageCode = Annotated[StrictStr, Field(pattern=r"^[a-z]{2}$")]


class Modality(str, Enum):
    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    EMBEDDING = "embedding"
    OTHER = "other"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=True)


class ModelCapabilities(_Strict):
    inputTypes: list[Modality] | None = None
    outputTypes: list[Modality] | None = None
    knowledgeCutoff: DateTime | None = None
    reasoning: StrictBool | None = None
    toolUsage: StrictBool | None = None
    reward: StrictBool | None = None
    languages: list[LanguageCode] | None = None


class ModelDescriptor(_Strict):
    createdAt: DateTime | None = None
    authors: list[StrictStr] | None = None
    family: StrictStr | None = None
    name: Annotated[StrictStr, Field(min_length=1)] | None = None
    docURL: StrictStr | None = None
    sourceURL: StrictStr | None = None
    datasetsURL: list[StrictStr] | None = None
    version: StrictStr | None = None
    revision: StrictStr | None = None
    vendor: StrictStr | None = None
    licenses: list[StrictStr] | None = None
    title: StrictStr | None = None
    description: StrictStr | None = None


class ModelConfig(_Strict):
    architecture: StrictStr | None = None
    format: StrictStr | None = None
    paramSize: StrictStr | None = None
    precision: StrictStr | None = None
    quantization: StrictStr | None = None
    capabilities: ModelCapabilities | None = None


class ModelFS(_Strict):
    type: Literal["layers"]
    diffIds: Annotated[list[StrictStr], Field(min_length=1)]


class ModelPackConfig(_Strict):
    """The whole config blob: descriptor, config and modelfs are all required."""

    descriptor: ModelDescriptor
    config: ModelConfig
    modelfs: ModelFS

    def to_json_bytes(self) -> bytes:
        data = self.model_dump(mode="json", exclude_none=True)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def parse_config(data: bytes | str | dict[str, Any]) -> ModelPackConfig:
    """Parse and validate a config; every violation named as ``field.path: rule``."""
    try:
        doc = json.loads(data) if isinstance(data, (bytes, str)) else data
    except ValueError as e:
        raise ValidationError([f"config is not valid JSON: {e}"]) from None
    try:
        return ModelPackConfig.model_validate(doc)
    except PydanticValidationError as e:
        raise ValidationError(
            [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        ) from None
