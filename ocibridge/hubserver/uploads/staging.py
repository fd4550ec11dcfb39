"""Files uploaded to serve and not yet committed (the Hub's write API: LFS and Xet uploads land
here, a commit takes them from here), named by their SHA-256 and kept only once verified.

    $OCIBRIDGE_CACHE/serve/staging/sha256/<hex>     a verified upload, read-only
    $OCIBRIDGE_CACHE/serve/staging/tables/<hex>     its chunk table (a large file), made as it came
    $OCIBRIDGE_CACHE/serve/staging/held/<hex>       a verified upload the registry holds, not kept here: its size
    $OCIBRIDGE_CACHE/serve/staging/tmp/             uploads in progress (removed when abandoned)
    $OCIBRIDGE_CACHE/serve/staging/parts/<oid>.<upload>.<writer>/   the parts of one LFS multipart upload
    $OCIBRIDGE_CACHE/serve/staging/pins/<hex>/      the flows that may still commit <hex>
    $OCIBRIDGE_CACHE/serve/staging/released/        committed files being removed (off the commit's path)

Every way in (an LFS PUT, a file reassembled from Xet xorbs and shards) writes into a temporary
file of ``tmp/`` and hands it to :meth:`Staging.commit_file`, which hashes it and moves it into
place only when it is the SHA-256 it claims: nothing unverified is ever offered to a commit.
A file large enough for push to bind a chunk table keeps the table made from the same bytes
beside it (:meth:`Staging.table_for`), so the commit builds its artifact without reading it.
A Xet file relayed to the registry as it was built and verified (:mod:`..xet.ahead`) is staged
as *held* (:meth:`Staging.commit_held`): its bytes are a blob of the registry repository its
commit pushes to and are not written here a second time; the commit names that blob.

How long a staged file stays follows the Hub's client flow: preupload, upload (or be told the
object is there already), then one commit naming it. Each flow that may still name a file holds
a *pin* on it (:meth:`Staging.pin`: the upload that staged it, or a batch answer that said "here
already"), per repository; the commit that names it gives its repository's pin back
(:meth:`Staging.release`) and the file goes once no flow holds one, so a landed commit leaves
nothing behind while a second client told "here already" can still commit it. Pins are files
(``pins/<sha256>/<repository>.<random>``), so serves sharing the cache volume see each other's.
A file or part
untouched for ``expiry`` seconds (no commit came: the client went away) is removed by
:meth:`Staging.clean`, which serve runs on a timer (:meth:`Staging.sweeping`). The bytes staged
and reserved by uploads in progress stay within ``budget``: :meth:`Staging.reserve` refuses an
upload that would pass it (:class:`StagingFull`, the Hub's 507) before a byte of it is written,
and so does each writer's share of it (:mod:`.shares`): one writer's uncommitted uploads never
leave another writer without room.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import quote, unquote

from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD, LayerChunks, chunk_count
from ocibridge.core import boundedjson
from ocibridge.core.environment import cache_root
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.errors import ChunkTableError, DigestMismatch, OcibridgeError
from ocibridge.hubserver.uploads import abandoned
from ocibridge.hubserver.uploads.shares import holdings, no_room, pin_tail, writer_of_pin
from ocibridge.hubserver.uploads.uploadhash import hash_file

log = logging.getLogger("ocibridge.hubserver")

_HEX64 = re.compile(r"[0-9a-f]{64}")

#: a staged upload untouched this long (no commit named it) is abandoned and removed by
#: :meth:`Staging.clean` (serve's ``--staging-expiry``)
ABANDONED_SECONDS = 3600.0
#: bytes staged uploads may take together (serve's ``--staging-budget``): a 70B model in 16 bits
#: is about 140 GB, committed at once by upload_folder; larger ones want a larger budget
BUDGET = 256 * 1024 ** 3
#: staged files from this size are removed off the commit's path (:meth:`Staging._remove_aside`)
REMOVE_ASIDE_MIN = 64 * 1024 * 1024


class StagingFull(OcibridgeError):
    """An upload would take the staging area past its budget (the Hub's 507)."""


class Staging:
    """The staging area of one serve (its cache root by default)."""

    def __init__(self, root: Path | None = None, *, budget: int = BUDGET,
                 expiry: float = ABANDONED_SECONDS) -> None:
        self.root = root if root is not None else cache_root() / "serve" / "staging"
        self.files = self.root / "sha256"
        self.tables = self.root / "tables"  # tables/<sha256>: the chunk table of a large staged file
        self.held = self.root / "held"  # held/<sha256>: the size of a staged file the registry holds
        self.tmp = self.root / "tmp"
        self.parts = self.root / "parts"
        self.pins = self.root / "pins"  # pins/<sha256>/<repository>.<random>: who may still commit it
        self.released = self.root / "released"  # released/<random>: a committed file being removed
        self.budget = budget
        self.expiry = expiry
        self._lock = threading.Lock()
        self._reserved = 0
        self._uploading: dict[str, int] = {}  # repository -> its uploads in progress here
        self._writing: dict[str, int] = {}  # writer -> bytes its uploads in progress reserved
        #: how many writers share the budget (serve: its write tokens; :mod:`.shares`)
        self.writers: Callable[[], int] = lambda: 1
        self._refreshed: dict[str, float] = {}  # repository -> when its pins were last touched

    # -- what is staged, and who may still commit it --------------------------------------------
    def pin(self, sha256: str, owner: str, writer: str = "") -> bool:
        """Note that a flow of repository ``owner`` (by ``writer``, whose share it counts in)
        may commit the staged ``sha256`` (and touch it: not abandoned); False when it is not staged."""
        with self._lock:
            if not self.has(sha256):
                return False
            held = self.pins / sha256
            held.mkdir(parents=True, exist_ok=True)
            (held / f"{_owner(owner)}.{pin_tail(writer, uuid.uuid4().hex)}").touch()
            self._refresh(owner)
            return True

    def pinned(self, sha256: str, owner: str) -> bool:
        """Whether a flow of repository ``owner`` holds a pin on ``sha256``: it uploaded those
        bytes for ``owner`` (or was told they were here, which needs the same). One copy of a file
        is kept whichever repository it came for, so this is what stops a writer of one
        repository committing what another's writer uploaded and never committed, by naming its
        SHA-256 alone: the Hub's rule is that a commit names content its repository's writers
        uploaded, or content they can read (a file of the branch, a blob of another repository
        of the registry: :mod:`.mounts`)."""
        held = self.pins / sha256
        return bool(_HEX64.fullmatch(sha256)) and held.is_dir() and any(held.glob(f"{_owner(owner)}.*"))

    def pinned_by(self, sha256: str, may: Callable[[str], bool]) -> bool:
        """Whether a repository ``may(repo_id)`` accepts holds a pin on ``sha256``."""
        if not _HEX64.fullmatch(sha256):
            return False
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            return any(may(unquote(pin.name.rpartition(".")[0])) for pin in (self.pins / sha256).iterdir())
        return False

    def _refresh(self, owner: str) -> None:
        """Touch every pin of ``owner`` and the files they hold: its flow is still uploading, so
        what it uploaded first is not abandoned (expiry counts from a flow's last upload). At
        most once a tenth of the expiry per repository: a shard of thousands of files pins each,
        and touching all of a flow's pins at each would be quadratic."""
        now = time.monotonic()
        if now - self._refreshed.get(owner, -self.expiry) < self.expiry / 10 or not self.pins.is_dir():
            return
        self._refreshed[owner] = now
        for pin in self.pins.glob(f"*/{_owner(owner)}.*"):
            with contextlib.suppress(OSError):
                os.utime(pin)
            for top in (self.files, self.held):
                with contextlib.suppress(OSError):
                    os.utime(top / pin.parent.name)

    def unpin(self, shas: Iterable[str], owner: str, writer: str = "") -> None:
        """Give back one pin of ``owner`` (``writer``'s first) on each of ``shas`` and remove
        nothing (a batch refused)."""
        with self._lock:
            for sha in set(shas):
                mine = self._pins_of(sha, owner, writer) if _HEX64.fullmatch(sha) else []
                if mine:
                    mine[0].unlink(missing_ok=True)

    def _pins_of(self, sha: str, owner: str, writer: str) -> list[Path]:
        """The pins of repository ``owner`` on ``sha``, those of ``writer`` first: the pin given
        back is the one counted in the share of the writer whose flow ends."""
        pins = sorted((self.pins / sha).glob(f"{_owner(owner)}.*"))
        return sorted(pins, key=lambda pin: writer_of_pin(pin.name) != writer) if writer else pins

    def release(self, shas: Iterable[str], owner: str, writer: str = "") -> None:
        """A commit of repository ``owner`` by ``writer`` that named ``shas`` has landed: give back
        one pin of ``owner`` (``writer``'s first) on each, and remove the files no other flow
        holds a pin on."""
        with self._lock:
            for sha in set(shas):
                if not _HEX64.fullmatch(sha):
                    continue
                held = self.pins / sha
                mine = self._pins_of(sha, owner, writer) if held.is_dir() else []
                if mine:
                    mine[0].unlink(missing_ok=True)
                if held.is_dir() and any(held.iterdir()):
                    continue
                with contextlib.suppress(OSError):
                    held.rmdir()
                self._remove_aside(self.files / sha)
                (self.held / sha).unlink(missing_ok=True)
                (self.tables / sha).unlink(missing_ok=True)

    def _remove_aside(self, path: Path) -> None:
        """Remove a staged file without the commit's answer waiting for it: a large one is renamed
        into ``released/`` at once (an upload of the same SHA-256 may take its name next) and
        unlinked on a thread of its own. Unlinking a GiB took 50-160 ms of each LFS commit's
        answer; one a stopped serve left there goes with :meth:`clean`."""
        try:
            if path.lstat().st_size < REMOVE_ASIDE_MIN:
                path.unlink()
                return
            self.released.mkdir(parents=True, exist_ok=True)
            aside = self.released / uuid.uuid4().hex
            os.replace(path, aside)
        except FileNotFoundError:
            return
        except OSError:
            path.unlink(missing_ok=True)
            return
        threading.Thread(target=aside.unlink, kwargs={"missing_ok": True}, name="staging-release",
                         daemon=True).start()

    # -- the budget -----------------------------------------------------------------------------
    def used(self) -> int:
        """Bytes staged (verified files and multipart parts) and reserved by uploads in progress."""
        total = self._reserved
        for top in (self.files, self.parts):
            if top.is_dir():
                for entry in top.rglob("*"):
                    with contextlib.suppress(OSError):
                        st = entry.lstat()
                        if not entry.is_dir():
                            total += st.st_size
        return total

    @contextlib.contextmanager
    def reserve(self, size: int, owner: str = "", writer: str = "") -> Iterator[Callable[[], None]]:
        """Room for an upload of ``size`` bytes for repository ``owner`` by ``writer`` while it is
        written (:class:`StagingFull` when the budget or the writer's share has none); meanwhile
        ``owner``'s pins do not expire. It gives a function to call once the upload's file is in
        place (:meth:`commit_file`): from then on the file counts, not the reservation, so bytes
        being relayed after they landed are not counted twice."""
        key = owner.lower()
        with self._lock:
            problem = self._no_room(size, writer)
            if problem:
                raise StagingFull(problem)
            self._reserved += size
            self._writing[writer] = self._writing.get(writer, 0) + size
            self._uploading[key] = self._uploading.get(key, 0) + 1
        left = [size]

        def landed() -> None:
            with self._lock:
                self._give_back(writer, left[0])
                left[0] = 0

        try:
            yield landed
        finally:
            with self._lock:
                self._give_back(writer, left[0])
                self._uploading[key] -= 1
                if not self._uploading[key]:
                    del self._uploading[key]
                if key:
                    self._refresh(key)

    def _give_back(self, writer: str, size: int) -> None:
        """``size`` bytes of ``writer``'s reservation no longer reserved (the lock held)."""
        if not size:
            return
        self._reserved -= size
        self._writing[writer] -= size
        if not self._writing[writer]:
            del self._writing[writer]

    def room_for(self, size: int, writer: str = "") -> str | None:
        """Why ``size`` more bytes by ``writer`` do not fit the budget or its share now (None: they do)."""
        with self._lock:
            return self._no_room(size, writer)

    def _no_room(self, size: int, writer: str = "") -> str | None:
        """Why ``size`` more bytes by ``writer`` do not fit: the budget, or others' shares of it
        (:mod:`.shares`). No bytes always fit (an upload relayed to the registry keeps none here)."""
        if size <= 0:
            return None
        held = holdings(self.pins, self.files, self.parts)
        for who, reserved in self._writing.items():
            if who:
                held[who] = held.get(who, 0) + reserved
        return no_room(self.used(), size, writer, held, self.budget, self.writers())

    def path_for(self, sha256: str) -> Path | None:
        """The verified file of ``sha256`` (64 lowercase hex), or None when it was not uploaded."""
        if not _HEX64.fullmatch(sha256):
            return None
        path = self.files / sha256
        return path if path.is_file() and not path.is_symlink() else None

    def held_size(self, sha256: str) -> int | None:
        """The size of ``sha256`` staged as held by the registry (:meth:`commit_held`), or None."""
        if not _HEX64.fullmatch(sha256):
            return None
        try:
            text = (self.held / sha256).read_text()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def size_of(self, sha256: str) -> int | None:
        """The size of the staged ``sha256``, kept here or held by the registry; None: not staged."""
        path = self.path_for(sha256)
        if path is not None:
            with contextlib.suppress(OSError):
                return path.stat().st_size
        return self.held_size(sha256)

    def has(self, sha256: str) -> bool:
        """Whether ``sha256`` is staged: a commit may name it (kept here, or held by the registry)."""
        return self.size_of(sha256) is not None

    @contextlib.contextmanager
    def new_file(self) -> Iterator[tuple[Path, int]]:
        """A temporary file of ``tmp/`` to write an upload into: ``(path, fd)``; removed on leaving
        unless :meth:`commit_file` took it."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix="upload-")
        path = Path(name)
        try:
            yield path, fd
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def commit_file(self, path: Path, sha256: str, *, hashed: str | None = None,
                    chunks: tuple[str, ...] | None = None, tabled: bool = False) -> Path:
        """Move the finished upload ``path`` into place as ``sha256``, once its bytes hash to it
        (:class:`ocibridge.errors.DigestMismatch` otherwise: the file is removed). ``hashed``:
        the SHA-256 the writer computed of the very bytes it wrote (a Xet file rebuilt here, an LFS PUT as it arrived),
        so the file is not read again for it; ``chunks``: their chunk digests in
        :data:`DEFAULT_CHUNK_SIZE` pieces, made from those bytes too, for a file of
        :data:`PUSH_THRESHOLD` bytes or more (``tabled``: made here, when this reads the file to
        hash it: an upload a commit will name)."""
        if not _HEX64.fullmatch(sha256):
            raise DigestMismatch(f"upload: {sha256!r} is not a SHA-256 (64 lowercase hex digits)")
        size = path.stat().st_size
        if hashed is None:
            hashed, chunks = hash_file(path, size if tabled else 0)
        if hashed != sha256:
            path.unlink(missing_ok=True)
            raise DigestMismatch(f"upload: the bytes sent hash to sha256:{hashed}, not sha256:{sha256}")
        self.files.mkdir(parents=True, exist_ok=True)
        path.chmod(0o444)
        target = self.files / sha256
        os.replace(path, target)
        self._keep_table(sha256, size, chunks)  # after the file: clean() drops a table without one
        return target

    def commit_held(self, sha256: str, size: int, chunks: tuple[str, ...] | None) -> None:
        """Stage ``sha256`` as held: verified bytes that are a blob of the registry repository a
        commit of them pushes to and are not kept here (a Xet file relayed as it was built,
        :mod:`..xet.ahead`), with ``chunks``, their chunk table made as they passed."""
        if not _HEX64.fullmatch(sha256):
            raise DigestMismatch(f"upload: {sha256!r} is not a SHA-256 (64 lowercase hex digits)")
        self.held.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.held / sha256, str(size).encode(), 0o444)
        self._keep_table(sha256, size, chunks)  # after the record, as commit_file does

    def _keep_table(self, sha256: str, size: int, chunks: tuple[str, ...] | None) -> None:
        """The chunk table of the staged ``sha256`` (``size`` bytes), when it is large enough to have one."""
        if chunks is not None and size >= PUSH_THRESHOLD:
            # serve's chunk hashers (here, xet/, lfs/) are all made with the default hash, push's
            table = LayerChunks(f"sha256:{sha256}", size, chunks, hashes.DEFAULT)
            doc = {**table.as_dict(), "algorithm": table.algorithm}
            atomic_write_bytes(self.tables / sha256, json.dumps(doc).encode(), 0o444)

    def drop_held(self, sha256: str) -> None:
        """Forget that the registry holds ``sha256`` (it no longer does): a commit cannot name
        it, and the client is asked for its bytes again."""
        if not _HEX64.fullmatch(sha256):
            return
        with self._lock:
            (self.held / sha256).unlink(missing_ok=True)
            if self.path_for(sha256) is None:  # nothing of it staged now: its table and pins go too
                (self.tables / sha256).unlink(missing_ok=True)
                shutil.rmtree(self.pins / sha256, ignore_errors=True)

    def table_for(self, sha256: str) -> LayerChunks | None:
        """The chunk table of the staged ``sha256`` in :data:`DEFAULT_CHUNK_SIZE` pieces, made from
        the bytes that hashed to it (None: not large, or none kept)."""
        size = self.size_of(sha256)
        if size is None:
            return None
        try:
            doc = boundedjson.loads((self.tables / sha256).read_bytes())
            algorithm = hashes.check_name(doc.get("algorithm", hashes.SHA256))  # none: staged before BLAKE3
            table = LayerChunks(str(doc["digest"]), int(doc["size"]), tuple(str(c) for c in doc["chunks"]), algorithm)
        except (OSError, ValueError, KeyError, TypeError, ChunkTableError):
            return None
        whole = table.digest == f"sha256:{sha256}" and table.size == size
        return table if whole and len(table.chunks) == chunk_count(table.size, DEFAULT_CHUNK_SIZE) else None

    def clean(self, now: float | None = None) -> int:
        """Remove what no commit came for within :attr:`expiry` seconds: uploads in progress,
        staged files and multipart parts untouched that long (and their pins); how many went."""
        with self._lock:
            removed = abandoned.clean(self, self._uploading, time.time() if now is None else now)
        if removed:
            log.info("staging: %d abandoned uploads removed (untouched for %gs)", removed, self.expiry)
        return removed

    @contextlib.contextmanager
    def sweeping(self) -> Iterator[None]:
        """:meth:`clean` every while (a tenth of :attr:`expiry`, at most a minute) in a thread,
        until leaving: abandoned uploads go even when no other upload comes."""
        stop = threading.Event()

        def sweep() -> None:
            while not stop.wait(min(60.0, max(0.1, self.expiry / 10))):
                try:
                    self.clean()
                except Exception as e:  # noqa: BLE001 - the next sweep tries again
                    log.warning("staging: cleaning up failed: %s", e)

        thread = threading.Thread(target=sweep, name="staging-sweep", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)


def _owner(repo_id: str) -> str:
    """A repository id as one file name (lowercase, ``/`` and ``%`` quoted)."""
    return quote(repo_id.lower(), safe="")
