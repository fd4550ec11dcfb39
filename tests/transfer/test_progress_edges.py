"""Issue 32 D: a bar on a terminal that reports 0 columns (a pty as ``script -q -c …`` opens
it), and blob counts that include blobs found present or mounted as they are found."""

from __future__ import annotations

import os
import pty
import time

from support.pty_screen import read_screen

from ocibridge.oci.digest import sha256_bytes
from ocibridge.oci.models import Descriptor
from ocibridge.transfer.progress import REFRESH_SECONDS, ProgressBar


def _blob(i: int, size: int = 1000) -> Descriptor:
    return Descriptor(mediaType="x", digest=sha256_bytes(str(i).encode()), size=size)


def _screen(master: int) -> str:
    os.set_blocking(master, False)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        out += data
    return out.decode(errors="replace")


def test_a_terminal_of_zero_columns_still_gets_a_bar(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = pty.openpty()  # a new pty reports 0 rows and 0 columns, as under `script`
    assert os.get_terminal_size(slave).columns == 0
    with os.fdopen(slave, "w", closefd=True) as term:
        bar = ProgressBar("push", file=term)
        blob = _blob(1, 1 << 20)
        bar("plan", blob, 0)
        bar("bytes", blob, 1 << 19)
        bar.close()
        term.flush()
        screen = _screen(master)
    os.close(master)
    assert "50%" in screen or "100%" in screen, screen
    # a drawn bar: the bar's own delimiters around block characters, on a line of the fallback width
    assert "█" in screen and "|" in screen, screen
    import re
    drawn = [line for line in re.split(r"[\r\n]", screen) if "%" in line]
    assert drawn and all(60 <= len(line.rstrip()) <= 80 for line in drawn), drawn


def test_blobs_found_present_count_as_they_are_found():
    master, slave = pty.openpty()
    with os.fdopen(slave, "w", closefd=True) as term:
        bar = ProgressBar("push", file=term)
        blobs = [_blob(i) for i in range(5)]
        for b in blobs:
            bar("plan", b, 0)
        bar("skip", blobs[0], blobs[0].size)
        time.sleep(REFRESH_SECONDS + 0.05)
        bar("mount", blobs[1], blobs[1].size)
        time.sleep(REFRESH_SECONDS + 0.05)
        bar("skip", blobs[2], blobs[2].size)
        term.flush()
        before_close = _screen(master)
        bar.close()
    os.close(master)
    assert "push 3/5 blobs, 2 already there, 1 mounted" in before_close, before_close
    assert "push 0/5 blobs" not in before_close.split("\r")[-1], before_close


def _cli_on_a_zero_size_terminal(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """The real CLI with stderr on a pty that reports 0 rows and 0 columns (set so with
    TIOCSWINSZ, as `script -qec` leaves it when it has no terminal of its own)."""
    import fcntl
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    assert os.get_terminal_size(slave) == os.terminal_size((0, 0))
    child = "import sys; from ocibridge.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", child, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    screen = read_screen(master)
    return proc.wait(timeout=60), screen.decode(errors="replace")


def test_a_push_on_a_zero_size_terminal_draws_its_bar(tmp_path):
    """tqdm asked the terminal for the rows it was not given and got none: it drew nothing
    at all, with --progress bar too (issue 42). Now $COLUMNS or 80 columns, $LINES or 24 rows."""
    import re

    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(os.urandom(3 << 20))
    (model / "config.json").write_text("{}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    for extra in ((), ("--progress", "bar")):
        code, screen = _cli_on_a_zero_size_terminal("push", str(model), f"oci:{tmp_path}/l{len(extra)}:v1",
                                                    *extra, env=env)
        assert code == 0, screen
        drawn = [line for line in re.split(r"[\r\n]", screen) if re.search(r"push \d+/\d+ blobs", line)]
        assert drawn, screen
        assert "100%" in drawn[-1] and "█" in drawn[-1] and all(len(line.rstrip()) <= 80 for line in drawn), drawn
    env["COLUMNS"] = "100"
    code, screen = _cli_on_a_zero_size_terminal("push", str(model), f"oci:{tmp_path}/l9:v1", env=env)
    drawn = [line for line in re.split(r"[\r\n]", screen) if "100%" in line]
    assert code == 0 and drawn and all(80 < len(line.rstrip()) <= 100 for line in drawn), drawn
