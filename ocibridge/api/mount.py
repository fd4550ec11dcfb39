"""``ocibridge.mount``: a registry model as a read-only directory, read lazily and verified
(docs/mount.md).

The model is opened as ``open_model`` opens it (policy, ``verify`` keys, credentials: as for
pull), with the model cache for everything it reads (chunks, and blobs read whole), so a later
mount or ``path`` of the same model fetches nothing again. :func:`mount` starts a process that
serves it (``lazymount.process`` says why never this one) and returns once it is mounted;
:func:`serve_mount` serves it in this process until it is unmounted (``ocibridge mount
--foreground``); :func:`unmount` ends either.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.lazymount import READ_TIMEOUT as READ_TIMEOUT
from ocibridge.lazymount.fuseloop import fuse_binding
from ocibridge.lazymount.mounttable import (
    clear_dead_mount,
    is_mounted,
    mount_entry,
    refuse_a_mount_point,
    unmount_directory,
)
from ocibridge.lazymount.process import read_request, start, stderr_handed_back

if TYPE_CHECKING:  # the model's modules load in the mount's process only: `ocibridge mount` starts sooner
    from ocibridge.api.lazy_ops import LazyModel
    from ocibridge.api.options import TransferOptions
    from ocibridge.api.policy import Verification
    from ocibridge.lazymount.tree import LazyFile
    from ocibridge.places.locate import Locator

#: what serve_mount tells of a read it could not verify (as lazyread.model.Warn)
Warn = Callable[[str], None]

#: the command of a mount's own process: this module, run (its ``__main__`` below)
MOUNT_PROCESS = [sys.executable, "-m", "ocibridge.api.mount"]
#: how long ``Mounted.unmount`` waits for the mount's process to end once unmounted
END_SECONDS = 30


class _ModelReads:
    """The lazy files' bytes, from the model's shared verified readers."""

    def __init__(self, model: LazyModel):
        self.model = model

    def read_file(self, file: LazyFile, start: int, end: int) -> bytes:
        return self.model.open(file.key).read(start, end)

    def read_into(self, file: LazyFile, start: int, end: int, into: memoryview) -> None:
        self.model.open(file.key).read_into(start, end, into)

    def stable_fd(self, file: LazyFile, start: int, end: int) -> int | None:
        return self.model.open(file.key).stable_fd(start, end)


@dataclass(frozen=True)
class MountRequest:
    """What a mount process is asked to serve (:func:`mount`'s arguments)."""

    ref: str | Locator
    directory: str
    transfer: TransferOptions | None = None
    verify: Verification | None = None
    allow_other: bool = False
    offline: bool | None = None
    read_timeout: float = READ_TIMEOUT


class Mounted:
    """A model mounted at ``directory``, served by process ``pid``. ``unmount()`` (or leaving
    a ``with``) ends it and waits for that process; ``wait()`` waits for an unmount from
    elsewhere (``ocibridge umount DIR``)."""

    def __init__(self, directory: Path, process: subprocess.Popen[bytes]):
        self.directory = directory
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait(self) -> int:
        """Until the mount's process ends (its exit code)."""
        return self._process.wait()

    def unmount(self) -> None:
        if is_mounted(self.directory):  # (a process that died left a dead mount: detached all the same)
            unmount_directory(self.directory, lazy=self._process.poll() is not None)
        self._process.wait(END_SECONDS)
        _remove_dead_scratch()  # (its own, if it died)

    def __enter__(self) -> Mounted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()


def mount(ref: str | Locator, directory: str | os.PathLike[str], *, transfer: TransferOptions | None = None,
          verify: Verification | None = None, allow_other: bool = False, offline: bool | None = None,
          read_timeout: float = READ_TIMEOUT) -> Mounted:
    """Mount model ``ref`` read-only at ``directory`` (made if missing; its parent must exist)
    and return once it answers: the files as ``pull`` writes them, each read fetching only the chunks it needs,
    every byte verified before a program sees it (else EIO, and a line on stderr names the
    file). ``verify``, ``transfer``: as for pull. ``allow_other``: other users may read it
    (FUSE's ``allow_other``). ``offline`` (default ``$OCIBRIDGE_OFFLINE``): nothing is asked of
    the registry; ``ref`` means what it last resolved to, and only what the model cache holds
    reads (the rest is EIO). ``read_timeout``: a read whose fetch hears nothing from the
    registry for that many seconds, retries included, fails (EIO; a line names the file and
    the registry); the mount's other reads go on. A process of its own serves it (it
    outlives this one unless unmounted: ``Mounted.unmount``, ``ocibridge umount DIR``); its
    errors before the mount is there are raised here."""
    from ocibridge.places.locate import Role, locate

    fuse_binding()  # here: without the binding nothing can be mounted, and the error names the extra
    locate(ref, Role.REGISTRY)  # a reference written wrong is a usage error here, not the process's
    _check_read_timeout(read_timeout)
    where = _directory(directory).absolute()
    clear_dead_mount(where)  # (a mount whose process died: the new one takes its place)
    request = MountRequest(ref, str(where), transfer, verify, allow_other, offline, read_timeout)
    return Mounted(where, start(MOUNT_PROCESS, request, where))


def serve_mount(ref: str | Locator, directory: str | os.PathLike[str], *, transfer: TransferOptions | None = None,
                verify: Verification | None = None, allow_other: bool = False, offline: bool | None = None,
                warn: Warn | None = None, read_timeout: float = READ_TIMEOUT) -> None:
    """Serve model ``ref`` at ``directory`` from this process until it is unmounted (Ctrl-C,
    SIGTERM, SIGHUP: it unmounts). This process must not read the mount itself (the answers
    need the interpreter lock its reader may hold): :func:`mount` runs this in a process of
    its own. Arguments: as :func:`mount`; ``warn`` hears what could not be read, and why
    (default: a line on stderr)."""
    from ocibridge.lazymount.build import Scratch, build_tree
    from ocibridge.lazymount.fuseloop import MountSession
    from ocibridge.lazymount.ops import ModelFS
    from ocibridge.lazyread.model import warn_stderr

    say: Warn = warn or warn_stderr
    _check_read_timeout(read_timeout)
    fuse_binding()  # before the registry is asked
    where = _directory(directory)
    if clear_dead_mount(where):
        say(f"mount: {where}: unmounted a mount whose process had died")
    refuse_a_mount_point(where)
    if where.exists() and not where.is_dir():
        raise OcibridgeError(f"{where}: not a directory to mount on")
    if where.is_dir() and any(where.iterdir()):  # FUSE mounts over files: they would vanish until the unmount
        raise OcibridgeError(f"{where} is not empty: its files would be hidden while the model is mounted there; "
                             "mount on an empty or a new directory")
    model = _opened(ref, transfer, verify, offline, say, read_timeout)
    scratch = Scratch()
    made = _made(where)
    try:
        ops = ModelFS(build_tree(model, scratch), _ModelReads(model), lambda line: say(f"mount: {line}"))
        session = MountSession(ops, where, allow_other=allow_other)
        session.start()
    except BaseException:
        model.close()
        scratch.remove()
        for directory in made:  # a mount that failed leaves no directory it made
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    threading.Thread(target=_ready_readers, args=(model,), name="mount-readers", daemon=True).start()
    try:
        stderr_handed_back()
        session.wait()
    finally:
        model.close()
        scratch.remove()


def _ready_readers(model: LazyModel) -> None:
    """(once mounted, on a thread of its own) What the first read would otherwise do while its
    program waits: find the model's chunk table (a few requests to the registry), load the
    reading code and the table's hash (the largest file's reader made; the others' are made
    quickly after that). A program started on the mount reaches its first read later than this;
    a read that comes first waits for it, as it would have done it. A failure is left to the
    reads, which look again."""
    with contextlib.suppress(Exception):
        largest = max(model.files, key=lambda key: model.files[key].layer.size, default=None)
        if largest is not None:
            blob = model.open(largest)
            if blob.chunks is not None:
                blob.chunks.hasher_factory()


def _directory(directory: str | os.PathLike[str]) -> Path:
    """DIR as a path; an empty one is refused: ``Path("")`` is the current directory, which an
    unset shell variable (``ocibridge mount REF "$DIR"``) would have mounted over."""
    if not os.fspath(directory).strip():
        raise UsageError("an empty DIR (an unset shell variable?)")
    where = Path(directory)
    # mount(8) refuses; a typo makes no tree (os.path: a dead mount's ENOTCONN is no answer here)
    if not os.path.lexists(where) and not os.path.isdir(where.parent):
        raise OcibridgeError(f"mount point {where.absolute()} does not exist (nor does {where.parent.absolute()}: "
                             "only DIR itself is made)")
    return where


def _check_read_timeout(seconds: float) -> None:
    if not 0 < seconds < math.inf:  # (NaN too)
        raise UsageError(f"--read-timeout {seconds:g}: a number of seconds above 0")


def _made(where: Path) -> list[Path]:
    """Make ``where`` and its missing parents; the ones made, deepest first."""
    missing = [p for p in (where, *where.parents) if not p.exists()]
    where.mkdir(parents=True, exist_ok=True)
    return missing


def _opened(ref: str | Locator, transfer: TransferOptions | None, verify: Verification | None,
            offline: bool | None, say: Warn, read_timeout: float) -> LazyModel:
    """The model to mount: from the registry, everything it reads kept in the model cache with
    what ``ref`` resolved to; offline, from that record and the cache alone."""
    from ocibridge.api.lazy_ops import LazyModel, open_model
    from ocibridge.api.missing import explaining_missing
    from ocibridge.cache.blobsource import NeverFetched
    from ocibridge.cache.chunks import CacheChunks
    from ocibridge.cache.keptblobs import CachedOnly, KeptBlobs
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.cache.records import offline_from_env
    from ocibridge.places.locate import Role, locate, text_of
    from ocibridge.signing.use import needs_checking

    located = locate(ref, Role.REGISTRY)
    shown = text_of(located)
    if offline_from_env() if offline is None else offline:
        if needs_checking(located, verify):
            raise UsageError(f"{shown}: the policy (--verify-key or the policy file) needs the registry: "
                             "it cannot be checked offline")
        cache = ModelCache()
        try:
            desc = cache.remembered(shown)
        except NeverFetched as e:  # (what to do: offline reads only what an online fetch kept)
            raise NeverFetched(f"{e}: mount it once online first (or run 'ocibridge path' on it online)") from None
        return LazyModel(CachedOnly(desc, cache), desc.digest, warn=say, chunk_store=CacheChunks(cache.root))
    # a tag the repository lacks: the same line as pull's (the tag, the nearest ones, its tags)
    model = explaining_missing(open_model)(located, transfer=transfer, verify=verify, warn=say, keep_blobs=True,
                                           read_timeout=read_timeout)
    if isinstance(model.store, KeptBlobs):
        model.store.keep_for_offline(shown, model.descriptor)
    return model


def unmount(directory: str | os.PathLike[str]) -> None:
    """Unmount a mount of ``ocibridge mount`` (``fusermount3 -u``); an ``ocibridge mount``
    process serving it is waited for (what it fetched is then in the model cache). The scratch
    directories of mounts whose process died (a dead mount's among them) are removed."""
    where = _directory(directory)
    entry = mount_entry(where)
    if entry is None:
        raise OcibridgeError(f"{where} is not mounted")
    if entry.foreign:  # root's fusermount3 -u would unmount a disk or a tmpfs too: never one not ours
        raise OcibridgeError(f"{where} is a {entry.fstype} mount, not one of 'ocibridge mount': left mounted "
                             "(umount(8) unmounts it)")
    unmount_directory(where)
    _remove_dead_scratch()


def _remove_dead_scratch() -> None:
    """The scratch directories of mounts whose process died, removed at an unmount (a dead
    mount's among them)."""
    from ocibridge.lazymount.build import remove_dead_scratch  # (the unpacking's imports: not before they serve)

    remove_dead_scratch()


def _serve_request() -> int:
    """The mount's own process (``python -m ocibridge.api.mount``): it reads its request on
    stdin (``lazymount.process``) and serves it until unmounted; a failure is one line."""
    try:
        request = read_request()
        if not isinstance(request, MountRequest):
            raise OcibridgeError("python -m ocibridge.api.mount is started by ocibridge.mount, not by hand")
        serve_mount(request.ref, request.directory, transfer=request.transfer, verify=request.verify,
                    allow_other=request.allow_other, offline=request.offline, read_timeout=request.read_timeout)
    except OcibridgeError as e:
        print(f"ocibridge: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ocibridge: error: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # the class a request is unpickled to is the imported module's: ask it
    from ocibridge.api import mount as _imported

    sys.exit(_imported._serve_request())
