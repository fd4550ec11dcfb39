"""A commit of the Hub's write API as a ModelPack artifact: the NDJSON huggingface_hub sends
(``_commit_api.py`` ``_prepare_commit_payload``), read and checked, then the new file tree (the
parent's files, those deleted, those added), each file as what serve already proved of it (its
digest, size and chunk table, :class:`ocibridge.model.known.KnownFile`): the builder makes the
artifact from those facts (:mod:`.publishing`), which is pushed under the branch's tag.

What a commit is goes in the manifest's annotations (:data:`PARENT`, :data:`SUMMARY`, ...,
and which of its files are regular files: :func:`regular_files`, :mod:`ocibridge.hubserver.repo.regularfiles`); the
layers and config are ``push``'s of the same files. The payload is read as it comes
(:func:`lines`, :func:`read_line`): a file sent inline is staged as its line arrives, so a commit
holds one line in memory, not its body. Every file added must already be in
:class:`.staging.Staging` (verified by its SHA-256) or be a file of the branch: a commit naming
content serve does not hold is refused before anything is pushed, and a failed commit leaves the
branch where it was. Commits to one branch through one serve are made one at a time, each on the
one before (:class:`.branchlocks.Branches`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.hubserver.repo.regularfiles import git_blob_id

if TYPE_CHECKING:
    from ocibridge.model.known import KnownFile

#: manifest annotations of a commit
PARENT = "io.ocibridge.commit.parent"
SUMMARY = "io.ocibridge.commit.summary"
DESCRIPTION = "io.ocibridge.commit.description"
AUTHOR = "io.ocibridge.commit.author"
#: characters of a summary or description kept in an annotation
TEXT_MAX = 4096
#: bytes of one line of a commit payload: a file sent inline, up to the 10 MiB under which the Hub
#: keeps a file in git, is 14 MiB of base64 (preupload answers such files "regular": lfs/modes.py)
LINE_MAX = 16 * 1024 * 1024
#: operations of one commit (the Hub's limit of LFS files a commit): each is kept until it lands
OPERATIONS_MAX = 25_000
#: folders no commit writes into (huggingface_hub's FORBIDDEN_FOLDERS, which the Hub refuses too):
#: a download into a git checkout would write its .git (hooks, config), or the client's own cache
FORBIDDEN_FOLDERS = (".git", ".cache")
#: bytes of a path, and of one of its names (NAME_MAX): a pull writes the commit's files under its
#: own folder (where a longer one is a file system error) and the tree's checks are per folder
PATH_MAX = 1024
NAME_MAX = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadCommit(OcibridgeError):
    """The payload is not a commit serve takes (the Hub's 400)."""


class UnknownContent(OcibridgeError):
    """A file added names content serve does not hold (never uploaded, or not verified)."""


class UploadCollected(UnknownContent):
    """An upload the registry held for a commit to come is gone from it: registries collect
    blobs no manifest names (distribution's garbage-collect, zot's and Harbor's cleanup). Said
    as such, not as never uploaded: the client did upload it, and must do so again."""


class EscapingPath(OcibridgeError):
    """A path that climbs out of the repository as Windows reads it (``..\\x``): the Hub's 422."""


class MissingEntry(OcibridgeError):
    """A file or folder deleted is not in the branch (the Hub's EntryNotFound)."""


class ProtectedRef(OcibridgeError):
    """A ref the Hub never deletes (``main``): its 403."""


class StaleParent(OcibridgeError):
    """The parentCommit sent is not the branch's head (the Hub's 412)."""


@dataclass(frozen=True)
class Added:
    path: str
    sha256: str  # the staged (or branch) content
    size: int | None = None  # as the lfsFile line says it


@dataclass(frozen=True)
class Inline:
    """A file sent inline (a ``file`` line: a regular file), as its bytes were staged: what the
    commit keeps of it."""

    sha256: str
    size: int
    git_blob: str  # its git blob id: the Hub's name of a regular file

    @classmethod
    def of(cls, content: bytes) -> Inline:
        return cls(hashlib.sha256(content).hexdigest(), len(content), git_blob_id(content))


@dataclass
class CommitRequest:
    """A commit payload, read: the header, then the operations in order."""

    summary: str = ""
    description: str = ""
    parent: str | None = None
    added: list[Added] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    deleted_folders: list[str] = field(default_factory=list)
    inline: dict[str, Inline] = field(default_factory=dict)  # path -> a "file" line's content, staged
    header: bool = False  # its header line was read
    operations: int = 0


def clean_path(path: object, what: str = "path") -> str:
    """A path of the repository, as sent: relative, without ``..``, NUL or another control
    character, and in no folder of :data:`FORBIDDEN_FOLDERS`. A backslash is a character of a
    name, as on the Hub (``folder/..\\..\\x`` is the file ``..\\..\\x`` in ``folder``), stored
    as is: whatever writes it out judges it (:mod:`ocibridge.core.backslash`). A path that
    climbs out as Windows reads it from its start (``..\\x``) is the Hub's 422
    (:class:`EscapingPath`); one that starts with a backslash or a drive (``C:``) is absolute
    there, refused (400)."""
    if not isinstance(path, str):
        raise BadCommit(f"{what}: expected a string")
    if len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
        raise BadCommit(f"Invalid path: {path[:80]!r}... is longer than {PATH_MAX} bytes")
    if path == ".." or path.startswith(("..\\", ".\\..\\")):
        raise EscapingPath(f"Invalid path: {path[:80]!r} climbs out of the repository (a relative path)")
    try:
        clean = safe_relpath(path, what, here=False)  # a name of the repository, written nowhere here
    except UnsafePath as e:
        raise BadCommit(f"Invalid path: {e}") from None
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in clean.split("/")):
        raise BadCommit(f"Invalid path: {clean[:80]!r}... has a name longer than {NAME_MAX} bytes")
    if _CONTROL.search(clean):
        raise BadCommit(f"Invalid path: {clean!r} holds a control character")
    forbidden = next((part for part in clean.split("/") if part in FORBIDDEN_FOLDERS), None)
    if forbidden:
        raise BadCommit(f"Invalid path: {clean!r}: no file goes under a '{forbidden}/' folder")
    return clean


async def lines(chunks: AsyncIterator[bytes], most: int = LINE_MAX,
                held: Callable[[int], Awaitable[None]] | None = None) -> AsyncIterator[bytes]:
    """The lines of an NDJSON body as its ``chunks`` come, each at most ``most`` bytes
    (:class:`BadCommit` past it: the rest of the body is never read). ``held`` is told how many
    bytes of a line are held before the next chunk is read (:mod:`.inlinebudget` waits there)."""
    pending = bytearray()  # no newline in it between chunks: each chunk's bytes are searched once
    async for chunk in chunks:
        searched = len(pending)
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", max(start, searched))) >= 0 and end - start <= most:
            yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
        if len(pending) > most:
            raise BadCommit(f"a line of the commit payload is longer than {most} bytes")
        if held is not None:
            await held(len(pending))
    if pending:
        yield bytes(pending)


def read_line(request: CommitRequest, number: int, line: bytes) -> tuple[Inline, bytes] | None:
    """Line ``number`` of the NDJSON commit payload, into ``request``; a ``file`` line's content
    (noted in ``request.inline``) for the caller to stage, else None. :class:`BadCommit` for
    anything malformed."""
    if not line.strip():
        return None
    try:
        item = boundedjson.loads(line, f"commit payload line {number}")
    except boundedjson.JsonTooDeep as e:
        raise BadCommit(str(e)) from None
    except ValueError:
        raise BadCommit(f"commit payload line {number}: not JSON") from None
    if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
        raise BadCommit(f"commit payload line {number}: expected {{'key': ..., 'value': {{...}}}}")
    key, value = item.get("key"), item["value"]
    if key != "header":
        request.operations += 1
        if request.operations > OPERATIONS_MAX:
            raise BadCommit(f"a commit makes at most {OPERATIONS_MAX} operations")
    if key == "header":
        request.header = True
        request.summary = str(value.get("summary") or "")[:TEXT_MAX]
        request.description = str(value.get("description") or "")[:TEXT_MAX]
        parent = value.get("parentCommit")
        request.parent = parent if isinstance(parent, str) and parent else None
    elif key == "file":
        path = clean_path(value.get("path"))
        if value.get("encoding", "base64") != "base64" or not isinstance(value.get("content"), str):
            raise BadCommit(f"{path}: a file's content is sent in base64")
        try:
            content = base64.b64decode(value["content"], validate=True)
        except (binascii.Error, ValueError):
            raise BadCommit(f"{path}: its content is not base64") from None
        inline = request.inline[path] = Inline.of(content)
        return inline, content
    elif key == "lfsFile":
        path = clean_path(value.get("path"))
        oid, size = value.get("oid"), value.get("size")
        if value.get("algo", "sha256") != "sha256" or not isinstance(oid, str):
            raise BadCommit(f"{path}: an lfsFile names its content by sha256 oid")
        request.added.append(Added(path, oid.lower(), size if isinstance(size, int) else None))
    elif key == "deletedFile":
        request.deleted_files.append(clean_path(value.get("path")))
    elif key == "deletedFolder":
        request.deleted_folders.append(clean_path(str(value.get("path", "")).rstrip("/")))
    else:
        raise BadCommit(f"commit payload line {number}: serve does not take {key!r} operations yet")
    return None


def checked(request: CommitRequest) -> CommitRequest:
    """``request`` once its whole payload was read: :class:`BadCommit` when it had no header."""
    if not request.header:
        raise BadCommit("commit payload: no header line")
    return request


def new_tree(parent: dict[str, str], request: CommitRequest, staged: Callable[[str], KnownFile | None],
             held: Callable[[str], KnownFile]) -> dict[str, KnownFile]:
    """The files of the commit: ``parent`` (path -> sha256 of the branch's head) less the deleted,
    with the added, each as what the commit knows of it (:class:`.KnownFile`: its digest, size,
    where its bytes are, its chunk table). ``staged(sha256)``: the verified upload, or None;
    ``held(path)``: a file of the parent. Refuses before anything is written."""
    tree: dict[str, str] = dict(parent)
    for path in request.deleted_files:
        under = [p for p in tree if p.startswith(path + "/")]
        if path not in tree and not under:
            raise MissingEntry(f"A file with this name doesn't exist: {path}")
        for p in [path] if path in tree else under:  # a folder named as a file: the Hub deletes the folder
            del tree[p]
    for folder in request.deleted_folders:
        under = [p for p in tree if p.startswith(folder + "/")]
        if not under:
            raise MissingEntry(f"A folder with this name doesn't exist: {folder}")
        for p in under:
            del tree[p]
    by_sha = {sha: path for path, sha in parent.items()}
    sources: dict[str, KnownFile] = {}
    for added in request.added:
        collected: UploadCollected | None = None
        try:
            known = staged(added.sha256)
        except UploadCollected as e:  # unless the branch holds the same bytes
            known, collected = None, e
        if known is None and added.sha256 in by_sha:
            known = held(by_sha[added.sha256])
        if known is None and collected is not None:
            raise UploadCollected(f"{added.path}: {collected}") from None
        if known is None:
            raise UnknownContent(f"{added.path}: no upload of sha256:{added.sha256} was received "
                                 "(upload it first: the LFS batch API)")
        if added.size is not None and known.size != added.size:
            raise UnknownContent(f"{added.path}: sha256:{added.sha256} is {known.size} bytes, not {added.size}")
        tree[added.path] = added.sha256
        sources[added.path] = known
    for path, inline in request.inline.items():
        known = staged(inline.sha256)
        if known is None:
            raise UnknownContent(f"{path}: its inline content was not staged")
        tree[path] = inline.sha256
        sources[path] = known
    _check_shape(tree)
    for path in tree:
        if path not in sources:
            sources[path] = held(path)
    return dict(sorted(sources.items()))


def regular_files(parent: Mapping[str, str], request: CommitRequest, tree: Mapping[str, object]) -> dict[str, str]:
    """path -> git blob id of the regular files of the commit's ``tree``: a file sent inline is
    one (the Hub's client sends a file inline when preupload called it "regular"), an ``lfsFile``
    is in git-lfs, and a file kept from the parent keeps its kind (``parent``: the parent's
    regular files). Inline lines win over ``lfsFile`` ones of the same path, as in :func:`new_tree`."""
    sent = {added.path for added in request.added}
    regular = {path: blob for path, blob in parent.items() if path in tree and path not in sent}
    regular.update({path: inline.git_blob for path, inline in request.inline.items()})
    return regular


def _check_shape(tree: dict[str, str]) -> None:
    """No path is both a file and a folder. A tree of no file is a commit too (the Hub's empty
    repository): its artifact's one layer is the empty descriptor (:mod:`ocibridge.oci.empty`)."""
    folders = {"/".join(p.split("/")[:i]) for p in tree for i in range(1, p.count("/") + 1)}
    clash = sorted(folders & tree.keys())
    if clash:
        raise BadCommit(f"Invalid path: {clash[0]} is both a file and a folder")
    seen: dict[str, str] = {}
    for name in sorted(folders | tree.keys()):
        folded = unicodedata.normalize("NFC", name).casefold()
        other = seen.setdefault(folded, name)
        if other != name:  # one file on macOS and Windows: a download would keep only one of them
            raise BadCommit(f"Invalid path: {other!r} and {name!r} differ only in case or Unicode normalisation")


def commit_time() -> str:
    """A commit's time, as the Hub writes one (milliseconds, ``Z``)."""
    import datetime

    moment = datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
