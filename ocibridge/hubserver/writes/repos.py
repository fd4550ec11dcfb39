"""The Hub's repository routes of the write API (huggingface_hub's hf_api.py), and what every
write route shares: the sources, staging, who may write, the branches' locks, the repositories
made here without a commit yet.

    GET    /api/whoami-v2                  the token's name and scope (hf auth whoami)
    POST   /api/repos/create               create_repo (models only; 409 when it exists)
    POST   /api/validate-yaml              a README's metadata: accepted as it is
    DELETE /api/repos/delete, .../branch|tag/{ref}   refused: a registry's own tools delete

Every write needs a write token of ``--token-file`` (:class:`.access.Gate`): none sent or unknown
is the Hub's 401, a read token or another repository's is 403.
"""

from __future__ import annotations

from typing import TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.access import Access, Gate, Grant
from ocibridge.hubserver.answers import NOT_JSON, branch_of, error, in_thread, json_body
from ocibridge.hubserver.reading.catalog import Catalog, Resolved
from ocibridge.hubserver.reading.files import FileLists
from ocibridge.hubserver.reading.sources import RegistrySource, RepoNotFound, RevisionNotFound, repo_parts
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.uploads.mounts import Mounts
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.writes.commits import Branches
from ocibridge.hubserver.writes.created import CreatedRepos

_T = TypeVar("_T")


class Repos:
    """What the write routes share, and the repository routes themselves."""

    def __init__(self, catalog: Catalog, lists: FileLists, staging: Staging, gate: Gate, settings: ServeSettings):
        self.catalog = catalog
        self.lists = lists
        self.staging = staging
        self.gate = gate
        self.settings = settings
        self.branches = Branches()  # one lock a branch: commits and ref creations take it
        source = catalog.sources[0] if catalog.sources else None
        self.mounts = Mounts(source if isinstance(source, RegistrySource) else None)  # unchanged files
        self.created = CreatedRepos(staging.root.parent / "created")  # made, not committed to yet

    def base(self, request: Request) -> str:
        return self.settings.base(str(request.base_url))

    def writer(self, request: Request, repo_id: str | None) -> Grant:
        """The write grant of the request's token for ``repo_id`` (None: any); raises
        :class:`.access.Denied`."""
        grant = self.gate.require(request, repo_id, Access.WRITE)
        assert grant is not None  # a write always names its writer
        return grant

    def uploaded(self, repo_id: str, sha256: str) -> bool:
        """Whether ``sha256`` is staged for ``repo_id``: uploaded for it (:meth:`.Staging.pinned`); a file
        staged for another repository only is neither answered as held nor committed here."""
        return self.staging.pinned(sha256, repo_id) and self.staging.has(sha256)

    # -- what a branch holds -------------------------------------------------------------------
    def head(self, repo_id: str, branch: str) -> Resolved | None:
        """The branch's head; None when the repository exists (or was created here) without it."""
        try:
            return self.catalog.resolve(repo_id, branch)
        except RevisionNotFound:
            if branch == "main":
                return None
            raise
        except RepoNotFound:
            if branch == "main" and self.created.has(repo_id):
                return None
            raise

    async def branch_files(self, repo_id: str, branch: str) -> dict[str, str]:
        """path -> sha256 of the branch's head ({} when it has none yet)."""
        head = await in_thread(self.head, repo_id, branch)
        if head is None:
            return {}
        files = await in_thread(self.lists.of, head)
        return {path: f.sha256 for path, f in files.files.items()}

    def _exists(self, repo_id: str) -> bool:
        try:
            self.catalog.resolve(repo_id, "main")
        except RevisionNotFound:
            return True
        except RepoNotFound:
            return self.created.has(repo_id)
        return True

    def created_empty(self, repo_id: str, revision: str) -> bool:
        """``repo_id`` was made by ``create_repo`` here and ``revision`` is its (commit-less) main."""
        return branch_of(revision) == "main" and self.created.has(repo_id)

    # -- routes --------------------------------------------------------------------------------
    async def whoami(self, request: Request) -> Response:
        return JSONResponse(self.gate.who(request).whoami())

    async def create_repo(self, request: Request) -> Response:
        body = await json_body(request)
        if body is NOT_JSON:
            return error(400, None, "expected a JSON body")
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return error(400, None, "expected {'name': ..., 'organization': ...}")
        kind = body.get("type") or "model"
        if kind != "model":
            return error(400, None, f"serve publishes models only: a {kind} repository is refused "
                         "(datasets and spaces are not OCI models)")
        org = body.get("organization")
        repo_id = f"{org}/{body['name']}" if isinstance(org, str) and org else body["name"]
        if repo_parts(repo_id) is None or self.catalog.sources[0].repository(repo_parts(repo_id) or []) is None:
            return error(400, None, f"Invalid repo name: {repo_id}")
        self.writer(request, repo_id)
        url = f"{self.base(request)}/{repo_id}"
        if await in_thread(self._exists, repo_id):
            return JSONResponse({"error": "You already created this model repo", "url": url}, status_code=409,
                                headers={"X-Error-Message": "You already created this model repo"})
        await in_thread(self.created.add, repo_id)
        return JSONResponse({"url": url, "name": repo_id})

    async def validate_yaml(self, request: Request) -> Response:
        return JSONResponse({"errors": [], "warnings": []})

    async def refused(self, request: Request) -> Response:
        """What serve does not do to a registry: delete tags (most registries delete a manifest,
        every tag of it with it) or repositories."""
        self.writer(request, None)
        return error(405, None, "serve deletes no tags, branches or repositories: a registry's own tools do "
                     "(docs/serve.md, Publishing)")
