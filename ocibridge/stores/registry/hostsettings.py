"""Per-registry settings remembered between commands, like containers' registries.conf.

``~/.config/ocibridge/registries.toml`` (or ``$OCIBRIDGE_REGISTRIES_CONF``)::

    [registry."registry.internal:5000"]
    ca_file = "/etc/pki/internal-ca.pem"   # trusted for this host, on top of the system store
    plain_http = false                      # false: TLS even on a loopback address
    insecure = false                        # true: TLS without verification
    mirrors = ["mirror.internal:5000"]      # reads try these first (same repository), then the host
    upload = "monolithic"                   # learnt: no chunked (PATCH) uploads (or "chunked")
    max_body = 8388608                      # learnt: request bodies over this are refused (a cap)
    range_end = "exclusive"                 # learnt: upload answers say Range 0-N for N bytes held

``ocibridge login HOST --ca-file F`` (and ``--plain-http``/``--insecure``) writes the host's
entry, so later commands need no flag. Flags on the command line win over the file.
``upload``, ``max_body`` and ``range_end`` are written by the client when a registry refuses an upload form
(uploadpolicy.py), so later pushes start with what works there.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibridge.core.environment import REGISTRIES_CONF as ENV_FILE
from ocibridge.errors import OcibridgeError


@dataclass(frozen=True)
class HostSettings:
    plain_http: bool | None = None
    insecure: bool | None = None
    ca_file: str | None = None
    mirrors: tuple[str, ...] = ()
    upload: str | None = None  # "monolithic" or "chunked": what the registry takes
    max_body: int | None = None  # the largest request body known to pass
    range_end: str | None = None  # "exclusive" (0-N for N bytes) or "inclusive" (0-(N-1))


UPLOAD_FORMS = ("monolithic", "chunked")
_MIRROR_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                          r"[A-Za-z0-9])?(?::[0-9]{1,5})?\Z|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?\Z")
_MIRROR_PATH = re.compile(r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*\Z")


def is_mirror_name(text: str) -> bool:
    """Whether ``text`` is ``host[:port][/namespace]``: it goes into URLs, and (k8s/node_mirrors.py)
    into the nodes' runtime settings and paths."""
    host, _, namespace = text.strip("/").partition("/")
    return bool(_MIRROR_HOST.match(host)) and (not namespace or bool(_MIRROR_PATH.match(namespace)))
RANGE_ENDS = ("inclusive", "exclusive")


def settings_path() -> Path:
    if os.environ.get(ENV_FILE):
        return Path(os.environ[ENV_FILE])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ocibridge" / "registries.toml"


def _load(path: Path) -> dict[str, Any]:
    from ocibridge.core.limits import MAX_SMALL_INPUT
    from ocibridge.core.smallfile import read_small

    try:  # a regular file, capped: a FIFO or /dev/zero there is one error, not a hang
        text = read_small(path, MAX_SMALL_INPUT, "registry settings").decode("utf-8")
    except FileNotFoundError:
        return {}  # the usual case: no TOML parser to import (~3 ms of every registry command)
    except UnicodeDecodeError as e:
        raise OcibridgeError(f"cannot read registry settings {path}: {e}") from None
    from ocibridge.core import tomltext

    try:
        return dict(tomltext.loads(text))
    except tomltext.TomlError as e:
        raise OcibridgeError(f"cannot read registry settings {path}: {e}") from None


def host_settings(host: str) -> HostSettings:
    """What the settings file says about ``host`` (all None when it says nothing)."""
    path = settings_path()
    entry = (_load(path).get("registry") or {}).get(host)
    if entry is None:
        return HostSettings()
    if not isinstance(entry, dict):
        raise OcibridgeError(f"{path}: registry.{host!r} is not a table")
    unknown = set(entry) - {"plain_http", "insecure", "ca_file", "mirrors", "upload", "max_body",
                          "range_end"}
    if unknown:
        raise OcibridgeError(f"{path}: registry.{host!r}: unknown setting {sorted(unknown)[0]!r}")
    for key in ("plain_http", "insecure"):
        if key in entry and not isinstance(entry[key], bool):
            raise OcibridgeError(f"{path}: registry.{host!r}.{key} must be true or false")
    ca_file = entry.get("ca_file")
    if ca_file is not None and not isinstance(ca_file, str):
        raise OcibridgeError(f"{path}: registry.{host!r}.ca_file must be a path")
    mirrors = entry.get("mirrors", [])
    if not isinstance(mirrors, list) or not all(isinstance(m, str) and is_mirror_name(m) for m in mirrors):
        raise OcibridgeError(f"{path}: registry.{host!r}.mirrors must be a list of host[:port][/namespace]")
    upload = entry.get("upload")
    if upload is not None and upload not in UPLOAD_FORMS:
        raise OcibridgeError(f"{path}: registry.{host!r}.upload must be one of {', '.join(UPLOAD_FORMS)}")
    max_body = entry.get("max_body")
    if max_body is not None and (type(max_body) is not int or max_body < 1):
        raise OcibridgeError(f"{path}: registry.{host!r}.max_body must be a positive number of bytes")
    range_end = entry.get("range_end")
    if range_end is not None and range_end not in RANGE_ENDS:
        raise OcibridgeError(f"{path}: registry.{host!r}.range_end must be one of {', '.join(RANGE_ENDS)}")
    return HostSettings(entry.get("plain_http"), entry.get("insecure"), ca_file, tuple(mirrors),
                        upload, max_body, range_end)


def remember(host: str, *, plain_http: bool | None = None, insecure: bool | None = None,
             ca_file: str | None = None) -> Path | None:
    """Record what was given for ``host`` (others kept); None when nothing was given."""
    given: dict[str, Any] = {k: v for k, v in (("plain_http", plain_http), ("insecure", insecure),
                                               ("ca_file", ca_file)) if v is not None}
    if not given:
        return None
    if "ca_file" in given:
        given["ca_file"] = str(Path(given["ca_file"]).resolve())
    return _merge(host, given)


def remember_upload(host: str, *, upload: str | None = None, max_body: int | None = None,
                    range_end: str | None = None) -> Path | None:
    """Record what a registry was seen to take for uploads (others kept)."""
    given: dict[str, Any] = {k: v for k, v in (("upload", upload), ("max_body", max_body),
                                               ("range_end", range_end)) if v is not None}
    return _merge(host, given) if given else None


def _merge(host: str, given: dict[str, Any]) -> Path:
    import tomli_w

    from ocibridge.core.fsutil import atomic_write_bytes  # writing only: a warm `path` reads this module
    from ocibridge.core.lockfile import flocked_file

    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # read, change and replace as one step: two writers (a login and an upload probe) each keep
    # the other's change; the lock file sits beside the settings, never reached through a link
    with flocked_file(path.with_name(path.name + ".lock")):
        data = _load(path)
        table = data.setdefault("registry", {})
        table[host] = {**table.get(host, {}), **given}
        atomic_write_bytes(path, tomli_w.dumps(data).encode())
    return path
