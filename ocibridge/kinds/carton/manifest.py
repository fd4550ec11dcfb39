"""``MANIFEST`` (``path=sha256`` lines, byte-sorted) and ``LINKS`` (TOML ``version = 1`` +
``[urls] sha256 = [url, ...]``): parsed strictly, because the model hash is the sha256 of the
MANIFEST bytes and every file is checked against it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from ocibridge.core import tomltext
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import UnsafePath
from ocibridge.kinds.carton.errors import CartonError

MANIFEST_NAME = "MANIFEST"
LINKS_NAME = "LINKS"
TOML_NAME = "carton.toml"
_HEX = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class CartonManifest:
    """The MANIFEST: every file's sha256 (hex), in the order of the bytes it was parsed from."""

    entries: dict[str, str]
    data: bytes

    @property
    def model_hash(self) -> str:
        """The Carton "model hash": the sha256 (hex) of the MANIFEST bytes."""
        return hashlib.sha256(self.data).hexdigest()


def parse_manifest(data: bytes) -> CartonManifest:
    """One ``path=<64 lowercase hex>`` per line, each ending in a newline, paths safe, unique
    and in byte order, never MANIFEST or LINKS themselves."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CartonError(f"{MANIFEST_NAME} is not UTF-8") from None
    if text and not text.endswith("\n"):
        raise CartonError(f"{MANIFEST_NAME}: the last line has no newline")
    entries: dict[str, str] = {}
    previous = b""
    for number, line in enumerate(text.splitlines(), 1):
        path, sep, digest = line.rpartition("=")
        if not sep or not _HEX.match(digest) or not path:
            raise CartonError(f"{MANIFEST_NAME} line {number}: expected 'path=<sha256 hex>', got {line[:80]!r}")
        try:
            normal = safe_relpath(path, f"{MANIFEST_NAME} path")
        except UnsafePath as e:
            raise UnsafePath(f"{MANIFEST_NAME} line {number}: {e}") from None
        if normal != path:
            raise CartonError(f"{MANIFEST_NAME} line {number}: path {path!r} is not normalised")
        if path in (MANIFEST_NAME, LINKS_NAME):
            raise CartonError(f"{MANIFEST_NAME} line {number}: lists {path}, which it must not")
        if path in entries:
            raise CartonError(f"{MANIFEST_NAME} line {number}: duplicate path {path!r}")
        if path.encode() < previous:
            raise CartonError(f"{MANIFEST_NAME} line {number}: {path!r} is out of byte order")
        previous = path.encode()
        entries[path] = digest
    return CartonManifest(entries, data)


def format_manifest(entries: dict[str, str]) -> bytes:
    """The MANIFEST bytes Carton writes for these entries (sorted by bytes)."""
    return "".join(f"{p}={entries[p]}\n" for p in sorted(entries, key=str.encode)).encode()


@dataclass(frozen=True)
class CartonLinks:
    """sha256 (hex) → URLs to try in order."""

    urls: dict[str, list[str]] = field(default_factory=dict)


def parse_links(data: bytes) -> CartonLinks:
    try:
        doc = tomltext.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomltext.TomlError) as e:
        raise CartonError(f"{LINKS_NAME} is not valid TOML: {e}") from None
    if doc.get("version") != 1:
        raise CartonError(f"{LINKS_NAME}: version {doc.get('version')!r} is not supported (known: 1)")
    raw = doc.get("urls", {})
    if not isinstance(raw, dict):
        raise CartonError(f"{LINKS_NAME}: [urls] must be a table")
    urls: dict[str, list[str]] = {}
    for digest, value in raw.items():
        if not _HEX.match(digest):
            raise CartonError(f"{LINKS_NAME}: key {digest[:80]!r} is not a sha256 hex digest")
        if not isinstance(value, list) or not value or not all(isinstance(u, str) for u in value):
            raise CartonError(f"{LINKS_NAME}: urls for {digest} must be a non-empty list of strings")
        for url in value:
            if not url.startswith(("http://", "https://")):
                raise CartonError(f"{LINKS_NAME}: {url[:120]!r} is not an http(s) URL")
        urls[digest] = list(value)
    return CartonLinks(urls)
