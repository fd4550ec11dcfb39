"""Starlette's router, matched on the raw path: the one router of serve's routes (:mod:`.app`).

The Hub's clients quote a revision or a path that holds a ``/`` (``refs%2Fpr%2F1``): it is one
segment, which the decoded path no longer says. So a :class:`HubRoute` matches its pattern
against the path as sent (split on its raw ``/``, one trailing ``/`` dropped) and its path
converters decode each value once matched:

- ``{x:hub_part}``: one segment (empty allowed, as a split gives it);
- ``{x:hub_rest}``: the rest of the path;
- ``{x:hub_keyword}``: the word that names an API route after a repo id;
- ``{x:hub_ref_kind}``: ``branch`` or ``tag`` (the write API's refs);
- ``{x:hub_number}``: a number of at most 20 digits;
- ``{x:xet_version}``: ``v1`` or ``v2``, as 1 or 2;
- ``{repo_type:hub_api_type}``: ``models`` or ``datasets`` (the API's), as ``model`` or ``dataset``;
- ``{repo_type:hub_dataset}``: ``datasets`` (a dataset's web, file and upload paths), as ``dataset``.

A route answers only the methods it names (no implied HEAD): a request for another method
falls through to the routes after it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import unquote

from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import Match, Route
from starlette.types import Scope


class _Part(Convertor[str]):
    regex = "[^/]*"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return value


class _Rest(_Part):
    regex = ".*"


class _Keyword(_Part):
    regex = ("revision|tree|paths-info|xet-read-token|refs|preupload|commits|commit|branch|tag|settings|auth-check|"
             "lfs-files|super-squash|user-access-request")


class _RefKind(_Part):
    regex = "branch|tag"


class _Number(Convertor[int]):
    regex = "[0-9]{1,20}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


class _XetVersion(Convertor[int]):
    regex = "v[12]"

    def convert(self, value: str) -> int:
        return int(value[1])

    def to_string(self, value: int) -> str:
        return f"v{value}"


class _ApiType(Convertor[str]):
    regex = "models|datasets"

    def convert(self, value: str) -> str:
        return value[:-1]

    def to_string(self, value: str) -> str:
        return value + "s"


class _Dataset(_ApiType):
    regex = "datasets"


#: a repo id in a route: ORG/NAME, then NAME
REPO_FORMS = ("{org:hub_part}/{name:hub_part}", "{name:hub_part}")
#: a repository's key (repo/reponames.py) in a path, as the Hub's file, upload, Xet and page paths write
#: it: datasets/REPO first (a model id never starts with "datasets"), then a model's REPO
KEY_FORMS = (*(f"{{repo_type:hub_dataset}}/{form}" for form in REPO_FORMS), *REPO_FORMS)

register_url_convertor("hub_part", _Part())
register_url_convertor("hub_rest", _Rest())
register_url_convertor("hub_keyword", _Keyword())
register_url_convertor("hub_ref_kind", _RefKind())
register_url_convertor("hub_number", _Number())
register_url_convertor("xet_version", _XetVersion())
register_url_convertor("hub_api_type", _ApiType())
register_url_convertor("hub_dataset", _Dataset())


def route_path(scope: Scope) -> str:
    """The (decoded) path below the app's mount point (``root_path``): what signed URLs sign."""
    return _below_root(str(scope["path"]), scope)


def raw_route_path(scope: Scope) -> str:
    """The path as sent, below the app's mount point, without its query and one trailing ``/``."""
    raw = scope.get("raw_path")
    path = _below_root(raw.split(b"?", 1)[0].decode("latin-1"), scope) if raw else route_path(scope)
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return path


def _below_root(path: str, scope: Scope) -> str:
    root = str(scope.get("root_path", ""))
    return path[len(root):] if root and path.startswith(root) else path


class HubRoute(Route):
    """A route matched on the raw path (:func:`raw_route_path`), for exactly ``methods``."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *, methods: Collection[str]):
        super().__init__(path, endpoint, methods=methods)
        self.exact_methods = frozenset(methods)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] not in self.exact_methods:
            return Match.NONE, {}
        path = _matched_path(scope)
        if self.path_regex.match(path) is None:  # most routes, at once (a xorb request tries ~59)
            return Match.NONE, {}
        return super().matches({**scope, "path": path, "root_path": ""})


#: the scope key of the path :class:`HubRoute` matches, with what it was made of
_MATCHED = "ocibridge.matched_path"


def _matched_path(scope: Scope) -> str:
    """:func:`raw_route_path` of ``scope``, made once for all the routes it is tried against."""
    made = scope.get(_MATCHED)
    of = (scope.get("raw_path"), scope.get("root_path", ""), scope.get("path"))
    if made is None or made[0] != of:
        made = scope[_MATCHED] = (of, raw_route_path(scope))
    return str(made[1])
