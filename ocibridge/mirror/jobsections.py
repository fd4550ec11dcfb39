"""The sections of a mirror job a registry or an entry holds: credentials, concurrency, the rate
limit, which tags and revisions, and the signatures required."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    # strict: a string is never read as a number or a boolean ("4" as 4, "no" as false), so a
    # job runs the way it reads; TOML, YAML and JSON have their own numbers and booleans
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class RegistryAuth(Strict):
    """How to reach one registry host. No username: the Docker config's credentials."""

    username: str | None = None
    password: str | None = Field(default=None, description="Prefer password_env or password_file.")
    password_env: str | None = Field(default=None, description="Environment variable holding the password.")
    password_file: str | None = Field(default=None, description="File holding the password (relative to the job).")
    plain_http: bool = False
    insecure: bool = Field(default=False, description="Skip TLS certificate verification.")
    ca_file: str | None = Field(default=None, description="PEM bundle of the CA (relative to the job).")

    @model_validator(mode="after")
    def _one_password(self) -> RegistryAuth:
        given = [n for n in ("password", "password_env", "password_file") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"give only one of {', '.join(given)}")
        if given and not self.username:
            raise ValueError(f"{given[0]} needs a username")
        return self


class Concurrency(Strict):
    artifacts: int = Field(default=2, ge=1, le=64, description="Artifacts copied at once.")
    blobs: int = Field(default=4, ge=1, le=64, description="Blobs of one artifact copied at once.")


class RateLimit(Strict):
    """A token bucket in front of the source registry's HTTP requests."""

    requests_per_second: float = Field(gt=0, description="Sustained requests per second to the source.")
    burst: int = Field(default=10, ge=1, description="Requests allowed at once after a quiet spell.")


class TagFilter(Strict):
    """Which tags of a repository to mirror; applied in this order: allow, deny, semver, latest."""

    allow: list[str] = Field(
        default_factory=list,
        description="Globs (fnmatch) or, prefixed 're:', regular expressions; none = every tag.",
    )
    deny: list[str] = Field(default_factory=list, description="Same forms as allow; deny wins.")
    semver: str | None = Field(
        default=None, description="A range such as '>=1.2.0 <2', '^1.2', '~1.2.3', '1.x' ('||' for or)."
    )
    latest: int | None = Field(default=None, ge=1, description="Keep only the newest N tags.")
    prereleases: bool = Field(
        default=False,
        description="Let 'latest' count pre-releases (1.0.0-rc.1); by default only releases are the newest.",
    )
    order: Literal["semver", "tag"] = Field(
        default="semver",
        description="How 'latest' ranks tags: by version (non-version tags drop out) or by tag name.",
    )


class VerifySettings(Strict):
    """Refuse artifacts unless a signature verifies (checked before anything is copied)."""

    keys: list[str] = Field(
        default_factory=list, description="PEM public keys (relative to the job); a signature by any one passes."
    )
    certificate_identity: str | None = Field(default=None, description="Keyless bundles: the signer's identity.")
    certificate_oidc_issuer: str | None = Field(default=None, description="Keyless bundles: the OIDC issuer.")
    trusted_root: str | None = Field(
        default=None, description="Keyless bundles: sigstore trusted_root.json (relative to the job), offline."
    )
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Claims every accepted signature must carry."
    )

    @model_validator(mode="after")
    def _something(self) -> VerifySettings:
        if not self.keys and not self.certificate_identity:
            raise ValueError("verify needs keys or a certificate_identity")
        return self


class RevisionFilter(Strict):
    """Which revisions of a Hub repository (``hf://`` sources) to mirror: branches, tags and
    commit ids, by name."""

    allow: list[str] = Field(
        default_factory=lambda: ["main"],
        description="Branch and tag names as globs (fnmatch) or, prefixed 're:', regular expressions; a "
        "40-hex commit id names that commit. Default: main only; ['*'] for every branch and tag.",
    )
    deny: list[str] = Field(default_factory=list, description="Same forms as allow; deny wins.")
