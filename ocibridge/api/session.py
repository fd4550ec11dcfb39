"""What a program running several calls around one run needs: every store opened in it closed
when it ends, the request log of ``--debug``, the kinds of model a push reads (``--help`` names
them), the environment variable that makes every call offline, the places a command writes to.

Small and light on purpose: the command line's entry point and ``--help`` import it before any
command, so it imports nothing heavier than the standard library at module level.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ocibridge.core.environment import OFFLINE as OFFLINE_ENV
from ocibridge.core.environment import POLICY as POLICY_ENV

if TYPE_CHECKING:
    from ocibridge.stores.opened import closing_opened_stores

__all__ = ["OFFLINE_ENV", "POLICY_ENV", "closing_opened_stores", "enable_request_log", "source_kinds", "written_places"]

#: the arguments that name where a command writes (pull's DEST or -o, copy's and convert's DST,
#: load's PREFIX)
_WRITTEN_TO = ("dest", "output", "dst", "prefix")
#: the commands whose destination is files (pull's directory or archive, save's bundle, the
#: directory k8s mount writes), not a store
_WRITES_FILES = ("pull", "save", "k8s")
#: a command's own name for what it writes (k8s mount's DIR; its other subcommands have none)
_WRITTEN_TO_BY_COMMAND = {"k8s": ("dir",)}
#: the commands that write into the local store when no destination is named
_STORE_BY_DEFAULT = ("push", "load")


def enable_request_log() -> None:
    """Log every registry request on stderr, secrets redacted (what ``--debug`` turns on)."""
    from ocibridge.stores.registry.debuglog import enable_request_log as enable

    enable()


def source_kinds() -> str:
    """The kinds of model ``push`` reads and ``pull`` writes, as the help names them
    (``directory, *.carton, ..., ollama:NAME``)."""
    from ocibridge.kinds.table import source_kinds as kinds

    return kinds()


def written_places(command: str, given: Mapping[str, object]) -> list[str]:
    """The local places a command writes to, as absolute paths: what its destination names (a
    directory, an archive, a layout, the local store for a bare ``NAME:TAG``), then the cache.
    A full disk reported with no file name is answered with them (the entry point)."""
    from ocibridge.core.environment import cache_root
    from ocibridge.errors import OcibridgeError
    from ocibridge.oci.reference import LayoutReference, PathReference
    from ocibridge.places.locate import Role, locate
    from ocibridge.places.targets import default_store_path, is_local_name

    keys = (*_WRITTEN_TO, *_WRITTEN_TO_BY_COMMAND.get(command, ()))
    texts = [text for key in keys if isinstance(text := given.get(key), str) and text]
    places: list[str] = []
    if not texts and command in _STORE_BY_DEFAULT:
        places.append(str(default_store_path()))
    role = Role.OUTPUT if command in _WRITES_FILES else Role.DESTINATION  # as the command reads it
    for text in texts:
        with contextlib.suppress(OcibridgeError):
            located = locate(text, role)
            if is_local_name(located):
                places.append(str(default_store_path()))
            elif isinstance(located, (LayoutReference, PathReference)):
                places.append(os.path.abspath(os.path.expanduser(located.path)))
    return [*dict.fromkeys(places), f"the cache {cache_root()}"]


def __getattr__(name: str) -> Any:
    """``closing_opened_stores`` on first use: ``--help`` reads this module and opens no store."""
    if name == "closing_opened_stores":
        from ocibridge.stores.opened import closing_opened_stores

        return closing_opened_stores
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
