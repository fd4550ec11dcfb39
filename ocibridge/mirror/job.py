"""The mirror job file: registries and their credentials, defaults, and sync entries.

One pydantic model, so the JSON Schema in ``schemas/mirror-job.schema.json`` is generated
from the same code that reads the file. Unknown keys are refused: a typo in a mirror job
should fail loudly, not silently mirror everything.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.mirror.joberrors import one_line
from ocibridge.mirror.jobfile import read_job_document
from ocibridge.mirror.jobsections import (
    Concurrency,
    RateLimit,
    RegistryAuth,
    RevisionFilter,
    Strict,
    TagFilter,
    VerifySettings,
)

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.stores.registry.options import RegistryOptions

FamilyName = Literal["cnai", "cncf", "modelkit", "docker-model", "any"]
ConvertTo = Literal["cnai", "cncf", "modelpack", "modelkit", "docker-model", "modelcar", "ollama"]


#: a Hub entry's chunk table keys, push's --no-chunks, --chunk-threshold and --chunk-hash
CHUNK_KEYS = ("no_chunks", "chunk_threshold", "chunk_hash")
#: keys added after the first jobs were written: unset, they leave a job's digest as it was
LATER_KEYS = (*CHUNK_KEYS, "scan", "scan_key", "xet")
#: the keys only an hf:// entry (or the defaults, for its entries) may give
HUB_ONLY_KEYS = (*CHUNK_KEYS, "xet")


def _chunks_of(no_chunks: bool | None, threshold: int | str | None, algorithm: str | None) -> ChunkChoice:
    """The keys checked as push checks its flags (chunks/choice.py), in the job's spelling."""
    from ocibridge.chunks.choice import JOB_KEYS, choose

    return choose(bool(no_chunks), threshold, algorithm, JOB_KEYS)


class Settings(Strict):
    """Settings an entry may override; missing ones come from the job's defaults."""

    referrers: bool | None = Field(default=None, description="Copy referrers (signatures, SBOMs). Default true.")
    accept: list[FamilyName] | None = Field(
        default=None, description="Model families to mirror (cnai, cncf: ModelPack; modelkit; docker-model); "
        "'any' accepts every artifact. Default cnai, cncf."
    )
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None
    convert: ConvertTo | None = Field(
        default=None, description="Re-label ModelPack artifacts into this family (cnai, cncf) or convert "
        "every model into another family (modelpack, modelkit, docker-model, modelcar, ollama) while mirroring."
    )
    verify: VerifySettings | None = Field(
        default=None, description="Only mirror artifacts whose signature verifies (cosign .sig or sigstore bundle)."
    )
    provenance: bool | None = Field(
        default=None, description="Attach SLSA provenance v1 (build type https://ocibridge.dev/slsa/mirror/v1) to "
        "each manifest written: what was mirrored from where, the source manifest by digest. Default false."
    )
    attest_key: str | None = Field(
        default=None, description="Sign the provenance as an in-toto attestation with this private key (relative "
        "to the job); else it is attached unsigned."
    )
    scan: Literal["off", "refuse", "quarantine"] | None = Field(
        default=None, description="Scan each artifact copied (push --scan) before its tag is written: 'refuse' "
        "leaves a flagged one untagged (the run fails naming the file, the finding and the scanner); 'quarantine' "
        "tags it with its flagged report. Every report is attached as a referrer. 'off' (an entry's): none. Needs "
        "ocibridge[scan]."
    )
    scan_key: str | None = Field(
        default=None, description="Sign the scan reports with this private key (relative to the job), as push "
        "--scan-key; else they are attached unsigned."
    )
    endpoint: str | None = Field(
        default=None, description="hf:// sources: the Hub endpoint (default $HF_ENDPOINT, else https://huggingface.co)."
    )
    token_env: str | None = Field(
        default=None, description="hf:// sources: environment variable holding the Hub token (default: "
        "huggingface_hub's own, $HF_TOKEN or the stored login)."
    )
    token_file: str | None = Field(
        default=None, description="hf:// sources: file holding the Hub token (relative to the job)."
    )
    no_chunks: bool | None = Field(
        default=None, description="hf:// sources: bind no chunk table (push --no-chunks). Default false."
    )
    chunk_threshold: int | str | None = Field(
        default=None, description="hf:// sources: files from this size get a chunk table (push --chunk-threshold): "
        "bytes, or '16M', '1G'. Default 64M."
    )
    chunk_hash: Literal["blake3", "sha256"] | None = Field(
        default=None, description="hf:// sources: the hash of the chunk table's digests (push --chunk-hash). "
        "Default blake3."
    )
    xet: bool | None = Field(
        default=None, description="hf:// sources: download the files the endpoint keeps in Xet with hf_xet "
        "(parallel, as huggingface_hub does by default). hf_xet's fetches from the Xet CAS are then OUTSIDE the "
        "address rule: a hostile endpoint or CAS can make the job connect to any address. Default false: every "
        "file through the endpoint's resolve, each connection under the rule. HF_HUB_DISABLE_XET=1 keeps it off."
    )

    @field_validator("chunk_threshold")
    @classmethod
    def _a_size(cls, value: int | str | None) -> int | str | None:
        from ocibridge.core.terminal import parse_bytes

        if isinstance(value, str):
            parse_bytes(value)  # its ValueError reads as push's --chunk-threshold line, at this key
        elif isinstance(value, int) and value < 1:
            raise ValueError(f"{value} is under one byte")
        return value

    @model_validator(mode="after")
    def _one_token(self) -> Settings:
        if self.token_env and self.token_file:
            raise ValueError("give only one of token_env, token_file")
        if self.no_chunks:  # a threshold or a hash beside it, in one table
            try:
                _chunks_of(self.no_chunks, self.chunk_threshold, self.chunk_hash)
            except UsageError as e:
                raise ValueError(str(e)) from None
        if self.endpoint is not None and not self.endpoint.startswith(("https://", "http://")):
            raise ValueError(f"endpoint {self.endpoint!r}: an http:// or https:// URL")
        return self


class SyncEntry(Settings):
    """One source → target pair.

    ``source``: a repository (every tag, filtered by ``tags``) or a single reference (``:tag`` or
    ``@digest``); registries as ``host/repo``, layouts as ``oci:PATH``, Ollama models as
    ``ollama:NAME`` (the local store) or ``ollama://[host/]NAME`` (a registry). ``target``: a
    repository (tags keep their names) or, for a single source reference, ``repo:tag``.
    """

    source: str
    target: str
    tags: TagFilter = Field(default_factory=TagFilter)
    source_format: Literal["oci", "ollama"] = Field(
        default="oci",
        description="'ollama': the host/repo source is an Ollama registry; its models become ModelPack. "
        "Implied by ollama: and ollama:// sources.",
    )
    revisions: RevisionFilter | None = Field(
        default=None, description="hf:// sources: which branches, tags and commits (default: main)."
    )
    include: list[str] = Field(
        default_factory=list, description="hf:// sources: only files whose path matches one of these globs."
    )
    exclude: list[str] = Field(
        default_factory=list, description="hf:// sources: leave out files whose path matches one of these globs."
    )

    @property
    def from_hub(self) -> bool:
        """Whether the source is a repository on a Hub endpoint (``hf://ORG/NAME``)."""
        return self.source.startswith("hf://")

    @model_validator(mode="after")
    def _hub_keys(self) -> SyncEntry:
        if self.target.startswith("hf:"):
            raise ValueError(f"target {self.target!r}: a Hub repository is a mirror source only (the target is a "
                             "registry repository or oci:PATH)")
        if self.from_hub:
            for name, unset in (("tags", self.tags == TagFilter()), ("source_format", self.source_format == "oci"),
                                ("convert", self.convert is None), ("verify", self.verify is None)):
                if not unset:
                    hint = " (revisions selects what a Hub repository mirrors)" if name == "tags" else ""
                    raise ValueError(f"{name}: not for hf:// sources{hint}")
        else:
            for name, given in (("revisions", self.revisions is not None), ("include", self.include),
                                ("exclude", self.exclude)) + tuple((key, getattr(self, key) is not None)
                                                                   for key in HUB_ONLY_KEYS):
                if given:
                    raise ValueError(f"{name}: only for hf:// sources")
        return self


class MirrorJob(Strict):
    """A declarative mirror job (TOML, YAML or JSON)."""

    # (this docstring is the JSON Schema's description.) Read from a file with from_file, or built
    # in Python: MirrorJob(sync=[SyncEntry(source=..., target=...)]), relative paths then relative
    # to the working directory.

    version: Literal[1] = 1
    registries: dict[str, RegistryAuth] = Field(
        default_factory=dict, description="Per registry host (host[:port]): credentials and transport."
    )
    defaults: Settings = Field(default_factory=Settings)
    sync: list[SyncEntry] = Field(min_length=1)

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("registries")
    @classmethod
    def _hosts(cls, registries: dict[str, RegistryAuth]) -> dict[str, RegistryAuth]:
        """A key is looked up by an entry's host alone: a URL or a path in it matches none, and
        its credentials would silently never be used."""
        for key in registries:
            if "/" in key:
                meant = key.split("://", 1)[-1].split("/", 1)[0]
                raise ValueError(f"{key!r}: a registry is written HOST[:PORT], without a scheme or a path: {meant!r}")
        return registries

    @model_validator(mode="after")
    def _key_with_provenance(self) -> MirrorJob:
        for i, entry in enumerate(self.sync):
            if entry.from_hub:  # the entry's threshold or hash beside no_chunks = true in the defaults
                try:
                    self.chunks(entry)
                except UsageError as e:
                    raise ValueError(f"sync.{i} ({entry.source}): {e} (true in defaults: write no_chunks = false "
                                     "in the entry)") from None
            key = entry.attest_key if entry.attest_key is not None else self.defaults.attest_key
            wanted = entry.provenance if entry.provenance is not None else self.defaults.provenance
            if key and not wanted:
                raise ValueError(f"{entry.source}: attest_key signs the provenance: it goes with provenance = true")
            scan = entry.scan if entry.scan is not None else self.defaults.scan
            if (entry.scan_key or self.defaults.scan_key) and scan in (None, "off"):
                raise ValueError(f"{entry.source}: scan_key signs the scan reports: it goes with scan = \"refuse\" "
                                 "or \"quarantine\"")
        return self
    _policy_file: str | None = PrivateAttr(default=None)
    #: What one call of a run gives every client it opens (its own byte budget, its
    #: User-Agent): carried by the job the call runs, never set on the process.
    _call_transport: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MirrorJob:
        """The job a file holds (see :func:`load_job`)."""
        return load_job(path)

    @classmethod
    def from_dict(cls, data: object, base_dir: str | Path | None = None) -> MirrorJob:
        """The job a document holds (a job file's content as read); its relative paths are
        relative to ``base_dir`` (default: the working directory)."""
        return parse_job(data, Path(base_dir) if base_dir is not None else None)

    @property
    def policy_file(self) -> str | None:
        """The containers policy file every artifact is checked against (``--policy``); None:
        the one found (docs/signing.md)."""
        return self._policy_file

    def for_call(self, *, policy: str | None = None, transport: dict[str, Any] | None = None) -> MirrorJob:
        """A copy of this job for one call: checked against the containers policy file
        ``policy``, its registry clients opened with the ``transport`` fields of
        :class:`RegistryOptions` (``rate_budget``, ``user_agent``). The caller's job is left as
        it was, so two calls of one job in threads each keep their own."""
        copied = self.model_copy()
        copied._policy_file = policy if policy is not None else self._policy_file
        copied._call_transport = {**self._call_transport, **(transport or {})}
        return copied

    @property
    def base_dir(self) -> Path:
        """Relative paths in the job (layouts, password and CA files) are relative to this."""
        return self._base_dir

    def digest(self) -> str:
        """sha256 of the job's settings as read (not of the file's bytes): shard reports carry it,
        so reports of two different jobs are never merged as one. Passwords written in the job are
        left out: a report must not let anyone test guesses of them."""
        data = self.model_dump(mode="json")
        for table in (data["defaults"], *data["sync"]):  # keys added later: a job without them keeps its digest
            for key in LATER_KEYS:
                if table.get(key) is None:
                    table.pop(key, None)
        for auth in data["registries"].values():
            auth.pop("password", None)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def with_base_dir(self, base: Path) -> MirrorJob:
        self._base_dir = base
        return self

    def effective(self, entry: SyncEntry) -> ResolvedSettings:
        """The entry's settings with the job defaults filled in."""
        d = self.defaults

        def pick(name: str, fallback: Any) -> Any:
            value = getattr(entry, name)
            if value is None:
                value = getattr(d, name)
            return fallback if value is None else value

        return ResolvedSettings(
            referrers=pick("referrers", True),
            accept=tuple(pick("accept", ["cnai", "cncf"])),
            concurrency=pick("concurrency", Concurrency()),
            rate_limit=pick("rate_limit", None),
            convert=pick("convert", None),
            verify=pick("verify", None),
            provenance=pick("provenance", False),
            attest_key=str(self._path(key)) if (key := pick("attest_key", None)) else None,
            scan=None if (mode := pick("scan", None)) == "off" else mode,
            scan_key=str(self._path(skey)) if (skey := pick("scan_key", None)) else None,
        )

    def chunks(self, entry: SyncEntry) -> ChunkChoice:
        """The chunk table an ``hf://`` entry's revisions bind, as push's flags would say it: each
        key the entry's own, else the defaults', else push's default; an entry's ``no_chunks =
        true`` leaves the defaults' threshold and hash aside (they are not the entry's)."""
        if entry.no_chunks:
            return _chunks_of(True, entry.chunk_threshold, entry.chunk_hash)
        d = self.defaults
        return _chunks_of(*(getattr(entry, key) if getattr(entry, key) is not None else getattr(d, key)
                            for key in CHUNK_KEYS))

    def hub_xet(self, entry: SyncEntry) -> bool:
        """Whether an ``hf://`` entry's downloads may use hf_xet: its ``xet``, else the defaults'; off
        unless one says true (see :mod:`ocibridge.kinds.hf.checkedhub`)."""
        return bool(entry.xet if entry.xet is not None else self.defaults.xet)

    def registry_options(self, host: str) -> RegistryOptions:
        """How to reach ``host`` (``open_repository``'s options); secrets read now."""
        from ocibridge.stores.registry.options import RegistryOptions

        auth = self.registries.get(host)
        if auth is None:
            return RegistryOptions.of(self._call_transport)
        return RegistryOptions(
            plain_http=auth.plain_http, insecure=auth.insecure,
            ca_file=str(self._path(auth.ca_file)) if auth.ca_file else None,
            username=auth.username or None,
            password=self._password(host, auth) if auth.username else None).updated(self._call_transport)

    def hub_endpoint(self, entry: SyncEntry) -> str:
        """The Hub endpoint of an ``hf://`` entry: its own, the job's default, ``$HF_ENDPOINT``,
        else the Hugging Face Hub; without a trailing slash."""
        url = entry.endpoint or self.defaults.endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        return url.rstrip("/")

    def hub_token(self, entry: SyncEntry) -> str | None:
        """The token of an ``hf://`` entry (read now), or None: huggingface_hub finds its own
        (``$HF_TOKEN``, the token ``hf auth login`` stored)."""
        env = entry.token_env or (None if entry.token_file else self.defaults.token_env)
        file = entry.token_file or (None if entry.token_env else self.defaults.token_file)
        if env:
            value = os.environ.get(env)
            if value is None:
                raise OcibridgeError(f"{entry.source}: environment variable {env} (token_env) is not set")
            return value.strip()
        if file:
            path = self._path(file)
            try:
                return path.read_text().strip()
            except OSError as e:
                raise OcibridgeError(f"{entry.source}: cannot read token_file {path}: {e.strerror}") from None
        return None

    def verify_policy(self, settings: ResolvedSettings) -> Any:
        """The entry's :class:`ocibridge.signing.VerifyPolicy` (key files read now), or None."""
        v = settings.verify
        if v is None:
            return None
        from ocibridge.signing import VerifyPolicy

        return VerifyPolicy.from_files(
            [str(self._path(k)) for k in v.keys], identity=v.certificate_identity,
            issuer=v.certificate_oidc_issuer, trusted_root=str(self._path(v.trusted_root)) if v.trusted_root else None,
            claims=v.annotations)

    def _path(self, value: str) -> Path:
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else self._base_dir / path

    def _password(self, host: str, auth: RegistryAuth) -> str:
        if auth.password_env:
            value = os.environ.get(auth.password_env)
            if value is None:
                raise OcibridgeError(f"registry {host}: environment variable {auth.password_env} is not set")
            return value
        if auth.password_file:
            path = self._path(auth.password_file)
            from ocibridge.core.limits import MAX_SMALL_INPUT
            from ocibridge.core.smallfile import read_small

            try:  # named by the job: a FIFO is allowed, but never read past the cap
                data = read_small(path, MAX_SMALL_INPUT, f"registry {host}: password_file", named=True)
                return data.decode("utf-8").rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as e:
                raise OcibridgeError(f"registry {host}: cannot read password_file {path}: {e}") from None
        return auth.password or ""


class ResolvedSettings(BaseModel):
    referrers: bool
    accept: tuple[str, ...]
    concurrency: Concurrency
    rate_limit: RateLimit | None
    convert: str | None
    verify: VerifySettings | None = None
    provenance: bool = False
    attest_key: str | None = None  # a path, relative to the job's folder resolved
    scan: str | None = None  # refuse or quarantine: each copy scanned before its tag
    scan_key: str | None = None  # a path, as attest_key


def parse_job(data: object, base_dir: Path | None = None, where: str = "mirror job") -> MirrorJob:
    """Validate a job document; the first problem becomes one line naming its location."""
    if not isinstance(data, dict):
        raise OcibridgeError(f"{where}: expected a table of settings at the top")
    try:
        job = MirrorJob.model_validate(data)
    except PydanticValidationError as e:
        raise OcibridgeError(one_line(e, where, MirrorJob)) from None
    return job.with_base_dir(base_dir or Path.cwd())


def load_job(path: str | os.PathLike[str]) -> MirrorJob:
    """Read a job file: TOML (``.toml``, the default), YAML (``.yaml``/``.yml``) or JSON."""
    if not os.fspath(path).strip():  # Path("") is the current directory: "mirror job .: Is a directory"
        raise UsageError("an empty JOB (an unset shell variable?)")
    path = Path(path)
    return parse_job(read_job_document(path), path.resolve().parent, str(path))
