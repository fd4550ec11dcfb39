"""The page routes of serve, at the Hub's own web paths (so a link pasted from the Hub works
with serve's host), registered after every API route (app.py) so none is shadowed:

    GET  /, /models, /datasets[?search=TEXT&p=N] the catalog (:mod:`.listing`): both, models, datasets
    GET  /REPO                                  a model (:mod:`.modelpage`), a dataset (REPO: datasets/ORG/NAME)
    GET  /REPO/tree/{rev}[/{path}]              a directory of its files
    GET  /REPO/blob/{rev}/{path}                one file: text shown, else its size and a download link
    GET|POST /ocibridge/login                   the token form (with --token-file; :mod:`.auth`)
    GET  /ocibridge/static/style.css            the one stylesheet

A first path segment the API or serve keeps (``api``, ``xet``, ``ocibridge``, ...) is never a
page: such a path answers as it did before pages existed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ocibridge.hubserver.access import Denied, Gate, grant_of, reads
from ocibridge.hubserver.answers import in_thread, int_param, requested_repo
from ocibridge.hubserver.failures import CAUGHT, failure_of
from ocibridge.hubserver.repo.files import read_small
from ocibridge.hubserver.repo.reponames import hub_id
from ocibridge.hubserver.repo.sources import RepoNotFound, RevisionNotFound
from ocibridge.hubserver.routing import KEY_FORMS, HubRoute
from ocibridge.hubserver.web import auth, facts, render
from ocibridge.hubserver.web.listing import Listing
from ocibridge.hubserver.web.modelpage import ModelPages, ModelView
from ocibridge.kinds.hf.repotype import DATASET, MODEL
from ocibridge.oci.reference import RegistryReference

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Catalog, Resolved
    from ocibridge.hubserver.repo.files import ModelFiles
    from ocibridge.hubserver.settings import ServeSettings

log = logging.getLogger("ocibridge.hubserver")

Handler = Callable[[Request], Awaitable[Response]]
PAGE_METHODS = ("GET", "HEAD")
#: first path segments that are never a repository's page (the API's, serve's own)
RESERVED = frozenset({"api", "xet", "xet-write", "ocibridge", "healthz", "readyz", "metrics", "models", "static"})
#: REPO in a page's path: a dataset's datasets/ORG/NAME and datasets/NAME, then a model's ORG/NAME and
#: NAME (a key, repo/reponames.py, is the repository's web path)
REPO_FORMS = KEY_FORMS
#: models per catalog page
CATALOG_PAGE = 50
#: bytes of a file shown as text on its page (larger ones: a download link)
TEXT_MAX = 512 * 1024


_T = TypeVar("_T")


class Serving(Protocol):
    """What the pages use of app.py's ``ServeApp`` (a protocol: app.py imports this module)."""

    catalog: Catalog
    gate: Gate

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T: ...

    async def model(self, repo_id: str, revision: str | None, *,
                    reuse_for: float = 0) -> tuple[Resolved, ModelFiles]: ...

    async def not_found(self, request: Request) -> Response: ...

    def held_back(self, request: Request, repo_id: str) -> None: ...


class WebPages:
    """The pages, over what the API routes share (app.py's ``ServeApp``)."""

    def __init__(self, serve: Serving, settings: ServeSettings):
        self.serve = serve
        self.settings = settings
        self.public_url = settings.public_url
        self.gate = serve.gate
        self.listing = Listing(serve.catalog)
        self.models = ModelPages(serve.catalog, settings.quarantine)

    # -- plumbing ----------------------------------------------------------------------------
    def page(self, answer: Handler, *, repo_route: bool = False, files: bool = False) -> Handler:
        """``answer`` behind the page login, its errors as pages (never a traceback). ``files``:
        the page shows a file's bytes (a file, a diff), which a gated repository shows to its
        gate's readers only (:meth:`.access.Gate.may_fetch`; a visitor not signed in is sent to
        the login form)."""

        async def endpoint(request: Request) -> Response:
            if repo_route and self._reserved(request):
                return await self.serve.not_found(request)
            repo_id = None
            try:
                repo_id = requested_repo(request) if "name" in request.path_params else None
                if not self.gate.page_allowed(request, repo_id):  # one it may not read: missing (failures.py)
                    return auth.to_login(request)
                if files and repo_id is not None:
                    try:
                        await in_thread(self.gate.may_fetch, request, repo_id)
                    except Denied as refused:
                        if refused.status == 401:
                            return auth.to_login(request)
                        raise
                    await in_thread(self.serve.held_back, request, repo_id)  # serve --scan quarantine
                return await answer(request)
            except CAUGHT as e:  # the API's table (failures.py), answered as a page
                if isinstance(e, RepoNotFound) and self.gate.pages_need_login and grant_of(request) is None:
                    # a visitor not signed in: the login form, as for a private one (never a 404 that
                    # would tell a repository that is not there from one it may not see)
                    return auth.to_login(request)
                failure = failure_of(e, f"{request.method} {request.url.path}")
                return self.error(request, failure.status, failure.title, failure.message, failure.retry_after)

        return endpoint

    @staticmethod
    def _reserved(request: Request) -> bool:
        first = request.path_params.get("org", request.path_params.get("name", ""))
        return str(first).lower() in RESERVED

    def error(self, request: Request, status: int, title: str, detail: str, retry_after: int | None = None) -> Response:
        """An error page; ``retry_after``: a 503's Retry-After (a record not read: failures.py)."""
        later = {"Retry-After": str(retry_after)} if retry_after else None
        return render.page("error.html", status, later, title=title, detail=detail, **self.common(request))

    def common(self, request: Request) -> dict[str, Any]:
        """What every template is given."""
        return {"host": self.host(request)}

    def host(self, request: Request) -> str:
        """The URL clients reach serve at (``--public-url``, else the request's)."""
        return self.settings.base(str(request.base_url))

    def routes(self) -> list[BaseRoute]:
        """The page routes, to be tried after every API route."""
        pages: list[BaseRoute] = [
            Route(render.STYLE_PATH, self.stylesheet, methods=list(PAGE_METHODS)),
            Route(auth.LOGIN_PATH, self.login_form, methods=list(PAGE_METHODS)),
            Route(auth.LOGIN_PATH, self.login, methods=["POST"]),
            HubRoute("/", self.page(self.catalog), methods=PAGE_METHODS),
            HubRoute("/{repo_type:hub_api_type}", self.page(self.catalog), methods=PAGE_METHODS),
        ]
        for repo in REPO_FORMS:
            pages += [
                HubRoute(f"/{repo}/tree/{{revision:hub_part}}", self.page(self.tree, repo_route=True),
                         methods=PAGE_METHODS),
                HubRoute(f"/{repo}/tree/{{revision:hub_part}}/{{path:hub_rest}}",
                         self.page(self.tree, repo_route=True), methods=PAGE_METHODS),
                HubRoute(f"/{repo}/blob/{{revision:hub_part}}/{{path:hub_rest}}",
                         self.page(self.blob, repo_route=True, files=True), methods=PAGE_METHODS),
            ]
        pages += [HubRoute(f"/{repo}", self.page(self.model, repo_route=True), methods=PAGE_METHODS)
                  for repo in REPO_FORMS]
        return pages

    # -- pages -------------------------------------------------------------------------------
    async def stylesheet(self, request: Request) -> Response:
        return render.stylesheet()

    async def login_form(self, request: Request) -> Response:
        target = auth.local_target(request.query_params.get("next"))
        return render.page("login.html", failed=False, target=target, **self.common(request))

    async def login(self, request: Request) -> Response:
        fields = auth.form_fields(await request.body())
        target = auth.local_target(fields.get("next"))
        session = self.gate.session_for(fields.get("token", "").strip())
        if session is None:
            return render.page("login.html", 401, failed=True, target=target, **self.common(request))
        answer = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https" or (self.public_url or "").startswith("https:")
        auth.set_session(answer, session, secure)
        return answer

    async def catalog(self, request: Request) -> Response:
        search = (request.query_params.get("search") or "").strip()
        number = max(int_param(request.query_params.get("p")) or 1, 1)
        kind = request.path_params.get("repo_type")  # /models, /datasets: that type only (/: both)
        found = await self.serve._run(self.listing.page, search, number, CATALOG_PAGE, reads(request), kind)
        return render.page("catalog.html", search=search, found=found, default_tag=self.serve.catalog.default_tag,
                           noun=kind or MODEL, **self.common(request))

    async def model(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        notice = ""
        try:
            resolved, files = await self.serve.model(repo_id, None)
        except RevisionNotFound:
            # no main (the default tag): the page of its newest tag, saying so, rather than a dead
            # end listing names (a repository pushed with only v1)
            newest = await self.serve._run(self.listing.tag_of, repo_id)
            if newest is None or newest == self.serve.catalog.default_tag:
                raise
            resolved, files = await self.serve.model(repo_id, newest)
            notice = (f"{repo_id} has no revision main (serve's main is the tag {self.serve.catalog.default_tag}, "
                      f"which it lacks): this is {newest}, its newest tag. Its tags are listed below; ask for one "
                      f"with revision='TAG', or run serve with --default-tag TAG.")
        view = await self.serve._run(self.models.view, resolved, files)
        gate = await self.serve._run(self.serve.catalog.states.gated, view.repo_id)  # its terms shown with it
        return render.page("model.html", view=view, snippets=self.snippets(request, view), notice=notice, gate=gate,
                           extra_links=self.model_links(view), **self.common(request))

    def model_links(self, view: ModelView) -> list[tuple[str, str]]:
        """More links of a model page's navigation (history, compare: other pages add theirs here)."""
        return [("History", f"/{view.repo_id}/commits/{quote(view.revision, safe='')}")]

    def snippets(self, request: Request, view: ModelView) -> list[tuple[str, str]]:
        """Copy-ready commands with this server's URL and the model's real reference."""
        host = self.host(request)
        repo, resolved = hub_id(view.repo_id), view.resolved
        revision = "" if view.revision == "main" else f", revision={view.revision!r}"
        token = "HF_TOKEN=YOUR_TOKEN " if self.gate.pages_need_login else ""
        where = resolved.repo.located(resolved.tag, resolved.top.digest)
        ref = str(where) if where is not None else resolved.repo.shown
        if view.noun == DATASET:
            load = ("datasets (through this server)",
                    f"{token}HF_ENDPOINT={host} python -c \"from datasets import load_dataset; "
                    f"print(load_dataset({repo!r}{revision}))\"")
            kind = ", repo_type='dataset'"
        else:
            load = ("Transformers (through this server)",
                    f"{token}HF_ENDPOINT={host} python -c \"from transformers import AutoConfig; "
                    f"print(AutoConfig.from_pretrained({repo!r}{revision}))\"")
            kind = ""
        out = [load,
               ("huggingface_hub (every file, into the Hub cache)",
                f"{token}HF_ENDPOINT={host} python -c \"from huggingface_hub import snapshot_download; "
                f"print(snapshot_download({repo!r}{revision}{kind}))\""),
               ("ocibridge pull", f"ocibridge pull {ref} -o {repo.rsplit('/', 1)[-1]}")]
        if isinstance(where, RegistryReference):
            out.append(("Kubernetes image volume", f"ocibridge k8s volume {ref}"))
        return out

    async def tree(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params.get("path", "").strip("/")
        resolved, files = await self.serve.model(repo, revision)
        dirs = files.directories()
        if path and path not in dirs:
            return self.error(request, 404, "No such directory", f"{repo}@{revision}: no directory {path}")
        head = f"{path}/" if path else ""
        subdirs = sorted(d for d in dirs if d.startswith(head) and "/" not in d[len(head):])
        rows = await self.serve._run(self.models.file_rows, resolved, files)
        inside = [f for f in rows if f.path.startswith(head) and "/" not in f.path[len(head):]]
        return render.page("tree.html", repo=repo, revision=revision, path=path, dirs=subdirs, files=inside,
                           commit=resolved.commit, **self.common(request))

    async def blob(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params["path"].strip("/")
        resolved, files = await self.serve.model(repo, revision)
        f = files.files.get(path)
        if f is None:
            return self.error(request, 404, "No such file", f"{repo}@{revision}: no file {path}")
        download = f"/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"
        data = await self.serve._run(read_small, resolved, f, TEXT_MAX)
        text = as_text(data)
        return render.page("blob.html", repo=repo, revision=revision, path=path, file=f, download=download,
                           text=text, kind=facts.layer_kind(f.layer), too_large=f.size > TEXT_MAX,
                           **self.common(request))


def as_text(data: bytes | None) -> str | None:
    """``data`` as text to show, None when it is no text (not UTF-8, or a NUL in it)."""
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
