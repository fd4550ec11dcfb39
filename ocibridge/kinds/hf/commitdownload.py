"""A Hub repository's commit downloaded into a store, file by file, each checked (its SHA-256, or a
regular file's git blob id), through huggingface_hub: what ``mirror`` does for an ``hf://`` source
and serve's ``--upstream`` for a revision the registry lacks, below both (neither imports the other).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ocibridge.core import backslash
from ocibridge.errors import OcibridgeError
from ocibridge.stores.base import Store

if TYPE_CHECKING:
    import httpx

    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.model.package import ModelPackage

EXTRA = "hf:// sources need huggingface_hub: pip install 'ocibridge[hub]'"
#: What ``org.opencontainers.image.source`` says, whichever endpoint served the commit (as
#: ``push hf:`` says it): the repository on the Hub; the commit pins the content.
HUB_PAGE = "https://huggingface.co/{repo_id}"
MODEL = "model"


def said(e: BaseException) -> str:
    """An exception's words on one line, at most 400 characters."""
    return " ".join(str(e).split())[:400]


def hub() -> ModuleType:
    """huggingface_hub, or one error line naming the extra that brings it."""
    try:
        import huggingface_hub
    except ImportError:
        raise OcibridgeError(EXTRA) from None
    return huggingface_hub


@dataclass(frozen=True)
class HubSource:
    """An ``hf://`` entry's repository, where and how it is read."""

    repo_id: str
    endpoint: str
    token: str | None
    revision: str | None  # hf://ORG/NAME@REVISION: that revision only
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    #: ``model`` or ``dataset`` (kinds/hf/repotype.py): the Hub's API and file URLs differ by it
    repo_type: str = MODEL

    @property
    def typed_id(self) -> str:
        """The repo id as the Hub's URLs write it: ``datasets/ORG/NAME`` for a dataset."""
        return self.repo_id if self.repo_type == MODEL else f"{self.repo_type}s/{self.repo_id}"

    @property
    def name(self) -> str:
        return f"hf://{self.typed_id}"

    @property
    def page(self) -> str:
        return HUB_PAGE.format(repo_id=self.typed_id)

    def keeps(self, path: str) -> bool:
        """Whether ``include``/``exclude`` keep a file: huggingface_hub's own rule, the one
        ``snapshot_download(allow_patterns=, ignore_patterns=)`` downloads by."""
        if not self.include and not self.exclude:
            return True
        from huggingface_hub.utils import filter_repo_objects  # type: ignore[attr-defined]

        return bool(list(filter_repo_objects([path], allow_patterns=list(self.include) or None,
                                             ignore_patterns=list(self.exclude) or None)))


class _Download:
    """Run when the copy starts: the commit's files listed (bounded, every path checked), each
    downloaded into the Hub cache with huggingface_hub's engine (``hf_hub_download``: resumed
    ``.incomplete`` files, Xet where the endpoint offers it), each checked against what the
    listing said it is (an LFS file's sha256, another file's git blob id), then read as ``push
    hf:ORG/NAME@COMMIT`` reads the snapshot; (the artifact as a store, the reference to copy).

    The endpoint is not trusted: a listing of more than :data:`MAX_FILES` files, a path that is
    absolute, climbs out (``..``) or holds a control character, and bytes that do not hash to
    what the listing said fail the revision with one line before anything is published (a
    mismatching download is removed from the cache, so the next run fetches it again). A token
    never follows a redirect to another host: huggingface_hub drops it (``hf_hub_download``)."""

    def __init__(self, src: HubSource, commit: str, workers: int, cache: Path | None = None, *,
                 gitattributes: bool = False, chunks: ChunkChoice | None = None, http: httpx.Client | None = None):
        self.src, self.commit, self.workers = src, commit, workers
        self.http = http  # the client the listing is asked with (serve --upstream: its session's)
        self.chunks = chunks  # the chunk table the artifact binds, as push's flags say it (None: push's default)
        self.cache = cache or _cache()  # the Hub cache downloaded into (serve --upstream: its own)
        #: ``.gitattributes`` downloaded and kept (serve --upstream: the Hub lists it; push hf: does not)
        self.gitattributes = gitattributes

    def __call__(self) -> tuple[Store, str]:
        src = self.src
        try:
            listed = self.listing()
            with ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="mirror-hub") as pool:
                list(pool.map(self._fetch, listed))
        except OcibridgeError:
            raise
        except Exception as e:
            raise OcibridgeError(f"{src.name}@{self.commit}: download from {src.endpoint} failed "
                                 f"(run the job again to resume it): {said(e)}") from None
        from ocibridge.kinds.hf.artifact import hub_artifact
        from ocibridge.model.builder import ARTIFACT_TAG

        # push's artifact in full: its chunk table bound too (the mirror attaches its referrer)
        return hub_artifact(self.package(listed), self.chunks), ARTIFACT_TAG

    def package(self, listed: list[Any]) -> ModelPackage:
        """The downloaded snapshot's ``listed`` files, read as ``push hf:ORG/NAME@COMMIT`` reads them."""
        from ocibridge.kinds.hf.kind import read_snapshot
        from ocibridge.kinds.hf.locator import HubReference as Reference
        from ocibridge.kinds.source import ReadRequest

        names = {f.path for f in listed}
        return read_snapshot(Reference(self.src.repo_id, self.commit, repo_type=self.src.repo_type), ReadRequest(),
                             keep=lambda rel: rel in names, root=self.cache, gitattributes=self.gitattributes)

    def listing(self) -> list[Any]:
        """The commit's files the entry keeps, as the endpoint lists them; at most MAX_FILES."""
        hub()  # its one line when huggingface_hub is missing
        from huggingface_hub.hf_api import RepoFile

        from ocibridge.kinds.hf.treepages import tree_entries

        src = self.src
        kept: list[Any] = []
        entries = tree_entries(src.endpoint, src.repo_id, self.commit, src.token, self.http, src.repo_type)
        for seen, entry in enumerate(entries, 1):
            if seen > MAX_LISTED:
                raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists more than {MAX_LISTED} "
                                     "entries: refused (no model needs that many files)")
            if not isinstance(entry, RepoFile):
                continue
            why = bad_path(entry.path)
            if why is not None:
                raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists the file {entry.path!r}, "
                                     f"which {why}: refused")
            if (self.gitattributes or entry.path != ".gitattributes") and src.keeps(entry.path):
                kept.append(entry)
        if len(kept) > MAX_FILES:
            raise OcibridgeError(f"{src.name}@{self.commit}: {len(kept)} files to download, more than {MAX_FILES}")
        return kept

    def _fetch(self, entry: Any) -> None:
        """One file into the cache, then its bytes checked against the listing."""
        src = self.src
        path = Path(hub().hf_hub_download(src.repo_id, entry.path, revision=self.commit, endpoint=src.endpoint,
                                          repo_type=src.repo_type, token=src.token, cache_dir=str(self.cache),
                                          tqdm_class=_quiet_tqdm()))
        lfs = entry.lfs  # a RepoFile (the listing keeps no other): BlobLfsInfo or None
        if lfs is not None and lfs.sha256:
            said, what = str(lfs.sha256), "sha256"
            found = _sha256(path)
        elif entry.blob_id:
            said, what = str(entry.blob_id), "git blob id"
            found = git_blob_sha1(path)
        else:
            raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists {entry.path!r} with no "
                                 "sha256 and no blob id: nothing to check it against")
        if found != said:
            _forget(path)
            raise OcibridgeError(f"{src.name}@{self.commit}: {entry.path}: {src.endpoint} said {what} {said}, "
                                 f"the bytes it sent hash to {found}: refused (removed from the cache)")


#: the download of one commit as the artifact ``push hf:ORG/NAME@COMMIT`` makes: a mirror job's, and
#: serve's ``--upstream`` (hubserver/upstream/commitfetch.py)
CommitDownload = _Download


def git_blob_sha1(path: Path) -> str:
    """What git names a file: the Hub lists a file that is not in LFS by it (``blob_id``)."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git's name, not security
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


#: what one revision may list (the Hub itself keeps repositories under 100,000 files)
MAX_LISTED = 200_000
MAX_FILES = 100_000
MAX_PATH = 4096


def bad_path(rel: str) -> str | None:
    """Why a path the endpoint lists cannot be a file of the model; None when it can."""
    if not rel or len(rel) > MAX_PATH:
        return "is empty or too long"
    if rel.startswith("/"):
        return "is absolute"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rel):
        return "holds a control character"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return "has an empty, '.' or '..' component"
    # a backslash is a character of the name (core/backslash.py), as the Hub and the artifact keep it
    if "\\" in rel and backslash.backslash_separates():
        return "holds a backslash, a folder separator on this system"
    if windows_escape(rel):
        return "climbs out of its folder as Windows reads it (huggingface_hub will not download it)"
    return None


def windows_escape(rel: str) -> bool:
    """Whether ``rel`` read with a backslash as a separator has a ``..`` or starts anew at a root or
    drive: what huggingface_hub refuses to download anywhere (``_validate_relative_filename``)."""
    from pathlib import PureWindowsPath

    if ".." in rel.replace("\\", "/").split("/"):
        return True
    return any(PureWindowsPath(part).drive or PureWindowsPath(part).root for part in rel.split("/"))


def _cache() -> Path:
    from ocibridge.kinds.hf.hubcache import hub_cache

    return hub_cache()


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _forget(path: Path) -> None:
    """A download that is not what was listed: its blob and the snapshot's link to it go."""
    import contextlib
    import os

    real = os.path.realpath(path)
    for doomed in (real, str(path)):
        with contextlib.suppress(OSError):
            os.unlink(doomed)


def _quiet_tqdm() -> Callable[..., Any]:
    """snapshot_download's overall bar, silenced: the job reports per revision."""
    from tqdm.auto import tqdm

    class Quiet(tqdm):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet
