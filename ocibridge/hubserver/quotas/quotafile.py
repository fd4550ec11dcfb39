"""serve's ``--quotas`` file (TOML): bytes and repository counts per namespace, and what the
proxy's ingests may take. Read at start (a file that cannot be read stops serve with one line),
then watched as ``--token-file`` is (:class:`.tokenfile.TokenFile`): a change takes effect
within a second; a change that breaks the file keeps the rules last read (logged), since
refusing every write for a typo would be the operator's outage, not a quota.

    [namespaces.acme]          # repositories acme/* and datasets/acme/*
    bytes = "10G"              # unique blob bytes its repositories' tags hold
    repos = 20                 # repositories (models and datasets)

    [namespaces."*"]           # every namespace not named
    bytes = "1G"

    [upstream]                 # serve --upstream
    namespace = "proxied"      # whose quota the proxy's ingests count against
    max-size = "20G"           # one ingest never larger (also --upstream-max-size)
    ingests-per-hour = 10      # per client: its token, else its address
    bytes-per-hour = "50G"     # per client
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from ocibridge.core import tomltext
from ocibridge.core.terminal import parse_bytes
from ocibridge.errors import UsageError
from ocibridge.hubserver.tokenfile import TokenFile

log = logging.getLogger("ocibridge.hubserver")
#: the table naming every namespace the file does not name
EVERY = "*"


@dataclass(frozen=True)
class Limit:
    """One namespace's quota (None: that measure is not limited)."""

    bytes: int | None = None
    repos: int | None = None


@dataclass(frozen=True)
class IngestRules:
    """What the proxy's ingests may take."""

    namespace: str | None = None  # the namespace whose quota they count against (None: none)
    max_size: int | None = None  # bytes one ingest may be at most
    ingests_per_hour: int | None = None  # ingests one client may start in an hour
    bytes_per_hour: int | None = None  # bytes one client may have the proxy fetch in an hour


@dataclass(frozen=True)
class QuotaRules:
    """The file as read."""

    namespaces: dict[str, Limit] = field(default_factory=dict)  # lower-cased names ("*": the rest)
    upstream: IngestRules = IngestRules()

    def limit_of(self, namespace: str) -> Limit | None:
        """The quota of ``namespace`` (its own, else ``*``'s); None: none."""
        return self.namespaces.get(namespace.lower()) or self.namespaces.get(EVERY)


def _size(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UsageError(f"{where}: expected a size (bytes, or text such as \"10G\"), got {value!r}")
    try:
        size = value if isinstance(value, int) else parse_bytes(value)
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None
    if size < 0:
        raise UsageError(f"{where}: expected a size of 0 or more, got {value!r}")
    return size


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{where}: expected a whole number of 0 or more, got {value!r}")
    return value


def _table(said: dict[str, Any], name: str, keys: tuple[str, ...], where: str) -> dict[str, Any]:
    table = said.get(name, {})
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [{name}] must be a table")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise UsageError(f"{where}: [{name}] has no key {unknown[0]!r} (known: {', '.join(keys)})")
    return table


def parse_quotas(text: str, where: str) -> QuotaRules:
    """The rules of a quotas file's ``text``; :class:`UsageError` naming ``where`` and the fault."""
    try:
        said = tomltext.loads(text)
    except tomltext.TomlError as e:
        raise UsageError(f"{where}: not TOML: {e}") from None
    unknown = sorted(set(said) - {"namespaces", "upstream"})
    if unknown:
        raise UsageError(f"{where}: no table {unknown[0]!r} (known: namespaces, upstream)")
    names = said.get("namespaces", {})
    if not isinstance(names, dict):
        raise UsageError(f"{where}: [namespaces] must hold one table a namespace ([namespaces.acme])")
    limits: dict[str, Limit] = {}
    for name, _ in names.items():
        table = _table(names, name, ("bytes", "repos"), where)
        at = f"{where} [namespaces.{name}]"
        limits[name.lower()] = Limit(None if "bytes" not in table else _size(table["bytes"], f"{at} bytes"),
                                     None if "repos" not in table else _count(table["repos"], f"{at} repos"))
    up = _table(said, "upstream", ("namespace", "max-size", "ingests-per-hour", "bytes-per-hour"), where)
    namespace = up.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace or "/" in namespace):
        raise UsageError(f"{where} [upstream] namespace: expected a namespace's name, got {namespace!r}")
    at = f"{where} [upstream]"
    rules = IngestRules(namespace.lower() if namespace else None,
                        None if "max-size" not in up else _size(up["max-size"], f"{at} max-size"),
                        None if "ingests-per-hour" not in up else _count(up["ingests-per-hour"],
                                                                         f"{at} ingests-per-hour"),
                        None if "bytes-per-hour" not in up else _size(up["bytes-per-hour"], f"{at} bytes-per-hour"))
    return QuotaRules(limits, rules)


def read_quotas(path: str) -> QuotaRules:
    """The rules of the file at ``path``; :class:`UsageError` (one line) when it cannot be read or is not one."""
    return parse_quotas(_read_text(path, f"--quotas {path}"), f"--quotas {path}")


def quotas_text(path: str) -> str:
    """The text of the quotas file at ``path``, checked to be one (``k8s serve`` carries it to its
    pods, which read it as serve does); :class:`UsageError` (one line) when it is not."""
    text = _read_text(path, f"--quotas {path}")
    parse_quotas(text, f"--quotas {path}")
    return text


def _read_text(path: str, where: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"{where}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None


class QuotaFile:
    """The quotas file, read at start and again when it changed (looked at once a second at most)."""

    def __init__(self, path: str):
        self.path = path
        self._watch = TokenFile(path)
        self._lock = threading.Lock()
        self._rules = read_quotas(path)

    def rules(self) -> QuotaRules:
        if not self._watch.due():
            return self._rules
        with self._lock:
            if self._watch.moved():
                try:
                    self._rules = read_quotas(self.path)
                    log.warning("--quotas %s: read again", self.path)
                except UsageError as e:
                    log.error("%s: the quotas last read stay in force until it is fixed", e)
            return self._rules
