"""LFS files of one repository made another's to commit (huggingface_hub's cross-repository
``copy_files``): the Hub's duplicate route, asked of the source repository before a commit of the
target names the files by their SHA-256.

    POST /api/models/REPO/lfs-files/duplicate   {target: {type, name}, files: [{sha256, ...}]}

Serve copies nothing here: a commit's ``lfsFile`` naming another repository's blob mounts it
there already, when the writer could download it from that repository (:mod:`.repo.mountable`).
This route answers that same question per file ahead of the commit, so a file the writer may not
take, or that no served revision of the source holds, is named in ``failed`` as the Hub names it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import NOT_JSON, error, in_thread, is_sha256, json_body, requested_repo
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.mountable import admitted
from ocibridge.hubserver.repo.reponames import API_PARTS, key_of
from ocibridge.hubserver.writeaccess import Writers

#: files one request names at most (huggingface_hub sends them in batches of 100)
FILES_MAX = 1000

_SHAPE = ("expected {'target': {'type': 'model' or 'dataset', 'name': REPO_ID}, "
          f"'files': [at most {FILES_MAX} {{'sha256': SHA256, ...}}]}}")


class LfsDuplicate:
    """The duplicate route: the target's writer (``writers``), the served revisions (``catalog``)."""

    def __init__(self, writers: Writers, catalog: Catalog):
        self.writers = writers
        self.catalog = catalog

    async def duplicate(self, request: Request) -> Response:
        source = requested_repo(request)
        body = await json_body(request)
        target = body.get("target") if isinstance(body, dict) and body is not NOT_JSON else None
        files = body.get("files") if isinstance(body, dict) and body is not NOT_JSON else None
        if not isinstance(target, dict) or target.get("type") not in API_PARTS \
                or not isinstance(target.get("name"), str) or not isinstance(files, list) \
                or len(files) > FILES_MAX \
                or not all(isinstance(f, dict) and is_sha256(f.get("sha256")) for f in files):
            return error(400, None, _SHAPE)
        grant = self.writers.writer(request, key_of(target["type"], target["name"]))
        author = self.writers.author(grant)

        def failures() -> list[dict[str, str]]:
            failed = []
            for sha256 in dict.fromkeys(str(f["sha256"]) for f in files):
                if not admitted(self.catalog, author, sha256)(source):
                    failed.append({"sha256": sha256, "error": f"no revision of {source} you may read holds it"})
            return failed

        return JSONResponse({"failed": await in_thread(failures)})
