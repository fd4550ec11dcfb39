"""Wire models of the OCI image spec: descriptor, manifest, index, image config.

Plain dataclasses checked field by field as they are read: no pydantic, which cost every
registry command ~0.08 s of start-up (the copy within a registry is mostly start-up). They are
also the one description of the wire documents: ``schemas/oci-*.schema.json`` are generated from
them (pydantic's ``TypeAdapter`` reads a dataclass: ``ocibridge.api.schemas``, which alone
imports pydantic), so each field says here what its schema says (an alias, a bound), and
tests/kinds/test_oci_models.py holds the reading to those schemas: what these accept, the schema does.

Unknown fields are kept (``model_extra``) so that a manifest read and written again loses
nothing; serialisation is canonical (no whitespace, keys in field order then the unknown ones,
None dropped) so that builds are byte-reproducible. The method names are pydantic's
(``model_validate``, ``model_dump``, ``model_copy``), so callers read as before.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from ocibridge.core import boundedjson
from ocibridge.core.canonjson import canonical_bytes
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import check_digest, sha256_bytes
from ocibridge.oci.mediatypes import INDEX_TYPES, MANIFEST_TYPES, OCI_INDEX, OCI_MANIFEST

_W = TypeVar("_W", bound="_Wire")
_V = TypeVar("_V")
_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}  # per model: (attribute, JSON key) of each field


class WireError(OcibridgeError, ValueError):
    """A document without the shape of the model; says where (dotted path) and what.

    A ValueError too, as pydantic's errors were: callers that caught those still do."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}" if where else message)
        self.where, self.message = where, message


# -- reading one value ---------------------------------------------------------------------------
def _at(where: str, key: str | int) -> str:
    return f"{where}.{key}" if where else str(key)


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise WireError(where, "Input should be a valid string")
    return value


def _int(value: object, where: str) -> int:
    """A JSON integer (not a bool, a float or a numeral in a string: stricter than pydantic)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError(where, "Input should be a valid integer")
    return value


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise WireError(where, "Input should be a valid dictionary")
    return dict(value)


def _list(value: object, where: str, item: Callable[[object, str], _V]) -> list[_V]:
    if not isinstance(value, list):
        raise WireError(where, "Input should be a valid list")
    return [item(v, _at(where, i)) for i, v in enumerate(value)]


def _str_map(value: object, where: str) -> dict[str, str]:
    return {k: _str(v, _at(where, k)) for k, v in _dict(value, where).items()}


def _optional(value: object, where: str, read: Callable[[object, str], _V]) -> _V | None:
    return None if value is None else read(value, where)


class _Fields:
    """The keys of one JSON object as a model reads them; what is left over is kept as extra."""

    def __init__(self, doc: object, where: str):
        self.doc = _dict(doc, where)
        self.where = where

    def required(self, key: str, read: Callable[[object, str], _V]) -> _V:
        if key not in self.doc:
            raise WireError(_at(self.where, key), "Field required")
        return read(self.doc.pop(key), _at(self.where, key))

    def optional(self, key: str, read: Callable[[object, str], _V]) -> _V | None:
        return _optional(self.doc.pop(key, None), _at(self.where, key), read)

    def default(self, key: str, read: Callable[[object, str], _V], default: _V) -> _V:
        """A field with a default: absent gives the default, null is refused (as pydantic)."""
        if key not in self.doc:
            return default
        return read(self.doc.pop(key), _at(self.where, key))

    def extra(self) -> dict[str, Any]:
        return self.doc


# -- the base --------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class _Wire:
    """Fields in wire order; ``model_extra`` holds the fields this model does not name."""

    #: read by pydantic only when the JSON Schemas are generated (a plain dict: nothing imported);
    #: unknown fields are allowed, as ``model_extra`` keeps them (that field is left out of the schema)
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "allow"}

    model_extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def _read(cls: type[_W], doc: object, where: str) -> _W:  # pragma: no cover - each model has one
        raise NotImplementedError

    @classmethod
    def model_validate(cls: type[_W], obj: object) -> _W:
        """``obj`` (a decoded JSON object) read as this model; WireError says where it is wrong."""
        if isinstance(obj, cls):
            return obj
        return cls._read(obj, "")

    @classmethod
    def model_validate_json(cls: type[_W], data: str | bytes) -> _W:
        try:
            doc = boundedjson.loads(data)
        except ValueError as e:
            raise WireError("", f"Invalid JSON: {e}") from None
        return cls.model_validate(doc)

    @classmethod
    def _wire_keys(cls) -> tuple[tuple[str, str], ...]:
        """(attribute, JSON key) of each declared field, in order."""
        keys = _KEYS.get(cls)
        if keys is None:
            keys = _KEYS[cls] = tuple((f.name, f.metadata.get("alias", f.name))
                                      for f in fields(cls) if f.name != "model_extra")
        return keys

    def model_dump(self, *, mode: str = "python", by_alias: bool = False, exclude_none: bool = False) -> dict[str, Any]:
        """The fields in order, then the extra ones; nested models as dicts. ``mode`` is
        accepted for pydantic's callers: every value here is JSON already."""
        out: dict[str, Any] = {}
        for name, alias in self._wire_keys():
            value = getattr(self, name)
            if value is None and exclude_none:
                continue
            out[alias if by_alias else name] = _dump(value, by_alias, exclude_none)
        for key, value in self.model_extra.items():
            if value is None and exclude_none:
                continue
            out[key] = _dump(value, by_alias, exclude_none)
        return out

    def model_copy(self: _W, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> _W:
        """A copy with ``update`` applied (unchecked, as pydantic's); unknown names go to extra."""
        new = _copy.deepcopy(self) if deep else _copy.copy(self)
        new.model_extra = dict(new.model_extra)
        names = {name for name, _ in self._wire_keys()}
        for key, value in (update or {}).items():
            if key in names:
                setattr(new, key, value)
            else:
                new.model_extra[key] = value
        return new

    def to_json_bytes(self) -> bytes:
        """Canonical JSON: compact, None omitted; what digests are computed over."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return canonical_bytes(data)


def _dump(value: object, by_alias: bool, exclude_none: bool) -> Any:
    if isinstance(value, _Wire):
        return value.model_dump(by_alias=by_alias, exclude_none=exclude_none)
    if isinstance(value, list):
        return [_dump(v, by_alias, exclude_none) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, by_alias, exclude_none) for k, v in value.items()}
    return value


# -- the models ------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Platform(_Wire):
    architecture: str
    os: str
    os_version: str | None = field(default=None, metadata={"alias": "os.version"})
    variant: str | None = None

    @classmethod
    def _read(cls, doc: object, where: str) -> Platform:
        f = _Fields(doc, where)
        architecture, os_ = f.required("architecture", _str), f.required("os", _str)
        # the JSON name, else the attribute's (pydantic's populate_by_name)
        version = f.optional("os.version", _str) if "os.version" in f.doc else f.optional("os_version", _str)
        return cls(architecture=architecture, os=os_, os_version=version,
                   variant=f.optional("variant", _str), model_extra=f.extra())


@dataclass(kw_only=True)
class Descriptor(_Wire):
    mediaType: str
    digest: str
    size: int = field(metadata={"ge": 0})  # field metadata is what the schema says (pydantic's Field)
    urls: list[str] | None = None
    annotations: dict[str, str] | None = None
    artifactType: str | None = None
    platform: Platform | None = None

    def __post_init__(self) -> None:
        check_digest(self.digest)
        if _int(self.size, "size") < 0:
            raise WireError("size", "Input should be greater than or equal to 0")

    @classmethod
    def _read(cls, doc: object, where: str) -> Descriptor:
        f = _Fields(doc, where)
        media_type, digest = f.required("mediaType", _str), f.required("digest", _str)
        size = f.required("size", _int)
        if size < 0:
            raise WireError(_at(where, "size"), "Input should be greater than or equal to 0")
        return cls(mediaType=media_type, digest=digest, size=size,
                   urls=f.optional("urls", lambda v, w: _list(v, w, _str)),
                   annotations=f.optional("annotations", _str_map),
                   artifactType=f.optional("artifactType", _str),
                   platform=f.optional("platform", Platform._read), model_extra=f.extra())

    @classmethod
    def for_bytes(cls, media_type: str, data: bytes, **kw: Any) -> Descriptor:
        return cls(mediaType=media_type, digest=sha256_bytes(data), size=len(data), **kw)

    def short(self) -> str:
        return f"{self.mediaType} {self.digest} ({self.size} bytes)"


def _descriptors(value: object, where: str) -> list[Descriptor]:
    return _list(value, where, Descriptor._read)


@dataclass(kw_only=True)
class Manifest(_Wire):
    schemaVersion: int = 2
    mediaType: str | None = OCI_MANIFEST
    artifactType: str | None = None
    config: Descriptor
    layers: list[Descriptor] = field(default_factory=list)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None

    @classmethod
    def _read(cls, doc: object, where: str) -> Manifest:
        f = _Fields(doc, where)
        return cls(**_envelope(f, OCI_MANIFEST), config=f.required("config", Descriptor._read),
                   layers=f.default("layers", _descriptors, []), model_extra=f.extra())


@dataclass(kw_only=True)
class Index(_Wire):
    schemaVersion: int = 2
    mediaType: str | None = OCI_INDEX
    artifactType: str | None = None
    manifests: list[Descriptor] = field(default_factory=list)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None

    @classmethod
    def _read(cls, doc: object, where: str) -> Index:
        f = _Fields(doc, where)
        return cls(**_envelope(f, OCI_INDEX), manifests=f.default("manifests", _descriptors, []),
                   model_extra=f.extra())


def _envelope(f: _Fields, media_type: str) -> dict[str, Any]:
    """The fields a manifest and an index share, read alike (``media_type`` when it is absent;
    an explicit null stays null). Read before the caller's own, so ``f.extra()`` comes last."""
    return {"schemaVersion": f.default("schemaVersion", _int, 2),
            "mediaType": f.optional("mediaType", _str) if "mediaType" in f.doc else media_type,
            "artifactType": f.optional("artifactType", _str),
            "subject": f.optional("subject", Descriptor._read),
            "annotations": f.optional("annotations", _str_map)}


@dataclass(kw_only=True)
class RootFS(_Wire):
    type: str = "layers"
    diff_ids: list[str] = field(default_factory=list)

    @classmethod
    def _read(cls, doc: object, where: str) -> RootFS:
        f = _Fields(doc, where)
        return cls(type=f.default("type", _str, "layers"),
                   diff_ids=f.default("diff_ids", lambda v, w: _list(v, w, _str), []), model_extra=f.extra())


@dataclass(kw_only=True)
class ImageConfig(_Wire):
    """An OCI/Docker image config, as containerd needs for a mountable image."""

    created: str | None = None
    architecture: str = "amd64"
    os: str = "linux"
    config: dict[str, Any] | None = None
    rootfs: RootFS = field(default_factory=RootFS)
    history: list[dict[str, Any]] | None = None

    @classmethod
    def _read(cls, doc: object, where: str) -> ImageConfig:
        f = _Fields(doc, where)
        return cls(created=f.optional("created", _str),
                   architecture=f.default("architecture", _str, "amd64"),
                   os=f.default("os", _str, "linux"),
                   config=f.optional("config", _dict),
                   rootfs=f.default("rootfs", RootFS._read, RootFS()),
                   history=f.optional("history", lambda v, w: _list(v, w, _dict)), model_extra=f.extra())


@dataclass(frozen=True)
class ManifestRead:
    """A manifest as one read found it: its descriptor, its bytes (checked against the digest)
    and their parse, handed down so that no later step reads or parses it again."""

    desc: Descriptor
    data: bytes
    manifest: Manifest


def parse_manifest_bytes(data: bytes, media_type: str | None = None) -> Manifest | Index:
    """Parse a manifest or index, by its declared media type or by its shape."""
    try:
        doc = boundedjson.loads(data)
    except ValueError as e:
        raise OcibridgeError(f"manifest is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise OcibridgeError("manifest is not a JSON object")
    mt = doc.get("mediaType") or media_type
    try:
        if mt in INDEX_TYPES or (mt not in MANIFEST_TYPES and "manifests" in doc):
            return Index.model_validate(doc)
        return Manifest.model_validate(doc)
    except WireError as e:
        raise OcibridgeError(f"malformed manifest: {e.where}: {e.message}") from None
