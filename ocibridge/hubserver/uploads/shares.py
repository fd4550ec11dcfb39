"""Each writer's share of ``--staging-budget``: one writer that stages and never
commits must not leave every other writer a 507 for the whole ``--staging-expiry``.

A *writer* is a write token (its client name, :meth:`.access.Signer.client_of` of the Xet
signer: the same name whichever protocol it uploads by), not a repository: one token may
write many repositories under its prefix (``create_repo`` makes as many as it likes), so a share
per repository would be as many shares as an attacker creates. Half of the budget is split in
equal *guaranteed shares* among the write tokens serve knows (``budget // (2 × writers)``); the
other half is a pool any writer uses, first come, once past its own share. An upload fits when,
after it, the free space still covers every other writer's guaranteed share it has not used:
so however much one writer stages, every other one can still stage its share, while a writer
alone may use its share and the whole pool (all of the budget, when it is the only write
token). What a writer holds is what it staged
and has not committed (each staged file it holds a pin on, once per file, however many
repositories it pinned it for), its multipart parts, and its uploads in flight: a writer's
uncommitted uploads fill its own share first, then the pool, never another's share. The whole
budget still bounds everything together (files staged before a restart, or by another serve on the
same cache volume, count there).

Who staged what is kept in the names of the staging area's files, so serves sharing the cache
volume agree: a pin ``pins/<sha256>/<repository>.<writer>-<random>`` and a multipart upload's
folder ``parts/<oid>.<upload>.<writer>``.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

_WRITER = re.compile(r"[0-9a-f]{1,64}")


def pin_tail(writer: str, random: str) -> str:
    """What follows ``<repository>.`` in a pin's name: the writer (when known) and a random part."""
    return f"{writer}-{random}" if writer else random


def writer_of_pin(name: str) -> str:
    """The writer a pin's file name records ("": none, a pin made before writers were kept)."""
    tail = name.rpartition(".")[2]
    writer, sep, _ = tail.partition("-")
    return writer if sep and _WRITER.fullmatch(writer) else ""


def writer_of_parts(name: str) -> str:
    """The writer a multipart upload's folder name records (``<oid>.<upload>.<writer>``)."""
    fields = name.split(".")
    return fields[2] if len(fields) == 3 and _WRITER.fullmatch(fields[2]) else ""


def holdings(pins: Path, files: Path, parts: Path) -> dict[str, int]:
    """Bytes each writer holds in staging: each file it pinned (once), and its multipart parts."""
    pinned: dict[str, set[str]] = {}
    for pin in pins.glob("*/*") if pins.is_dir() else ():
        writer = writer_of_pin(pin.name)
        if writer:
            pinned.setdefault(writer, set()).add(pin.parent.name)
    held: dict[str, int] = {}
    for writer, shas in pinned.items():
        for sha in shas:
            with contextlib.suppress(OSError):
                held[writer] = held.get(writer, 0) + (files / sha).stat().st_size
    for folder in parts.iterdir() if parts.is_dir() else ():
        writer = writer_of_parts(folder.name)
        for entry in folder.iterdir() if writer and folder.is_dir() else ():
            with contextlib.suppress(OSError):
                held[writer] = held.get(writer, 0) + entry.stat().st_size
    return held


def guaranteed(budget: int, writers: int) -> int:
    """Each writer's guaranteed share: half the budget, split evenly among the write tokens."""
    return budget // (2 * max(1, writers))


def no_room(used: int, size: int, writer: str, held: dict[str, int], budget: int, writers: int) -> str | None:
    """Why ``size`` more bytes by ``writer`` do not fit (None: they do). ``used``: every byte
    staged and reserved; ``held``: each writer's. They fit when, after them, the free space
    still covers every other writer's guaranteed share it has not used yet: so what a writer
    holds fills its own guaranteed share first, then the half of the budget all share."""
    share = guaranteed(budget, writers)
    others = [min(n, share) for who, n in held.items() if who != writer][:max(0, writers - 1)]
    kept_free = max(0, writers - 1) * share - sum(others)  # the others' shares, not yet used
    if used + size + kept_free <= budget:
        return None
    if used + size > budget:
        return (f"serve's staging area is full: {used} of its {budget} bytes are held by uploads not yet "
                f"committed, and {size} more were asked for (commit or wait for the uploads in flight, or start "
                "serve with a larger --staging-budget)")
    return (f"your uploads not yet committed hold {held.get(writer, 0)} bytes of serve's staging area, and "
            f"{size} more would take room kept for other writers ({share} bytes each: half of "
            f"--staging-budget {budget} shared by {writers} write tokens): commit what you uploaded, or wait "
            "for it to expire")
