"""The options of the calls that write a model, as values grouped by concern instead of long
keyword lists (oras-go's ``CopyOptions``): how to reach registries (:class:`TransferOptions`),
what a push builds (:class:`PushOptions`), what a pull writes (:class:`PullOptions`), the
signature a push adds to what it wrote (:class:`SignOptions`) and the evidence a push, copy or convert attaches
(:class:`AttestOptions`). Shared by push, pull, copy and convert; loads no kind, no builder and
no signing code (``ocibridge copy`` imports this module)."""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ocibridge.core.overwrite import OnExisting
from ocibridge.transfer.defaults import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from ocibridge.model.builder import BuildOptions
    from ocibridge.oci.mediatypes import Kind
    from ocibridge.stores.registry.options import RegistryOptions


@dataclass(frozen=True)
class TransferOptions:
    """How to reach registries and how hard to push; passed to every store that is opened.
    ``chunk_size``: upload a blob in ``PATCH`` pieces of this many bytes (``--upload-part-size``);
    ``part_size``/``parts_in_flight``: ranged pulls."""

    concurrency: int = DEFAULT_CONCURRENCY
    plain_http: bool = False
    insecure: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = None
    chunk_size: int | None = None
    authfile: str | None = None  # read before the docker config and containers' auth.json
    part_size: int | None = None  # ranged pulls: bytes per part
    parts_in_flight: int | None = None  # ranged pulls: parts at once per blob
    limit_rate: int | None = None  # bytes per second over every transfer

    def registry_options(self) -> RegistryOptions:
        """What every registry store opened with these options is given (one typed value): every
        field but ``concurrency`` is a field of :class:`RegistryOptions` of the same name and meaning."""
        from ocibridge.stores.registry.options import RegistryOptions

        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "concurrency"}
        return RegistryOptions(**shared)


@dataclass(frozen=True)
class PushOptions:
    """What ``push`` builds from its source.

    ``format``: the source's format (default: by extension, else by content); ``to``: the model
    family to write (``modelkit``, ``docker-model``...; default ModelPack); ``name`` and
    ``overrides`` (``{"arch": "llama", "version": "2.0"}``) set descriptor/config fields;
    ``kind_overrides``: ``(glob, Kind)`` pairs; ``build``: layer variants, grouping, naming
    family, annotations, createdAt (:class:`ocibridge.BuildOptions`); ``build_file``: a
    Modelfile or Kitfile naming the files (else one at the top of a directory, unless
    ``use_build_file`` is False). ``chunks``: bind a chunk table of the raw files of
    ``chunk_threshold`` bytes or more (None: push's default, 64 MiB), in chunks of
    ``chunk_size`` bytes (None: the default), for verified lazy reads (docs/lazy.md), its chunk
    digests made with ``chunk_hash`` (None: BLAKE3; ``"sha256"``: the table older ocibridge
    releases wrote, which they can read lazily, and which hashes 3× slower).
    ``oms_signature``: an OpenSSF model signature of the source directory (``model_signing``'s
    ``model.sig``), checked to sign exactly the directory's files before a byte is sent, left
    out of the model's files, and attached to the pushed manifest. ``scan``: ``refuse`` a
    source the scanner flags before a byte is sent, ``quarantine`` it (stored, its flagged
    report attached), or ``off``; the report signed with ``scan_key`` (docs/scanning.md)."""

    format: str | None = None
    to: str | None = None
    name: str | None = None
    overrides: Mapping[str, str] = field(default_factory=dict)
    kind_overrides: tuple[tuple[str, Kind], ...] = ()
    excludes: tuple[str, ...] = ()
    build: BuildOptions | None = None
    build_file: str | None = None
    use_build_file: bool = True
    chunks: bool = True
    chunk_threshold: int | None = None
    chunk_size: int | None = None
    chunk_hash: str | None = None
    oms_signature: str | os.PathLike[str] | None = None
    scan: str = "off"
    scan_key: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class PullOptions:
    """What ``pull`` writes at its destination.

    ``format``: the destination's format (default: by extension, else a directory);
    ``include``/``exclude``: globs picking the files pulled into a directory (unselected raw
    layers are not fetched); ``on_existing``: a file already there with other content is refused
    (``"refuse"``, nothing written), replaced (``"overwrite"``) or kept (``"keep"``);
    ``with_signatures``: the artifact's OMS signature goes beside the files as ``model.sig``;
    ``with_attestations``: its attestations and evidence go under ``.ocibridge/attestations/``."""

    format: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    on_existing: OnExisting | str = OnExisting.REFUSE
    with_signatures: bool = False
    with_attestations: bool = False


@dataclass(frozen=True)
class SignOptions:
    """Who signs and what is signed beside the digest, for :func:`ocibridge.sign` and a push's
    ``sign=``: the private ``key`` file (ECDSA P-256 PEM, or a cosign key file), its ``password``
    (None: ``$COSIGN_PASSWORD``, as cosign reads it), the repository name written into the
    signature (``identity``, cosign's ``docker-reference``; None: where the artifact is), signed
    ``claims``, and the ``forms`` made: ``classic`` (cosign's ``.sig`` tag), ``bundle`` (a
    sigstore bundle referrer), ``oms`` (an OpenSSF model signature), or ``both``/``all``."""

    key: str | os.PathLike[str]
    password: str | bytes | None = None
    identity: str | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    forms: tuple[str, ...] = ("classic", "bundle")


@dataclass(frozen=True)
class AttestOptions:
    """The evidence a push, copy or convert attaches to the manifest it wrote, inside the same
    call: the model's AI-BOM (``sbom``, CycloneDX 1.6; needs ``ocibridge[evidence]``) and SLSA
    provenance v1 of the operation (``provenance``), signed as in-toto attestations with
    ``key`` (a private key file), else attached as plain referrers. ``sbom_time`` and
    ``provenance_time`` (RFC 3339) are written only when given, so the same inputs give the
    same documents; ``parameters``: the caller's settings that changed the result, recorded
    in the provenance (the command records its flags)."""

    sbom: bool = False
    provenance: bool = False
    key: str | os.PathLike[str] | None = None
    sbom_time: str | None = None
    provenance_time: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    #: the key file's (None: $OCIBRIDGE_ATTEST_PASSWORD, else $COSIGN_PASSWORD, so that the two keys of
    #: a push or a serve may have two passwords)
    password: str | bytes | None = None

    @property
    def wanted(self) -> bool:
        return self.sbom or self.provenance


#: push's keyword arguments before PushOptions (one release more, with a DeprecationWarning)
#: -> the field of PushOptions each sets
DEPRECATED_PUSH_KEYWORDS = {
    "build_options": "build", "format": "format", "kind_overrides": "kind_overrides", "excludes": "excludes",
    "name": "name", "to": "to", "overrides": "overrides", "build_file": "build_file",
    "use_build_file": "use_build_file", "chunks": "chunks", "chunk_threshold": "chunk_threshold",
    "chunk_size": "chunk_size",
}


#: pull's keyword arguments before PullOptions (one release more, with a DeprecationWarning)
DEPRECATED_PULL_KEYWORDS = {name: name for name in (
    "format", "include", "exclude", "on_existing", "with_signatures", "with_attestations")}

_Options = TypeVar("_Options", PushOptions, PullOptions)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning about the first frame outside ocibridge: the line of the
    caller's own code, however many of the package's wrappers (closing stores, explaining a 404)
    stand between it and the warning."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _with_old_keywords(call: str, options: _Options, table: Mapping[str, str],
                       keywords: Mapping[str, Any]) -> _Options:
    """``options`` with a call's old keyword arguments applied, each warned about by the field
    that replaces it; an unknown keyword is the TypeError Python raises for one."""
    unknown = sorted(set(keywords) - set(table))
    if unknown:
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
    changes: dict[str, Any] = {}
    for name, value in keywords.items():
        wanted = table[name]
        warnings.warn(f"{call}({name}=...) is deprecated: pass options={type(options).__name__}({wanted}=...)",
                      DeprecationWarning, stacklevel=caller_stacklevel())
        if name in ("kind_overrides", "excludes", "include", "exclude"):
            value = tuple(tuple(v) if name == "kind_overrides" else v for v in value)
        elif name == "overrides":
            value = dict(value or {})
        changes[wanted] = value
    return dataclasses.replace(options, **changes)


def push_options(options: PushOptions | None, keywords: Mapping[str, Any]) -> PushOptions:
    """``options`` with push's old keyword arguments applied (see :data:`DEPRECATED_PUSH_KEYWORDS`)."""
    return _with_old_keywords("push", options or PushOptions(), DEPRECATED_PUSH_KEYWORDS, keywords)


def pull_options(options: PullOptions | None, keywords: Mapping[str, Any]) -> PullOptions:
    """``options`` with pull's old keyword arguments applied (see :data:`DEPRECATED_PULL_KEYWORDS`)."""
    return _with_old_keywords("pull", options or PullOptions(), DEPRECATED_PULL_KEYWORDS, keywords)


def created_time(text: str) -> str:
    """A ``createdAt`` as ``push --created`` takes it: ``now`` (honouring
    ``SOURCE_DATE_EPOCH``) or an RFC 3339 date-time; ValueError otherwise."""
    from ocibridge.model.builder import created_now
    from ocibridge.model.config import is_rfc3339

    if text == "now":
        return created_now()
    if not is_rfc3339(text):
        raise ValueError(f"{text!r}: not an RFC 3339 date-time such as 2025-01-01T00:00:00Z")
    return text


def kind_overrides(items: list[str]) -> tuple[tuple[str, Kind], ...]:
    """``GLOB=KIND`` texts (``push --kind``) as the pairs :class:`PushOptions` takes; ValueError
    naming the first bad one."""
    from ocibridge.model.classify import parse_overrides

    return tuple(parse_overrides(items))
