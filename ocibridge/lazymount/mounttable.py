"""The kernel's table of mounts, as the mount's commands need it: is a directory mounted, by
which process, and unmounting it (``fusermount3 -u``) until that process has let go.

A mount names its process in its source (``ocibridge:PID``, FUSE's ``fsname``). When that
process is an ``ocibridge mount … --foreground`` or the process ``ocibridge.mount`` starts
(``python -m ocibridge.api.mount``), ``ocibridge umount`` returns only once it has ended, after
it wrote out what it fetched (chunks go to the model cache on a thread of their own): a mount
of the same model right after finds all of it. (libfuse closes its connection before the file
system hears of the end, so the connection cannot tell; a program serving a mount itself
through ``serve_mount`` goes on: not waited for.)
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ocibridge.errors import OcibridgeError

FSNAME = "ocibridge"
#: how long ``umount`` waits for a mount command's process to end
END_SECONDS = 30.0


@dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo``: where, what type, from what source."""

    point: bytes
    fstype: str
    source: str
    device: str = ""  # "major:minor" (a FUSE mount's names its backing device: /sys/class/bdi/<device>)

    @property
    def pid(self) -> int | None:
        """The process serving an ocibridge mount (None: another file system)."""
        name, _, pid = self.source.partition(":")
        return int(pid) if name == FSNAME and self.fstype == f"fuse.{FSNAME}" and pid.isdigit() else None

    @property
    def foreign(self) -> bool:
        """Another file system than an ocibridge mount (a tmpfs, a disk, another FUSE program's):
        ``fusermount3 -u`` run as root would unmount it all the same. (Without the kernel's
        table the type is not known: not foreign.)"""
        return bool(self.fstype) and self.fstype != f"fuse.{FSNAME}"


def _unescape(field: bytes) -> bytes:
    """mountinfo writes a space, tab, newline or backslash as a backslash and three octal digits."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


def mount_entry(directory: Path) -> MountEntry | None:
    """The mount at ``directory``, by the kernel's table (a FUSE mount whose loop ended no longer
    answers ``stat``, so ``os.path.ismount`` would say no); the last one where mounts stack."""
    wanted = os.fsencode(directory.absolute())
    try:
        with open("/proc/self/mountinfo", "rb") as table:
            lines = table.read().splitlines()
    except OSError:
        return MountEntry(wanted, "", "") if os.path.ismount(directory) else None
    found = None
    for line in lines:
        before, _, after = line.partition(b" - ")
        fields, tail = before.split(b" "), after.split(b" ")
        if len(fields) > 4 and len(tail) > 1 and _unescape(fields[4]) == wanted:
            found = MountEntry(wanted, tail[0].decode(errors="replace"), _unescape(tail[1]).decode(errors="replace"),
                               fields[2].decode(errors="replace"))
    return found


def is_mounted(directory: Path) -> bool:
    return mount_entry(directory) is not None


def refuse_a_mount_point(directory: Path) -> None:
    """A mount is not stacked on another: the error says the way out, which for another file
    system's mount point is a directory inside it (``ocibridge umount`` would not unmount it)."""
    entry = mount_entry(directory)
    if entry is None:
        return
    if entry.foreign:
        raise OcibridgeError(f"{directory} is the mount point of a {entry.fstype}: mount the model on a directory "
                             f"inside it (ocibridge mount REF {directory}/NAME)")
    raise OcibridgeError(f"{directory} is a mount point already (ocibridge umount {directory})")


def clear_dead_mount(directory: Path) -> bool:
    """Unmount a FUSE mount at ``directory`` whose process is gone (``stat`` answers "Transport
    endpoint is not connected", or at first "connection abort": a mount process killed, a
    DaemonSet's container restarted), so it can be mounted again; whether there was one. Only
    an ocibridge mount: another program's dead mount is left for its owner (the mount refuses
    the directory)."""
    entry = mount_entry(directory)
    if entry is None or entry.foreign:
        return False
    try:
        os.stat(directory)
    except OSError as e:
        if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED):
            raise
        unmount_directory(directory, lazy=True)
        return True
    return False


def unmount_directory(directory: Path, *, lazy: bool = False) -> None:
    """``fusermount3 -u`` (``-z``: detach now, finish when the last file is closed), then, for a
    mount another ocibridge process serves, wait until that process let go of it."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool is None:
        raise OcibridgeError("unmounting needs fusermount3 (Debian, Ubuntu: apt-get install fuse3)")
    entry = mount_entry(directory)
    done = subprocess.run([tool, "-uz" if lazy else "-u", str(directory)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        if said.endswith(os.strerror(errno.EBUSY)):  # what holds it, and the ways out
            said += (" (a program has a file open there or works inside it: end it, then run this again; "
                     f"{os.path.basename(tool)} -uz {directory} detaches it now)")
        raise OcibridgeError(f"could not unmount {directory}: {said.removeprefix(tool + ': ')}")
    pid = None if entry is None else entry.pid
    if pid is not None and pid != os.getpid() and _is_mount_command(pid):
        deadline = time.monotonic() + END_SECONDS
        while time.monotonic() < deadline and _is_mount_command(pid):
            time.sleep(0.02)


def _is_mount_command(pid: int) -> bool:
    """Whether process ``pid`` runs ``ocibridge mount … --foreground`` or is the process
    ``ocibridge.mount`` starts (False: gone)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ocibridge.api.mount" in words or (b"mount" in words and b"--foreground" in words)
