"""The Hub's JSON shapes, as huggingface_hub's ``ModelInfo``, ``RepoFile`` and ``RepoFolder``
read them (facts from its hf_api.py).

A file its commit recorded as regular (:mod:`.regularfiles`) is listed as the Hub lists a file kept in
git: ``oid`` (``blobId`` in a sibling) is its git blob id, and it has no ``lfs``. Every other file
is listed as the Hub lists a file kept in git-lfs: ``lfs.oid`` (``lfs.sha256`` in a sibling) is
its SHA-256, the name the Hub cache gives its blob and the model cache too; ``oid`` is the git
blob id of its LFS pointer, computed from the SHA-256 and size alone. Either way nothing has to
be read to list a model. Directories are named by a hash of what they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import HubFile, ModelFiles
from ocibridge.hubserver.repo.hubrefs import Refs
from ocibridge.hubserver.repo.regularfiles import git_blob_id
from ocibridge.hubserver.repo.reponames import hub_id, type_of
from ocibridge.hubserver.repo.upstreamids import REPO_CREATED
from ocibridge.kinds.hf.repotype import MODEL


def pointer(f: HubFile) -> bytes:
    """The git-lfs pointer file of ``f``."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{f.sha256}\nsize {f.size}\n".encode()


#: a file's Xet name, or None when it is not offered over Xet
XetNames = Callable[[HubFile], "str | None"]


def file_entry(f: HubFile, xet_name: XetNames | None = None) -> dict[str, Any]:
    entry: dict[str, Any]
    if f.git_blob is not None:  # a regular file: in git, no lfs
        entry = {"type": "file", "oid": f.git_blob, "size": f.size, "path": f.path}
    else:
        ptr = pointer(f)
        entry = {"type": "file", "oid": git_blob_id(ptr), "size": f.size, "path": f.path,
                 "lfs": {"oid": f.sha256, "size": f.size, "pointerSize": len(ptr)}}
    name = xet_name(f) if xet_name is not None else None
    if name is not None:
        entry["xetHash"] = name
    return entry


def directory_entry(files: ModelFiles, path: str) -> dict[str, Any]:
    inside = "\n".join(f"{p} {f.sha256}" for p, f in files.files.items() if p.startswith(path + "/"))
    return {"type": "directory", "oid": git_blob_id(inside.encode()), "size": 0, "path": path}


def sibling(f: HubFile, blobs: bool) -> dict[str, Any]:
    if not blobs:
        return {"rfilename": f.path}
    if f.git_blob is not None:  # a regular file: in git, no lfs
        return {"rfilename": f.path, "size": f.size, "blobId": f.git_blob}
    ptr = pointer(f)
    return {"rfilename": f.path, "size": f.size, "blobId": git_blob_id(ptr),
            "lfs": {"size": f.size, "sha256": f.sha256, "pointerSize": len(ptr)}}


def hub_date(text: str | None) -> str | None:
    """An RFC 3339 time as the Hub writes it (``2024-05-01T12:00:00.000Z``); None when absent
    or unreadable (huggingface_hub takes a date left out as unknown)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def summary(key: str, private: bool = False, gated: str = "") -> dict[str, Any]:
    """A repository (its key: :mod:`.reponames`) as ``/api/models`` or ``/api/datasets`` lists it
    (``gated``: "auto", "manual", or "" for false): by the repo id the Hub shows."""
    repo_id = hub_id(key)
    author = repo_id.split("/", 1)[0] if "/" in repo_id else None
    listed: dict[str, Any] = {"_id": repo_id, "id": repo_id, "author": author, "private": private,
                              "gated": gated or False, "downloads": 0, "likes": 0, "tags": []}
    return {**listed, "modelId": repo_id} if type_of(key) == MODEL else listed


def model_info(resolved: Resolved, files: ModelFiles, blobs: bool, private: bool = False,
               gated: str = "", facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``GET /api/models/{repo}[/revision/{rev}]`` (a dataset's: ``/api/datasets/...``); ``facts``:
    what its card and config say (cardData, library_name, pipeline_tag, tags, config: :mod:`.modelfacts`)."""
    date = hub_date(resolved.created)  # the artifact's date, the same at every request
    info = summary(resolved.repo_id, private, gated)
    if date is not None:  # a commit fetched from an upstream: the repository's createdAt there
        first = hub_date(str((resolved.manifest.annotations or {}).get(REPO_CREATED) or "")) or date
        info.update({"lastModified": date, "createdAt": first})
    info.update(facts or {})
    info.update({
        "sha": resolved.commit,
        "disabled": False,
        "siblings": [sibling(f, blobs) for f in files.files.values()],
        "usedStorage": sum(f.size for f in files.files.values()),
        "ocibridge": {"digest": resolved.top.digest, "manifest": resolved.model.digest,
                      "source": resolved.repo.shown},
    })
    return info


def refs(found: Refs) -> dict[str, Any]:
    """``GET /api/models/{repo}/refs``: the default tag as the branch ``main``, the branches the
    repository's refs record names, every other tag as a tag, each with its commit
    (huggingface_hub's ``list_repo_refs`` reads these four lists)."""
    def ref(name: str, kind: str, commit: str) -> dict[str, str]:
        return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": commit}

    return {"branches": [ref(b, "heads", c) for b, c in found.hub_branches()], "converts": [],
            "tags": [ref(t, "tags", c) for t, c in found.hub_tags()], "pullRequests": []}


def tree(files: ModelFiles, path: str, recursive: bool,
         xet_name: XetNames | None = None) -> list[dict[str, Any]] | None:
    """The entries under ``path`` ("" for the top), directories first as the Hub lists them;
    None when ``path`` is no directory of the model."""
    dirs = files.directories()
    if path and path not in dirs:
        return None
    head = path + "/" if path else ""

    def wanted(p: str) -> bool:
        return p.startswith(head) and (recursive or "/" not in p[len(head):])

    entries = [directory_entry(files, d) for d in sorted(dirs) if wanted(d)]
    entries += [file_entry(f, xet_name) for p, f in files.files.items() if wanted(p)]
    return entries


def paths_info(files: ModelFiles, paths: list[str], xet_name: XetNames | None = None) -> list[dict[str, Any]]:
    """``POST /api/models/{repo}/paths-info/{rev}``: what exists of ``paths``, the rest left out."""
    dirs = files.directories()
    out: list[dict[str, Any]] = []
    for raw in paths:
        p = raw.strip("/")
        if p in files.files:
            out.append(file_entry(files.files[p], xet_name))
        elif p in dirs:
            out.append(directory_entry(files, p))
    return out
