"""The ModelPack config (``application/vnd.<family>.model.config.v1+json``) as pydantic models.

Strict types, ``extra="forbid"``, no ``null`` and real dates everywhere, so the model accepts
and rejects exactly what the model-spec JSON Schema does (checked against the spec's 27 test
vectors, and against the schema itself with a JSON Schema validator: tests/code/test_config_schema.py).
"""

from __future__ import annotations

import datetime
import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic.json_schema import SkipJsonSchema

from ocibridge.core import boundedjson
from ocibridge.core.canonjson import canonical_bytes
from ocibridge.errors import ValidationError

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII,  # \d is 0-9 only
)


def is_rfc3339(value: str) -> bool:
    """Whether ``value`` is an RFC 3339 date-time (``createdAt``): its shape and a moment that
    exists (JSON Schema's ``date-time`` format: no month 13, hour 25, minute 61 nor 30 February;
    a leap second, ``:60``, is allowed as RFC 3339 allows it)."""
    if _RFC3339.match(value) is None:
        return False
    year, month, day = int(value[0:4]), int(value[5:7]), int(value[8:10])
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset = value[19:].lstrip(".0123456789")
    if offset[:1] in ("+", "-"):
        return int(offset[1:3]) <= 23 and int(offset[4:6]) <= 59
    return True


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
    """Every field optional is left out when absent; ``null`` is no value the schema allows
    (each field is a string, an array, a boolean or an object there, never ``null``)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("null is not allowed (leave the field out)")
        return value


class ModelCapabilities(_Strict):
    inputTypes: list[Modality] | SkipJsonSchema[None] = None
    outputTypes: list[Modality] | SkipJsonSchema[None] = None
    knowledgeCutoff: DateTime | SkipJsonSchema[None] = None
    reasoning: StrictBool | SkipJsonSchema[None] = None
    toolUsage: StrictBool | SkipJsonSchema[None] = None
    reward: StrictBool | SkipJsonSchema[None] = None
    languages: list[LanguageCode] | SkipJsonSchema[None] = None


class ModelDescriptor(_Strict):
    createdAt: DateTime | SkipJsonSchema[None] = None
    authors: list[StrictStr] | SkipJsonSchema[None] = None
    family: StrictStr | SkipJsonSchema[None] = None
    name: Annotated[StrictStr, Field(min_length=1)] | SkipJsonSchema[None] = None
    docURL: StrictStr | SkipJsonSchema[None] = None
    sourceURL: StrictStr | SkipJsonSchema[None] = None
    datasetsURL: list[StrictStr] | SkipJsonSchema[None] = None
    version: StrictStr | SkipJsonSchema[None] = None
    revision: StrictStr | SkipJsonSchema[None] = None
    vendor: StrictStr | SkipJsonSchema[None] = None
    licenses: list[StrictStr] | SkipJsonSchema[None] = None
    title: StrictStr | SkipJsonSchema[None] = None
    description: StrictStr | SkipJsonSchema[None] = None


class ModelConfig(_Strict):
    architecture: StrictStr | SkipJsonSchema[None] = None
    format: StrictStr | SkipJsonSchema[None] = None
    paramSize: StrictStr | SkipJsonSchema[None] = None
    precision: StrictStr | SkipJsonSchema[None] = None
    quantization: StrictStr | SkipJsonSchema[None] = None
    capabilities: ModelCapabilities | SkipJsonSchema[None] = None


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
        return canonical_bytes(data)


def parse_config(data: bytes | str | dict[str, Any]) -> ModelPackConfig:
    """Parse and validate a config; every violation named as ``field.path: rule``."""
    try:
        doc = boundedjson.loads(data) if isinstance(data, (bytes, str)) else data
    except ValueError as e:
        raise ValidationError([f"config is not valid JSON: {e}"]) from None
    try:
        return ModelPackConfig.model_validate(doc)
    except PydanticValidationError as e:
        raise ValidationError([f"{_where(err['loc'])}: {err['msg']}" for err in e.errors()
                               if err["type"] != "none_required"]) from None  # the absent branch of a field


def _where(loc: tuple[int | str, ...]) -> str:
    """A field's path as the document names it, without the union branches pydantic adds
    (``function-after[...]``, a model's class name)."""
    return ".".join(str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p in _CLASSES)))


_CLASSES = {"ModelCapabilities", "ModelDescriptor", "ModelConfig", "ModelFS"}
