"""The Hub cache layout, as huggingface_hub reads and writes it (its "Manage cache" guide):

    $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub)
        models--ORG--NAME/               (a dataset's: datasets--ORG--NAME/, laid out alike)
            blobs/<etag>                 the files' bytes, by their etag (the Hub: sha256 of LFS files,
                                         git blob sha1 of others; ocibridge's pull and serve: sha256)
                                         (huggingface_hub 2.x: a file downloaded over Xet is a
                                         link to ../../blobs/<2 hex>/<xet hash>, the cache-wide
                                         shared store)
            snapshots/<commit>/<path>    relative symlinks to ../../blobs/<etag>
            refs/main                    the commit that "main" names

Nothing here touches the network; the layout is all a Hub library needs to load by repo id
with ``local_files_only=True``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ocibridge.core.smallfile import MAX_TINY_FILE, read_small
from ocibridge.errors import SourceError, UsageError
from ocibridge.kinds.hf.repotype import DATASET, DATASETS_PART, MODEL, RESERVED_FIRST_PARTS

SCHEME = "hf:"

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REPO_ID = re.compile(rf"(?:{_PART}/)?{_PART}")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
COMMIT = re.compile(r"[0-9a-f]{40}")
#: An entry of huggingface_hub 2.x's shared store, relative to it: ``<2 hex>/<xet hash>``, the
#: two hex being the hash's first (its ``utils/_shared_blobs.py``).
SHARED_ENTRY = re.compile(r"([0-9a-f]{2})/\1[0-9a-f]{62}")


def hub_cache() -> Path:
    """Where huggingface_hub keeps its cache, by its own environment variables."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "huggingface" / "hub"


def parse(reference: str) -> tuple[str, str | None]:
    """``hf:ORG/NAME[@REVISION]`` as (repo id, revision or None); one error line if malformed."""
    repo_type, repo_id, revision = parse_typed(reference)
    if repo_type != MODEL:
        raise UsageError(f"{reference}: names a {repo_type}, not a model (hf:ORG/NAME[@REVISION])")
    return repo_id, revision


def parse_typed(reference: str) -> tuple[str, str, str | None]:
    """``hf:ORG/NAME[@REVISION]`` (a model) or ``hf:datasets/ORG/NAME[@REVISION]`` (a dataset, as
    the Hub's own URLs name it) as (repo type, repo id, revision or None); one error line if
    malformed. A model id never starts with a name the Hub reserves (``datasets``, ``spaces``)."""
    body = reference[len(SCHEME):] if reference.startswith(SCHEME) else reference
    repo_id, _, revision = body.partition("@")
    first, _, rest = repo_id.partition("/")
    repo_type = DATASET if first == DATASETS_PART and rest else MODEL
    if repo_type == DATASET:
        repo_id = rest
    elif first == DATASETS_PART:
        raise UsageError(f"{reference}: names no dataset (hf:datasets/ORG/NAME[@REVISION])")
    elif first in RESERVED_FIRST_PARTS:
        raise UsageError(f"{reference}: {first}/ repositories are not models or datasets ocibridge reads "
                         "(hf:ORG/NAME, hf:datasets/ORG/NAME)")
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id or "--" in repo_id:
        raise UsageError(f"{reference}: not a Hugging Face repo id (hf:ORG/NAME[@REVISION], "
                         "hf:datasets/ORG/NAME[@REVISION])")
    if revision and (not _REVISION.fullmatch(revision) or ".." in revision):
        raise UsageError(f"{reference}: {revision!r} is not a revision")
    return repo_type, repo_id, revision or None


def repo_folder(repo_id: str, root: Path | None = None, repo_type: str = MODEL) -> Path:
    """A repository's folder in the cache (huggingface_hub's ``repo_folder_name``)."""
    if repo_type not in (MODEL, DATASET):
        raise ValueError(f"unknown repository type {repo_type!r}")
    return (root or hub_cache()) / f"{repo_type}s--{repo_id.replace('/', '--')}"


def shared_blobs(folder: Path) -> Path:
    """The cache-wide store of Xet files of the cache holding the repo ``folder``
    (huggingface_hub 2.x: ``<cache>/blobs``; a repository's ``blobs/<etag>`` links into it)."""
    return folder.parent / "blobs"


def resolve_revision(folder: Path, repo_id: str, revision: str | None) -> str:
    """The commit a revision names in the cache: a ref (``main`` by default) or a commit."""
    wanted = revision or "main"
    if COMMIT.fullmatch(wanted) and (folder / "snapshots" / wanted).is_dir():
        return wanted
    ref = folder / "refs" / wanted
    try:  # a shared cache: a regular file of a few bytes, never a FIFO's wait or /dev/zero's flood
        data = read_small(ref, MAX_TINY_FILE, "Hugging Face ref", error=SourceError)
        commit = data.decode("ascii", "replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        if not (folder / "snapshots").is_dir():
            raise SourceError(f"hf:{repo_id}: not in the Hugging Face cache ({folder})") from None
        held = known_revisions(folder)
        said = "it holds " + ", ".join(held) if held else "no ref names a commit"
        raise SourceError(f"hf:{repo_id}@{wanted}: the Hugging Face cache holds {repo_id} but no revision "
                          f"{wanted!r} ({said})") from None
    if not COMMIT.fullmatch(commit):
        raise SourceError(f"{ref}: not a commit hash")
    return commit


def known_revisions(folder: Path, most: int = 10) -> list[str]:
    """The refs of a repo of the cache (``main``, tags, ``pr/1``), then its snapshots' commits:
    what a revision that is not there could have been."""
    refs = folder / "refs"
    names = sorted(p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    commits = sorted(p.name for p in (folder / "snapshots").iterdir() if COMMIT.fullmatch(p.name))
    return (names + [c[:12] for c in commits])[:most]
