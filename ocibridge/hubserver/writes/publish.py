"""The Hub's write API (huggingface_hub's hf_api.py create_repo / create_commit / upload_folder,
_commit_api.py, lfs.py): the repository and commit routes, and uploads over LFS (what
``HF_HUB_DISABLE_XET=1`` clients send; uploads over Xet are :mod:`.xetupload`'s, into the same
:class:`.Staging`, so a commit takes a staged SHA-256 however it arrived).

    GET  /api/whoami-v2                                 the token's name and scope (hf auth whoami)
    POST /api/repos/create                              create_repo (models only; 409 when it exists)
    POST /api/validate-yaml                             a README's metadata: accepted as it is
    POST /api/models/REPO/preupload/{rev}               upload mode of each file, and the oid the
                                                        branch holds for it (unchanged: skipped)
    POST /REPO.git/info/lfs/objects/batch               LFS batch (basic): where to PUT each object
    PUT  /ocibridge/lfs/{sha256}/{size}/{repo}?signed   the object's bytes, into :class:`.Staging`
                                                        (and on to the registry as they come: .relay)
    POST /ocibridge/lfs/verify                          the object was received and verified
    POST /api/models/REPO/commit/{rev}                  the commit (:mod:`.commits`): a new manifest

Every write needs a write token of ``--token-file`` (:mod:`.grants`): none sent or unknown is
the Hub's 401, a read token or another repository's is 403. The PUT carries no header (the
client sends none to an upload URL): its URL is signed for that object and size, for an hour.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ocibridge.chunks import chunkcache
from ocibridge.chunks.chunking import ChunkHasher
from ocibridge.chunks.table import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD, LayerChunks
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.hubserver.access import Grant, find
from ocibridge.hubserver.answers import bearer, error, number, requested_repo
from ocibridge.hubserver.guard import UPLOADS
from ocibridge.hubserver.reading.files import FileLists
from ocibridge.hubserver.reading.sources import (
    COMMIT,
    CREATED,
    Catalog,
    RegistrySource,
    RepoNotFound,
    Resolved,
    RevisionNotFound,
    commit_of,
    repo_parts,
)
from ocibridge.hubserver.settings import PartPolicy
from ocibridge.hubserver.uploads import relay as relay_mod
from ocibridge.hubserver.uploads.mounts import Mounts
from ocibridge.hubserver.uploads.multipart import Multipart
from ocibridge.hubserver.uploads.staging import Staging, StagingFull
from ocibridge.hubserver.writes import commits
from ocibridge.hubserver.writes.created import CreatedRepos
from ocibridge.hubserver.xet.xorbs import Grants
from ocibridge.oci.reference import check_tag
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")

#: where LFS objects are PUT (the guard lets bodies of this path be as large as they say)
UPLOAD_PATH = UPLOADS
LFS_TYPE = "application/vnd.git-lfs+json"
#: bytes of an upload written to its file at once
WRITE_PIECE = 1024 * 1024
_T = TypeVar("_T")
_HEX64 = frozenset("0123456789abcdef")


def _is_sha256(text: object) -> bool:
    return isinstance(text, str) and len(text) == 64 and set(text) <= _HEX64


class PublishRoutes:
    """The write routes' endpoints (app.py places them in its one route table)."""

    def __init__(self, catalog: Catalog, lists: FileLists, staging: Staging, grants: Sequence[Grant],
                 publish: commits.Publish | None, public_url: str | None, parts: PartPolicy | None = None):
        self.catalog = catalog
        self.lists = lists
        self.staging = staging
        self.grants = list(grants)
        self.publish = publish
        self.public_url = public_url
        self.signer = Grants([g.token.encode() for g in self.grants if g.write])
        self.multipart = Multipart(staging, self.signer, parts or PartPolicy())  # large files, in parts
        self.branches = commits.Branches()
        source = catalog.sources[0] if catalog.sources else None
        self.mounts = Mounts(source if isinstance(source, RegistrySource) else None)  # unchanged files
        self.created = CreatedRepos(staging.root.parent / "created")  # made, not committed to yet

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    def _base(self, request: Request) -> str:
        return self.public_url or str(request.base_url).rstrip("/")

    # -- who may write -------------------------------------------------------------------------
    def writer(self, request: Request, repo_id: str | None) -> Grant | Response:
        """The write grant of the request's token for ``repo_id`` (None: any), or the Hub's 401/403."""
        given = bearer(request)
        grant = find(self.grants, given)
        if grant is None:
            if not any(g.write for g in self.grants):
                return error(401, None, "writes need a write token: serve's --token-file holds none "
                             "(a line 'TOKEN write [REPO-PREFIX]', docs/serve.md)")
            return error(401, None, "no token was sent: writes need 'Authorization: Bearer TOKEN'" if not given
                         else "Invalid credentials in Authorization header")
        if not grant.write:
            return error(403, None, "You don't have the rights to write here: this token reads only")
        if repo_id is not None and not grant.may_write(repo_id):
            return error(403, None, f"You don't have the rights to write to {repo_id}: this token writes "
                         f"repositories under {grant.prefix!r}")
        return grant

    async def whoami(self, request: Request) -> Response:
        grant = find(self.grants, bearer(request))
        if grant is None:
            return error(401, None, "Invalid user token." if bearer(request) else "no token was sent")
        return JSONResponse(grant.whoami())

    # -- repositories --------------------------------------------------------------------------
    def _head(self, repo_id: str, branch: str) -> Resolved | None:
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
        return _branch(revision) == "main" and self.created.has(repo_id)

    async def create_repo(self, request: Request) -> Response:
        body = await _json(request)
        if body is _NOT_JSON:
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
        allowed = self.writer(request, repo_id)
        if isinstance(allowed, Response):
            return allowed
        url = f"{self._base(request)}/{repo_id}"
        if await self._run(self._exists, repo_id):
            return JSONResponse({"error": "You already created this model repo", "url": url}, status_code=409,
                                headers={"X-Error-Message": "You already created this model repo"})
        await self._run(self.created.add, repo_id)
        return JSONResponse({"url": url, "name": repo_id})

    async def validate_yaml(self, request: Request) -> Response:
        return JSONResponse({"errors": [], "warnings": []})

    # -- uploads -------------------------------------------------------------------------------
    async def _branch_files(self, repo_id: str, branch: str) -> dict[str, str]:
        """path -> sha256 of the branch's head ({} when it has none yet)."""
        head = await self._run(self._head, repo_id, branch)
        if head is None:
            return {}
        files = await self._run(self.lists.of, head)
        return {path: f.sha256 for path, f in files.files.items()}

    async def _written_list(self, request: Request, key: str, expected: str) -> tuple[str, dict[str, Any],
                                                                                   list[Any]] | Response:
        """The repository a listing write names (preupload's files, a batch's objects), once the
        token may write it, with the JSON body and its list under ``key``; else the Hub's error."""
        repo_id = requested_repo(request)
        allowed = self.writer(request, repo_id)
        if isinstance(allowed, Response):
            return allowed
        read = await _listed(request, key, expected)
        return read if isinstance(read, Response) else (repo_id, *read)

    async def preupload(self, request: Request) -> Response:
        read = await self._written_list(request, "files", "expected {'files': [{'path', 'size', 'sample'}, ...]}")
        if isinstance(read, Response):
            return read
        repo_id, _, asked = read
        held = await self._branch_files(repo_id, _branch(request.path_params["revision"]))
        answered = []
        for item in asked:
            if not isinstance(item, dict):
                return error(400, None, "expected {'files': [{'path', 'size', 'sample'}, ...]}")
            try:
                path = commits.clean_path(item.get("path"))
            except commits.BadCommit as e:
                return error(400, "BadRequest", str(e))
            size = item.get("size")
            lfs = isinstance(size, int) and size > 0  # every non-empty file is an LFS object: a layer
            answer: dict[str, Any] = {"path": item["path"], "uploadMode": "lfs" if lfs else "regular",
                                      "shouldIgnore": False}
            if lfs and path in held:
                answer["oid"] = held[path]
            answered.append(answer)
        return JSONResponse({"files": answered, "commitOid": None})

    async def lfs_batch(self, request: Request) -> Response:
        read = await self._written_list(request, "objects", "expected an LFS batch request")
        if isinstance(read, Response):
            return read
        repo_id, body, objects = read
        if body.get("operation") != "upload":
            return error(400, None, "serve's LFS batch API takes uploads (downloads: the resolve API)")
        ref = body.get("ref")
        name = ref.get("name") if isinstance(ref, dict) else None
        branch = _branch(name) if isinstance(name, str) else "main"
        held = set((await self._branch_files(repo_id, branch)).values())
        wanted = {o["oid"]: o["size"] for o in objects if isinstance(o, dict) and _is_sha256(o.get("oid"))
                  and isinstance(o.get("size"), int) and o["size"] >= 0 and o["oid"] not in held}
        staged = {oid for oid in wanted  # here already, and uploaded for repo_id (Staging.pinned)
                  if await self._run(self._uploaded, repo_id, oid) and await self._run(self.staging.pin, oid, repo_id)}
        full = await self._run(self.staging.room_for, sum(s for oid, s in wanted.items() if oid not in staged))
        if full:  # git-lfs's batch API: 507, the server has no room for the objects
            await self._run(self.staging.unpin, staged, repo_id)
            return error(507, None, full)
        base = self._base(request)
        expires = self.signer.expiry()
        answered: list[dict[str, Any]] = []
        in_parts = "multipart" in (body.get("transfers") or ["basic"])  # huggingface_hub offers both
        for item in objects:
            oid, size = (item.get("oid"), item.get("size")) if isinstance(item, dict) else (None, None)
            if not _is_sha256(oid) or not isinstance(size, int) or size < 0:
                answered.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                                 "error": {"code": 422, "message": "expected a sha256 oid and a size"}})
                continue
            if oid in held or oid in staged or \
                    await self._run(self.mounts.home, repo_id, oid) is not None:  # mounted at the commit
                answered.append({"oid": oid, "size": size})  # no actions: the client skips it
                continue
            path = _upload_path(str(oid), str(size), repo_id)
            upload = self.multipart.action(base, str(oid), size, repo_id, expires) if in_parts else None
            answered.append({"oid": oid, "size": size, "authenticated": True, "actions": {
                "upload": upload or {"href": base + self.signer.signed(path, expires), "expires_in": 3600},
                "verify": {"href": f"{base}{UPLOAD_PATH}verify", "header": {}},
            }})
        transfer = "multipart" if any("chunk_size" in a.get("actions", {}).get("upload", {}).get("header", {})
                                      for a in answered) else "basic"
        return JSONResponse({"transfer": transfer, "objects": answered, "hash_algo": "sha256"},
                            media_type=LFS_TYPE)

    async def lfs_put(self, request: Request) -> Response:
        params_ = request.path_params
        oid, size, repo_id = params_["oid"], number(params_["size"]), params_["repo"]
        params = request.query_params
        path = _upload_path(oid, params_["size"], repo_id)
        if not self.signer.key or not self.signer.url_allowed(path, params.get("expires"), params.get("signature"),
                                                              params.get("client", "")):
            return error(403, None, "this upload URL is not signed by serve, or has expired: ask the batch API again")
        if not _is_sha256(oid) or size is None:
            return error(400, None, "expected /ocibridge/lfs/SHA256/SIZE/REPO")
        try:
            with self.staging.reserve(size, repo_id):
                return await self._receive(request, oid, size, repo_id)
        except StagingFull as e:
            return error(507, None, str(e))

    async def _receive(self, request: Request, oid: str, size: int, repo_id: str) -> Response:
        """The bytes of one LFS PUT into staging, checked against ``oid`` (room reserved)."""
        with self.staging.new_file() as (tmp, fd):
            relay = self.relay_for(repo_id, oid, size, tmp)
            # the chunk table push binds for a file this large, made from the bytes as they come
            chunks = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False) if size >= PUSH_THRESHOLD else None
            digest = hashlib.sha256()  # of the bytes as they are written: staging need not read them again
            whole = False
            try:
                written = 0
                pending: list[bytes] = []
                async for piece in request.stream():
                    pending.append(piece)
                    written += len(piece)
                    if written > size:
                        return error(400, None, f"the upload is larger than the {size} bytes it was granted")
                    if sum(map(len, pending)) >= WRITE_PIECE:  # one thread hop a MiB, not one a read
                        await self._run(_write_all, fd, b"".join(pending), chunks, digest)
                        pending.clear()
                        if relay is not None:
                            relay.follow.grew(written)
                await self._run(_write_all, fd, b"".join(pending), chunks, digest)
                if written != size:
                    return error(400, None, f"the upload is {written} bytes, not the {size} it was granted")
                whole = True
                if relay is not None:
                    relay.follow.grew(written)
                try:
                    await self._run(partial(self.staging.commit_file, tmp, oid, hashed=digest.hexdigest()))
                except DigestMismatch as e:
                    return error(400, None, str(e))
                await self._run(self.staging.pin, oid, repo_id)  # its commit gives it back
                if chunks is not None:  # the bytes hashed to the oid: their table is a fact of it
                    chunkcache.remember(LayerChunks(f"sha256:{oid}", size, chunks.finish()), DEFAULT_CHUNK_SIZE)
            except ClientDisconnect:
                log.info("an upload of sha256:%s was abandoned after %d of %d bytes", oid, written, size)
                return error(400, None, "the client left before the upload ended")
            finally:
                if relay is not None:
                    if not whole:
                        relay.follow.fail("the upload ended before its last byte")
                    await self._run(relay.wait)
        return Response(status_code=200)

    def relay_for(self, repo_id: str, oid: str, size: int, tmp: Path) -> relay_mod.Relay | None:
        """A relay of a large upload to the registry repository its commit will push to (the
        first source's), when that is a registry."""
        parts = repo_parts(repo_id)
        source = self.catalog.sources[0]
        if size < relay_mod.RELAY_MIN or parts is None or not isinstance(source, RegistrySource):
            return None
        repo = source.repository(parts)
        if repo is None or not isinstance(repo.store, WritableStore):
            return None
        return relay_mod.Relay(repo.store, oid, size, tmp)

    async def lfs_verify(self, request: Request) -> Response:
        allowed = self.writer(request, None)
        if isinstance(allowed, Response):
            return allowed
        try:
            body = await _json(request)
            oid, size = body["oid"], body["size"]
        except (KeyError, TypeError):
            return error(400, None, "expected {'oid', 'size'}")
        mine = isinstance(oid, str) and await self._run(self.staging.pinned_by, oid, allowed.may_write)
        found = await self._run(self.staging.path_for, oid) if mine and isinstance(oid, str) else None
        if found is None or found.stat().st_size != size:
            return error(404, None, f"no verified upload of sha256:{oid} ({size} bytes)")
        return JSONResponse({"message": "verified"})

    # -- commits -------------------------------------------------------------------------------
    async def commit(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        allowed = self.writer(request, repo_id)
        if isinstance(allowed, Response):
            return allowed
        if self.publish is None:
            return error(403, None, "this serve does not publish (its application was built without push)")
        if request.query_params.get("create_pr") in ("1", "true"):
            return error(400, None, "serve makes no pull requests: commit to a branch")
        branch = _branch(request.path_params["revision"])
        if COMMIT.fullmatch(branch.lower()):
            return error(400, "BadRequest", f"Invalid rev id: {branch}: a commit id names no branch to commit to")
        try:
            payload = commits.read_payload(await request.body())
            check_tag(self.catalog.default_tag if branch == "main" else branch)
        except commits.BadCommit as e:
            return error(400, "BadRequest", str(e))
        except OcibridgeError as e:
            return error(400, "BadRequest", f"{branch}: not a branch serve can write: {e}")
        try:
            for content in payload.inline.values():
                await self._run(self._stage_bytes, repo_id, content)
        except StagingFull as e:
            return error(507, None, str(e))
        try:
            oid = await self._run(self._commit, repo_id, branch, payload, allowed)
        except commits.StaleParent as e:
            return error(412, None, str(e))
        except commits.MissingEntry as e:
            return error(404, "EntryNotFound", str(e))
        except (commits.BadCommit, commits.UnknownContent) as e:
            return error(400 if isinstance(e, commits.BadCommit) else 422, "BadRequest", str(e))
        url = f"{self._base(request)}/{repo_id}/commit/{oid}"
        return JSONResponse({"success": True, "commitOid": oid, "commitUrl": url, "pullRequestUrl": None})

    def _stage_bytes(self, repo_id: str, content: bytes) -> None:
        sha = hashlib.sha256(content).hexdigest()
        if self.staging.pin(sha, repo_id):
            return
        with self.staging.reserve(len(content), repo_id), self.staging.new_file() as (tmp, fd):
            _write_all(fd, content)
            self.staging.commit_file(tmp, sha)
        self.staging.pin(sha, repo_id)

    def _uploaded(self, repo_id: str, sha256: str) -> bool:
        """Whether ``sha256`` is staged for ``repo_id``: uploaded for it (:meth:`.Staging.pinned`); a file
        staged for another repository only is neither answered as held nor committed here."""
        return self.staging.pinned(sha256, repo_id) and self.staging.has(sha256)

    def _commit(self, repo_id: str, branch: str, payload: commits.CommitRequest, grant: Grant) -> str:
        """Build and push the commit, the branch locked; its commit oid."""
        assert self.publish is not None
        with self.branches.lock(repo_id, branch):
            head = self._head(repo_id, branch)
            if payload.parent is not None and (head is None or head.commit != payload.parent[:40].lower()):
                raise commits.StaleParent(f"A commit has happened since: {branch} is at "
                                          f"{head.commit if head else 'no commit'}, not {payload.parent}. "
                                          "Please refresh and try again.")
            parent: dict[str, str] = {}
            held: Callable[[str], Path] = _nothing
            if head is not None:
                files = self.lists.of(head)
                parent = {path: f.sha256 for path, f in files.files.items()}
                held = _Held(self.lists, head, files.files).path
            tree = commits.new_tree(parent, payload, self._staged_or_mounted(repo_id, payload), held)
            parts = repo_parts(repo_id)
            repo = head.repo if head is not None else self.catalog.sources[0].repository(parts or [])
            if repo is None:
                raise RepoNotFound(f"{repo_id}: no source can hold it")
            tag = self.catalog.default_tag if branch == "main" else branch
            dest = repo.located(tag, "")
            if dest is None:
                raise commits.BadCommit(f"{repo.shown}: not a place serve can push to")
            annotations = {commits.SUMMARY: payload.summary or "Upload files", commits.AUTHOR: grant.name,
                           CREATED: _now()}
            if payload.description:
                annotations[commits.DESCRIPTION] = payload.description
            if head is not None:
                annotations[commits.PARENT] = head.top.digest  # the digest: the walk needs no tag
            with commits.linked_tree(tree, self.staging.root / "commits", (parts or [repo_id])[-1]) as directory:
                _known_digests(directory, tree)
                digest = self.publish(directory, dest, annotations)
            self.created.discard(repo_id)
            # the commit has landed: what it took from staging goes, unless another flow may name it
            named = [a.sha256 for a in payload.added] + [hashlib.sha256(c).hexdigest() for c in payload.inline.values()]
            self.staging.release(named, repo_id)
            log.info("%s: %s committed %s as %s", repo_id, grant.name, branch, digest)
            return commit_of(digest)


    def _staged_or_mounted(self, repo_id: str, payload: commits.CommitRequest) -> Callable[[str], Path | None]:
        """The upload of a SHA-256 staged for ``repo_id``, else the blob another repository holds
        (:mod:`.mounts`), read into staging so push builds its layer, and mounts it rather than
        sends it. A file staged for another repository only is neither: its writer never
        committed it, so naming its SHA-256 gives nobody else its bytes (:meth:`.Staging.pinned`)."""
        sizes = {added.sha256: added.size for added in payload.added}

        def staged(sha256: str) -> Path | None:
            found = self.staging.path_for(sha256) if self.staging.pinned(sha256, repo_id) else None
            if found is None and self.mounts.fetch(repo_id, sha256, sizes.get(sha256), self.staging):
                found = self.staging.path_for(sha256)
            return found

        return staged

    # -- history, branches and tags ------------------------------------------------------------
    async def list_commits(self, request: Request) -> Response:
        from ocibridge.hubserver.writes.history import commits as history

        head = await self._run(self.catalog.resolve, requested_repo(request), request.path_params["revision"])
        return JSONResponse(await self._run(history, head))

    async def create_ref(self, request: Request) -> Response:
        """``create_branch`` (``/branch/{name}``, from ``startingPoint``) and ``create_tag``
        (``/tag/{revision}``, named ``tag``): the registry's tag of that name on the manifest."""
        repo_id = requested_repo(request)
        allowed = self.writer(request, repo_id)
        if isinstance(allowed, Response):
            return allowed
        body = await _json(request) if await request.body() else {}
        if not isinstance(body, dict):
            return error(400, None, "expected a JSON object")
        name: object
        start: object
        if request.path_params["kind"] == "branch":
            name, start = _branch(request.path_params["ref"]), body.get("startingPoint") or "main"
        else:
            name, start = body.get("tag"), request.path_params["ref"]
        if not isinstance(name, str) or not isinstance(start, str):
            return error(400, None, "expected a name and a revision")
        tag = self.catalog.default_tag if name == "main" else name
        if COMMIT.fullmatch(name.lower()):  # a ref the commit ids of the read API would hide
            return error(400, "BadRequest", f"Invalid reference name: {name}: it reads as a commit id")
        try:
            check_tag(tag)
        except OcibridgeError as e:
            return error(400, "BadRequest", f"{name}: not a name a registry tag can have: {e}")
        if not await self._run(self._create_ref, repo_id, name, start, tag):
            return error(409, None, f"Reference already exists: {name}")
        return JSONResponse({})

    def _create_ref(self, repo_id: str, name: str, start: str, tag: str) -> bool:
        """Tag ``start`` as ``tag`` unless ``name`` exists (False), the ref locked as a commit to
        it is: two creates of one name at once are one 200 and one 409, never the second moving
        the first's ref, and a commit to it waits until it is made."""
        with self.branches.lock(repo_id, name):
            try:
                self.catalog.resolve(repo_id, name)
            except RevisionNotFound:
                pass
            else:
                return False
            _tag(self.catalog.resolve(repo_id, start), tag)
            return True

    async def refused(self, request: Request) -> Response:
        """What serve does not do to a registry: delete tags (most registries delete a manifest,
        every tag of it with it) or repositories."""
        allowed = self.writer(request, None)
        if isinstance(allowed, Response):
            return allowed
        return error(405, None, "serve deletes no tags, branches or repositories: a registry's own tools do "
                     "(docs/serve.md, Publishing)")


def _tag(source: Resolved, tag: str) -> None:
    from ocibridge.stores.base import WritableStore
    from ocibridge.transfer.writer import retag

    store = source.repo.store
    if not isinstance(store, WritableStore):
        raise commits.BadCommit(f"{source.repo.shown}: not a store serve can tag")
    retag(store, source.top, [source.repo.reference(tag)])  # the one writer: a tag is a manifest write


def _now() -> str:
    import datetime

    moment = datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class _Held:
    """The local bytes of a branch's files: the snapshot of its manifest, made when first needed."""

    def __init__(self, lists: FileLists, head: Resolved, files: dict[str, Any]):
        self.lists, self.head, self.files = lists, head, files
        self._root: Path | None = None

    def path(self, rel: str) -> Path:
        local = self.files[rel].local
        if local is not None:
            return Path(local)
        if self._root is None:
            snap = self.lists.cache.snapshot(self.head.repo.store, self.head.model.digest,
                                             shown=self.head.model.digest, concurrency=self.lists.concurrency)
            self._root = snap.path
        return self._root / rel


def _known_digests(directory: Path, tree: dict[str, commits.Source]) -> None:
    """Tell push the digest of each file of the commit (verified already: an upload by staging,
    a branch's file by the model cache), so it reads none of them to hash it again: push's
    digest cache, keyed by the link's own path and identity (taken once every link is made)."""
    from ocibridge.model import digestcache

    for rel, source in tree.items():
        digestcache.remember(directory / rel, f"sha256:{source.sha256}")


def _nothing(rel: str) -> Path:
    raise commits.UnknownContent(f"{rel}: not in the branch")


def _branch(revision: str) -> str:
    """The branch a revision names (``refs/heads/x`` is ``x``)."""
    return revision.removeprefix("refs/heads/") or "main"


def _upload_path(oid: str, size: str, repo_id: str) -> str:
    """Where an LFS object is PUT: its oid, size and repository (one segment), which the URL's
    signature covers."""
    return f"{UPLOAD_PATH}{oid}/{size}/{quote(repo_id, safe='')}"


def _write_all(fd: int, data: bytes, chunks: ChunkHasher | None = None, whole: Any = None) -> None:
    """Write ``data`` to ``fd`` whole; ``chunks`` and ``whole`` (a hashlib object) see it too."""
    if chunks is not None:
        chunks.update(data)
    if whole is not None:
        whole.update(data)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


#: what :func:`_json` gives for a body that is not JSON
_NOT_JSON = object()


async def _json(request: Request) -> Any:
    """The request's JSON body, or :data:`_NOT_JSON` (nested too deep for the parser too: a
    RecursionError is no ValueError, and would be a 500 with a traceback in serve's log)."""
    try:
        return await request.json()
    except (ValueError, RecursionError):
        return _NOT_JSON


async def _listed(request: Request, key: str, expected: str) -> tuple[dict[str, Any], list[Any]] | Response:
    """A JSON body and the list under ``key`` (preupload's files, a batch's objects), else the
    400 that says what was expected."""
    try:
        body = await _json(request)
        items = body[key]
    except (KeyError, TypeError):
        return error(400, None, expected)
    if not isinstance(body, dict) or not isinstance(items, list):
        return error(400, None, expected)
    return body, items
