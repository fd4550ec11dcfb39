"""``--upstream`` and its flags, as one frozen value the proxy reads; the upstream's token comes
from ``--upstream-token-file`` or ``$OCIBRIDGE_UPSTREAM_TOKEN``, never from a client."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibridge.chunks.chunking import ChunkPolicy
from ocibridge.core import environment
from ocibridge.errors import UsageError
from ocibridge.hubserver.upstream.askbudget import DEFAULT_RATE, AskRate

#: the environment variable the upstream's token is read from when no file names it
TOKEN_ENV = environment.SERVE_UPSTREAM_TOKEN
#: seconds a branch's head, once resolved at the upstream, is answered before it is asked again
FRESH = 300.0
#: upstream fetches under way at once, over all clients, and started by one client (fetchbounds.py)
MAX_FETCHES = 16
MAX_FETCHES_PER_CLIENT = 4


@dataclass(frozen=True)
class UpstreamSettings:
    """Where the upstream is and what may come from it."""

    url: str  # a Hub API endpoint: https://huggingface.co, a mirror, another ocibridge serve
    token: str | None = None  # sent to the upstream only
    fresh: float = FRESH  # a branch re-resolved at most every this many seconds (0: never)
    allow: tuple[str, ...] = ()  # repo id globs that may enter (none: every repository not denied)
    deny: tuple[str, ...] = ()  # repo id globs that may not
    allow_pickle: bool = False  # files of door.PICKLE patterns may enter
    # each fetched file scanned by its content, a flagged one refusing its commit (scanned.py): the flag
    # that asked it (--upstream-scan refuse, or serve's own --scan: a proxied model is scanned as a pushed
    # one), named in the refusal; "": not scanned
    scan: str = ""
    concurrency: int = 4  # files downloaded at once
    hub_cache: Path | None = None  # serve's own Hub cache the files pass through, emptied after each
    # fetch (None: huggingface_hub's cache, the operator's, left as it is)
    licenses: tuple[str, ...] = ()  # the card must name one of these licenses (none: any card, or none)
    refuse_files: tuple[str, ...] = ()  # file globs (a path or a name) that keep a commit out
    allow_gated: tuple[str, ...] = ()  # repo id globs fetched though gated upstream, kept gated here
    allow_private: tuple[str, ...] = ()  # repo id globs fetched though private upstream, kept private here
    # which fetched files the artifact binds a chunk table of (None: none): push's defaults unless
    # --upstream-no-chunks/--upstream-chunk-threshold/--upstream-chunk-hash say otherwise (a raw file from
    # 64 MiB, 1 MiB BLAKE3 chunks), so a commit fetched here is the artifact push makes of the same files
    chunks: ChunkPolicy | None = ChunkPolicy()
    max_fetches: int = MAX_FETCHES  # commits fetched at once, over all clients (fetchbounds.py)
    max_fetches_per_client: int = MAX_FETCHES_PER_CLIENT  # ... started by one client (its token, else its address)
    keep: float | None = None  # seconds a fetched commit no one reads is kept (hubserver/lifetimes/); None: ever
    asks_per_client: AskRate | None = DEFAULT_RATE  # what one client's misses may ask the upstream (askbudget.py)

    def denied_by(self, key: str) -> str | None:
        """The rule that keeps the repository ``key`` out (``--upstream-deny GLOB``, or no
        ``--upstream-allow`` matching it); None when it may enter. Keys compare case-insensitively,
        as serve's do. A glob matches a key as the Hub writes it: a model's ``ORG/NAME``, a dataset's
        ``datasets/ORG/NAME`` (an allow glob lets in only what it names: ``acme/*`` no dataset); a
        deny glob matches a dataset's ``ORG/NAME`` too, so ``evil/*`` keeps out evil's datasets as well."""
        from ocibridge.hubserver.repo.reponames import hub_id

        lowered = key.lower()
        for glob in self.deny:
            if fnmatch.fnmatchcase(lowered, glob.lower()) or fnmatch.fnmatchcase(hub_id(lowered), glob.lower()):
                return f"--upstream-deny {glob}"
        if self.allow and not _matched(lowered, self.allow):
            return f"--upstream-allow ({', '.join(self.allow)}) does not match it"
        return None

    def describe(self, filled: str) -> str:
        """serve's second start line: where a miss of ``filled`` (the registry) goes and what the door lets in."""
        rules = [f"deny {', '.join(self.deny)}"] if self.deny else []
        rules += [f"allow only {', '.join(self.allow)}"] if self.allow else []
        rules += [f"licenses {', '.join(self.licenses)} only"] if self.licenses else []
        rules += [f"files {', '.join(self.refuse_files)} refused"] if self.refuse_files else []
        rules += [] if self.allow_pickle else ["pickle formats refused"]
        rules += [f"gated {', '.join(self.allow_gated)} kept gated"] if self.allow_gated else []
        rules += [f"private {', '.join(self.allow_private)} kept private"] if self.allow_private else []
        fresh = f"a branch re-checked every {self.fresh:g} s" if self.fresh > 0 else "a branch never re-checked"
        token = "with --upstream-token-file's token" if self.token else "with no token"
        return (f"a proxy of {self.url} ({token}): what {filled} lacks is fetched from it once; "
                f"{fresh}; {'; '.join(rules) or 'every repository let in'}")

    def keeps_gated(self, repo_id: str) -> bool:
        """Whether a repository gated at the upstream may enter (``--upstream-allow-gated GLOB``)."""
        return _matched(repo_id, self.allow_gated)

    def keeps_private(self, repo_id: str) -> bool:
        """Whether a repository private at the upstream may enter (``--upstream-allow-private GLOB``)."""
        return _matched(repo_id, self.allow_private)

    def files_refused(self, paths: list[str]) -> tuple[list[str], str] | None:
        """The files a rule refuses and the rule (door.py); None when all may enter."""
        from ocibridge.hubserver.upstream.entryrules import files_refused

        return files_refused(paths, self.refuse_files, self.allow_pickle)

    def license_refused(self, card: dict[str, Any] | None) -> str | None:
        """Why ``--upstream-license`` refuses a repository with this card (door.py); None: it may enter."""
        from ocibridge.hubserver.upstream.entryrules import license_refused

        return license_refused(self.licenses, card)


def _matched(repo_id: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(repo_id.lower(), glob.lower()) for glob in globs)


def upstream_token(token_file: str | None) -> str | None:
    """The token serve sends the upstream: the first line of ``token_file``, else
    ``$OCIBRIDGE_UPSTREAM_TOKEN``, else none; one error line for a file that cannot be read."""
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as e:
            raise UsageError(f"--upstream-token-file {token_file}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise UsageError(f"--upstream-token-file {token_file}: not UTF-8 text") from None
        if not token:
            raise UsageError(f"--upstream-token-file {token_file}: the file's first line holds no token")
        return token
    return os.environ.get(TOKEN_ENV) or None


def check_fresh(seconds: float) -> float:
    if not seconds >= 0:
        raise UsageError(f"--upstream-fresh {seconds}: expected a number of seconds, 0 or more (0: never re-check)")
    return seconds
