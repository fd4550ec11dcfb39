"""What may come from an upstream Hub, as the Python API takes it: the ``upstream_*`` policy options
that ``ServeOptions`` (:mod:`ocibridge.api.serve`) and ``K8sServeOptions`` (a k8s serve's pods,
:mod:`ocibridge.api.k8s_types`) share, declared once with the checks serve makes of them.
The flags that set them: :mod:`ocibridge.cli.upstream_flags`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ocibridge.chunks.choice import UPSTREAM_FLAGS, ChunkChoice, choose
from ocibridge.errors import UsageError
from ocibridge.hubserver.upstream.settings import MAX_FETCHES as MOST
from ocibridge.hubserver.upstream.settings import MAX_FETCHES_PER_CLIENT as PER_CLIENT
from ocibridge.hubserver.upstream.settings import check_fresh

#: ``--upstream-scan``'s choices
SCAN_MODES = ("refuse", "off")

#: the command line's defaults for --upstream-max-fetches and --upstream-max-fetches-per-client
DEFAULT_MAX_FETCHES = MOST
DEFAULT_MAX_FETCHES_PER_CLIENT = PER_CLIENT


@dataclass(frozen=True, kw_only=True)
class UpstreamPolicyOptions:
    """Which repositories and commits serve's upstream proxy may fetch (``--upstream-allow`` and its
    kin; docs/serve.md, A proxy of an upstream Hub); none set: every repository, no pickle files."""

    upstream_allow: tuple[str, ...] = ()  # repo id globs that may be fetched (none: all not denied)
    upstream_deny: tuple[str, ...] = ()  # repo id globs that may not
    upstream_allow_pickle: bool = False  # fetch pickle formats (by name: door.PICKLE; by content) too
    # scan each fetched file by its content, a flagged one refusing its commit: "refuse" (needs the scan
    # extra) or "off"
    upstream_scan: str = "off"
    upstream_licenses: tuple[str, ...] = ()  # the card must name one of these licenses (none: any)
    upstream_refuse_files: tuple[str, ...] = ()  # file globs that keep a commit out
    upstream_allow_gated: tuple[str, ...] = ()  # repo id globs fetched though gated upstream: gated here
    upstream_allow_private: tuple[str, ...] = ()  # repo id globs fetched though private upstream: private here
    # the chunk table a fetched commit's artifact binds, as push's --no-chunks, --chunk-threshold (bytes) and
    # --chunk-hash say it (none set: push's default, so a commit fetched here is the artifact push makes)
    upstream_no_chunks: bool = False
    upstream_chunk_threshold: int | None = None
    upstream_chunk_hash: str | None = None
    # upstream fetches under way at once, over all clients and started by one (its token, else its address)
    upstream_max_fetches: int = MOST
    upstream_max_fetches_per_client: int = PER_CLIENT
    # seconds a fetched commit no one reads is kept before its tags go, for the registry's GC (--upstream-keep;
    # docs/lifetimes.md); None: kept for ever
    upstream_keep: float | None = None

    def upstream_wanted(self, upstream: str | None, *, others_given: Sequence[str], tokens: bool, token_flag: str,
                        fresh: float | None = None) -> bool:
        """Whether a proxy of ``upstream`` is asked for. Each value is checked first, with ``upstream`` or
        without; then the policy, ``fresh`` (``--upstream-fresh``) or ``others_given`` (the caller's own
        ``--upstream-*`` flags given) without ``upstream`` is refused, naming the first such flag, and so are
        repositories kept gated or private without serve's own tokens (``tokens``, given by ``token_flag``),
        which name their readers."""
        if fresh is not None:
            check_fresh(fresh)
        if self.upstream_keep is not None and not self.upstream_keep > 0:
            raise UsageError(f"--upstream-keep {self.upstream_keep}: expected a lifetime above zero")
        if self.upstream_scan not in SCAN_MODES:
            raise UsageError(f"--upstream-scan {self.upstream_scan}: one of {', '.join(SCAN_MODES)}")
        for flag, value in (("--upstream-max-fetches", self.upstream_max_fetches),
                            ("--upstream-max-fetches-per-client", self.upstream_max_fetches_per_client)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{flag} {value}: expected a number of fetches, 1 or more")
        if upstream is None:
            given = [*self._policy_given(), *(["--upstream-fresh"] if fresh is not None else []), *others_given]
            if given:
                raise UsageError(f"{given[0]}: the --upstream-* flags go with --upstream URL")
            return False
        if self.upstream_scan == "refuse":
            from ocibridge.scanning.library import scanner

            scanner()  # ScannerMissing: one line naming the extra, before serve starts
        if (self.upstream_allow_gated or self.upstream_allow_private) and not tokens:
            raise UsageError(f"--upstream-allow-gated and --upstream-allow-private go with {token_flag}: a "
                             "repository kept gated or private here is given to the readers serve's own tokens "
                             "name, and a serve without them has none")
        return True

    def _policy_given(self) -> list[str]:
        """The policy's flags set away from their defaults, as the command line spells them."""
        set_flags = (("--upstream-allow", self.upstream_allow), ("--upstream-deny", self.upstream_deny),
                     ("--upstream-allow-pickle", self.upstream_allow_pickle),
                     ("--upstream-scan", self.upstream_scan != "off"),
                     ("--upstream-license", self.upstream_licenses),
                     ("--upstream-refuse-files", self.upstream_refuse_files),
                     ("--upstream-allow-gated", self.upstream_allow_gated),
                     ("--upstream-allow-private", self.upstream_allow_private),
                     ("--upstream-no-chunks", self.upstream_no_chunks),
                     ("--upstream-chunk-threshold", self.upstream_chunk_threshold is not None),
                     ("--upstream-chunk-hash", self.upstream_chunk_hash is not None),
                     ("--upstream-max-fetches", self.upstream_max_fetches != MOST),
                     ("--upstream-max-fetches-per-client", self.upstream_max_fetches_per_client != PER_CLIENT),
                     ("--upstream-keep", self.upstream_keep is not None))
        return [flag for flag, given in set_flags if given]

    def upstream_policy(self) -> dict[str, Any]:
        """The policy as serve's ``UpstreamSettings`` takes it (its fields, without ``upstream_``)."""
        return {"allow": tuple(self.upstream_allow), "deny": tuple(self.upstream_deny),
                "allow_pickle": self.upstream_allow_pickle,
                "scan": "--upstream-scan" if self.upstream_scan == "refuse" else "",  # the flag that asked it
                "licenses": tuple(self.upstream_licenses),
                "refuse_files": tuple(self.upstream_refuse_files),
                "allow_gated": tuple(self.upstream_allow_gated),
                "allow_private": tuple(self.upstream_allow_private), "chunks": self.upstream_chunks().policy(),
                "max_fetches": self.upstream_max_fetches,
                "max_fetches_per_client": self.upstream_max_fetches_per_client, "keep": self.upstream_keep}

    def upstream_chunks(self) -> ChunkChoice:
        """The chunk settings, checked as push checks its flags (in serve's spelling)."""
        return choose(self.upstream_no_chunks, self.upstream_chunk_threshold, self.upstream_chunk_hash,
                      UPSTREAM_FLAGS)

    def upstream_policy_flags(self) -> tuple[str, ...]:
        """The policy as serve's flags (a k8s serve's pod arguments), each repeated flag once a value."""
        flags: list[str] = []
        for flag, values in (("--upstream-allow", self.upstream_allow), ("--upstream-deny", self.upstream_deny),
                             ("--upstream-license", self.upstream_licenses),
                             ("--upstream-refuse-files", self.upstream_refuse_files),
                             ("--upstream-allow-gated", self.upstream_allow_gated),
                             ("--upstream-allow-private", self.upstream_allow_private)):
            for value in values:
                flags += [flag, value]
        if self.upstream_chunk_threshold is not None:
            flags += ["--upstream-chunk-threshold", str(self.upstream_chunk_threshold)]
        if self.upstream_chunk_hash is not None:
            flags += ["--upstream-chunk-hash", self.upstream_chunk_hash]
        if self.upstream_max_fetches != MOST:
            flags += ["--upstream-max-fetches", str(self.upstream_max_fetches)]
        if self.upstream_scan != "off":
            flags += ["--upstream-scan", self.upstream_scan]
        if self.upstream_max_fetches_per_client != PER_CLIENT:
            flags += ["--upstream-max-fetches-per-client", str(self.upstream_max_fetches_per_client)]
        if self.upstream_keep is not None:
            keep = self.upstream_keep
            flags += ["--upstream-keep", f"{int(keep) if keep == int(keep) else keep}s"]
        return tuple(flags + (["--upstream-allow-pickle"] if self.upstream_allow_pickle else [])
                     + (["--upstream-no-chunks"] if self.upstream_no_chunks else []))
