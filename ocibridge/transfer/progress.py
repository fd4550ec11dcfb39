"""Transfer progress: the events copies and pulls report, and the tqdm bar that shows them.

Every transfer reports ``progress(event, descriptor, nbytes)``:

| event | meaning |
|---|---|
| ``plan`` | the blob will be handled (counts toward the total) |
| ``start`` | its transfer begins |
| ``bytes`` | ``nbytes`` more of it were read from the source |
| ``done`` / ``skip`` / ``mount`` | it is finished: sent, already there, or mounted |

Bytes are counted where the source is read (a file, a layout blob, a registry download),
so one mechanism covers push, pull and copy between any two stores, and a copy between two
registries counts each byte once. Counting costs one addition per read; the bar hears of it
once per ``REPORT_BYTES`` per blob, and tqdm redraws at most every ``REFRESH_SECONDS``.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, BinaryIO, TextIO

from ocibridge.core.streams import PassingReader
from ocibridge.core.terminal import one_line
from ocibridge.core.termwidth import fallback_columns, fallback_lines, reported_columns, reported_lines
from ocibridge.oci.digest import HashingReader
from ocibridge.oci.models import Descriptor
from ocibridge.transfer.progress_events import ProgressFn, event_of

__all__ = ["REPORT_BYTES", "ProgressBar", "ProgressFn", "counting"]

#: A reader passes on its count after this many bytes (and at the end of the blob).
REPORT_BYTES = 256 * 1024
#: The bar is redrawn at most this often.
REFRESH_SECONDS = 0.2


class _Tally:
    """Bytes read from one blob, passed on to ``progress`` in steps of ``REPORT_BYTES``.

    One per reader, used by the thread that reads it: no lock on the hot path."""

    __slots__ = ("desc", "progress", "pending")

    def __init__(self, desc: Descriptor, progress: ProgressFn):
        self.desc = desc
        self.progress = progress
        self.pending = 0

    def add(self, n: int) -> None:
        self.pending += n
        if self.pending >= REPORT_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            n, self.pending = self.pending, 0
            self.progress("bytes", self.desc, n)


class _CountingReader(PassingReader):
    """A reader that tallies what is read through it; seeks pass through (upload resume)."""

    def __init__(self, raw: BinaryIO, tally: _Tally):
        super().__init__(raw)
        self._tally = tally

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            self._tally.add(len(data))
        else:
            self._tally.flush()
        return data

    def close(self) -> None:
        self._tally.flush()
        super().close()


def counting(reader: BinaryIO, desc: Descriptor, progress: ProgressFn | None) -> BinaryIO:
    """``reader``, reporting ``bytes`` events for ``desc`` as it is read.

    A hashing (verifying) reader keeps its identity and counts what it reads underneath, so a
    destination that recognises a source already verifying the digest does not hash again.
    """
    if progress is None:
        return reader
    tally = _Tally(desc, progress)
    if isinstance(reader, HashingReader):
        reader._raw = _CountingReader(reader._raw, tally)  # type: ignore[arg-type]  # its raw stream is a file-like reader
        return reader
    return _CountingReader(reader, tally)  # type: ignore[return-value]  # a counting read()-stream standing in for the BinaryIO it wraps


class ProgressBar:
    """One aggregate byte bar over every blob of a transfer, with a blob count and the file
    in flight.

    Thread-safe: the copy's workers report at once. Each blob counts at most its size, so a
    resumed or restarted transfer never pushes the bar past its total. The bar is drawn only at
    the first event after the ``plan`` events, so its total is known when it appears; a blob
    found already there (or mounted) leaves the total instead of filling it, so a re-push that
    sends nothing does not draw a transfer.
    """

    def __init__(self, label: str, file: TextIO | None = None):
        self._label = label
        self._file = file or sys.stderr
        self._bar: Any = None
        self._total = 0
        self._lock = threading.Lock()
        self._blobs: dict[str, list[int]] = {}  # digest → [size, bytes counted, finished]
        self._finished = 0
        self._present = 0  # skipped: already there
        self._mounted = 0  # mounted from another repository (the result says "mounted" too)
        self._active: dict[str, str] = {}  # digest → name, of blobs being transferred
        self._drawn_at = 0.0  # when the counts were last drawn by _redraw

    def __call__(self, event: str, desc: Descriptor, nbytes: int) -> None:
        with self._lock:
            blob = self._blobs.get(desc.digest)
            if blob is None:
                blob = self._blobs[desc.digest] = [desc.size, 0, 0]
                self._total += desc.size
            if event == "plan" or blob[2]:
                if self._bar is not None:
                    self._bar.total = self._total
                    self._describe()
                return  # finished: a later skip or a re-read changes nothing
            bar = self._drawn()
            if event == "bytes":
                step = min(nbytes, blob[0] - blob[1])
                if desc.digest not in self._active:  # a file hashed while sent has no start
                    self._active[desc.digest] = _name(desc)
                    self._describe()
            elif event in ("skip", "mount"):
                self._total -= blob[0] - blob[1]
                bar.total = self._total
                blob[2] = 1
                self._finished += 1
                if event == "mount":
                    self._mounted += 1
                else:
                    self._present += 1
                self._describe()
                self._redraw()  # no byte moves for it: the count must show by itself
                return
            elif event == "done":
                step = blob[0] - blob[1]
                blob[2] = 1
                self._finished += 1
                self._active.pop(desc.digest, None)
                self._describe()
                if step <= 0:
                    self._redraw()
            elif event == "start":
                self._active[desc.digest] = _name(desc)
                self._describe()
                return
            else:
                return
            if step > 0:
                blob[1] += step
                bar.update(step)

    def _drawn(self) -> Any:
        if self._bar is None:
            from tqdm import tqdm

            # a terminal that reports 0 columns gets a fixed width, not tqdm's bar-less line
            sized = reported_columns(self._file) > 0
            self._bar = tqdm(
                total=self._total, unit="B", unit_scale=True, unit_divisor=1024,
                desc=f"{self._label} {self._finished}/{len(self._blobs)} blobs",
                file=self._file, leave=True, dynamic_ncols=sized,
                ncols=None if sized else fallback_columns(),
                nrows=None if reported_lines(self._file) > 0 else fallback_lines(),
                mininterval=REFRESH_SECONDS, miniters=1,
            )
            self._describe()
        return self._bar

    def _describe(self) -> None:
        if self._bar is None:
            return
        present = f", {self._present} already there" if self._present else ""
        present += f", {self._mounted} mounted" if self._mounted else ""
        self._bar.set_description_str(
            f"{self._label} {self._finished}/{len(self._blobs)} blobs{present}", refresh=False)
        names = list(self._active.values())
        # The newest transfer is named: the first one in flight can be a small blob whose end
        # the bar never draws (a config seen while every file went by unnamed).
        current = names[-1][-40:] if names else ""
        if len(names) > 1:
            current += f" +{len(names) - 1}"  # more files in flight
        self._bar.set_postfix_str(one_line(current), refresh=False)

    def _redraw(self) -> None:
        """Draw the counts now unless drawn less than ``REFRESH_SECONDS`` ago (a burst of
        blobs found present costs one draw per interval; the last one shows at close)."""
        now = time.monotonic()
        if now - self._drawn_at >= REFRESH_SECONDS:
            self._drawn_at = now
            self._bar.refresh()

    @property
    def counted(self) -> int:
        return int(self._bar.n) if self._bar is not None else 0

    @property
    def total(self) -> int:
        return self._total

    def close(self) -> None:
        if self._bar is None and self._blobs:
            self._drawn()
        if self._bar is not None:
            self._active.clear()
            self._describe()
            self._bar.refresh()
            self._bar.close()


def _name(desc: Descriptor) -> str:
    return event_of("start", desc, 0).name
