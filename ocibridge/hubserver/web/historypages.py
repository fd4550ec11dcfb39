"""The history, commit and compare pages, beside the other pages (:mod:`.pages`:
their login, their error pages, their common context):

    GET  /REPO/commits/{rev}                    the commits of a branch (:func:`.history.history`)
    GET  /REPO/commit/{rev}                     one commit and the files it changed (:mod:`.commitview`)
    GET  /REPO/compare/{a}...{b}                what changed from a to b (``ocibridge diff``'s result)

The data is :mod:`.history`'s and :mod:`.commitview`'s; this module only routes and renders it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from ocibridge.hubserver.answers import requested_repo
from ocibridge.hubserver.routing import HubRoute
from ocibridge.hubserver.web import render
from ocibridge.hubserver.web.commitview import commit_view
from ocibridge.hubserver.web.compare import Compare
from ocibridge.hubserver.web.comparepage import tensor_page
from ocibridge.hubserver.web.history import history, split_compare
from ocibridge.hubserver.web.pages import PAGE_METHODS, REPO_FORMS

if TYPE_CHECKING:
    from ocibridge.hubserver.web.pages import WebPages


class HistoryPages:
    """The three pages, served through ``web``'s login and error handling."""

    def __init__(self, web: WebPages, compare: Compare):
        self.web = web
        self.compare = compare

    def routes(self) -> list[BaseRoute]:
        found: list[BaseRoute] = []
        for repo in REPO_FORMS:
            found += [
                HubRoute(f"/{repo}/commits/{{revision:hub_part}}", self.web.page(self.commits, repo_route=True),
                         methods=PAGE_METHODS),
                HubRoute(f"/{repo}/commit/{{revision:hub_part}}",
                         self.web.page(self.commit, repo_route=True, files=True), methods=PAGE_METHODS),
                HubRoute(f"/{repo}/compare/{{spec:hub_part}}", self.web.page(self.diff, repo_route=True, files=True),
                         methods=PAGE_METHODS),
            ]
        return found

    async def commits(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        found = await self.web.serve._run(history, self.web.serve.catalog, repo, revision)
        return render.page("commits.html", repo=repo, history=found, **self.web.common(request))

    async def commit(self, request: Request) -> Response:
        from ocibridge.oci.layerinfo import is_raw

        repo, revision = requested_repo(request), request.path_params["revision"]
        view = await self.web.serve._run(commit_view, self.web.serve.catalog, repo, revision)
        return render.page("commit.html", repo=repo, view=view, raw=is_raw, **self.web.common(request))

    async def diff(self, request: Request) -> Response:
        repo, spec = requested_repo(request), request.path_params["spec"]
        revisions = split_compare(spec)
        if revisions is None:
            return self.web.error(request, 404, "Not a comparison",
                                  f"{spec}: a comparison is /{repo}/compare/OLD...NEW (two revisions)")
        client = request.client.host if request.client else ""
        shown = await self.web.serve._run(self.compare, repo, *revisions, client)
        rows = tensor_page(shown.diff, request.query_params.get("tensors"))
        common = self.web.common(request)
        # off the event loop: a diff of many tensors takes a while to lay out, even one page of it
        return await self.web.serve._run(lambda: render.page(
            "compare.html", repo=repo, old=revisions[0], new=revisions[1], shown=shown, rows=rows,
            value=shown_value, **common))


def shown_value(value: Any) -> str:
    """A config value as ``ocibridge diff`` prints it: JSON, absent as a dash."""
    return "—" if value is None else json.dumps(value, sort_keys=True)
