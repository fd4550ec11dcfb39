"""Progress bars: byte-level on a terminal (a real pty), absent when piped or with --json."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

from support.pty_screen import read_screen

from ocibridge.oci.digest import VerifyingReader, sha256_bytes
from ocibridge.oci.models import Descriptor
from ocibridge.transfer.progress import REPORT_BYTES, ProgressBar, counting

BIG = 8 * REPORT_BYTES  # one blob of 2 MiB: eight byte reports while it is read
FRAME = re.compile(r"(push|pull|copy|path) (\d+)/(\d+) blobs(?:, \d+ already there)?(?:, \d+ mounted)?:\s+(\d+)%")

# The child runs the real CLI; only the redraw interval is set to 0 so that every byte report
# is drawn (a transfer over loopback is too quick for tqdm's 0.2 s timer otherwise).
CHILD = (
    "import sys, ocibridge.transfer.progress as p; p.REFRESH_SECONDS = 0; "
    "from ocibridge.cli import main; sys.exit(main(sys.argv[1:]))"
)


def make_big_model(root):
    """A model whose weights take a progress bar a while (BIG bytes)."""
    root.mkdir()
    (root / "model.safetensors").write_bytes(os.urandom(BIG))
    (root / "config.json").write_text('{"hidden": 4}\n')
    return root


def on_terminal(*args: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pty (120 columns); return code, stdout, terminal text."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    screen = read_screen(master)
    out = proc.stdout.read()
    proc.wait(timeout=60)
    return proc.returncode, out.decode(), screen.decode(errors="replace")


def frames(screen: str) -> list[tuple[str, int, int, int]]:
    return [(m[1], int(m[2]), int(m[3]), int(m[4])) for m in FRAME.finditer(screen)]


def assert_advances_mid_blob(screen: str, command: str) -> None:
    seen = frames(screen)
    assert seen and all(f[0] == command for f in seen), screen[-500:]
    # The 2 MiB file is almost all the bytes: a frame between 10 % and 90 % is drawn while
    # it is being read. A bar that moves only when a blob ends jumps from ~0 % to ~100 %.
    assert any(10 <= pct <= 90 for *_, pct in seen), seen
    assert seen[-1][1] == seen[-1][2] and seen[-1][3] == 100, seen[-1]


def test_push_pull_copy_draw_byte_level_bars_on_a_terminal(tmp_path, registry, unique_repo):
    model = make_big_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"

    code, out, screen = on_terminal("push", str(model), ref)
    assert code == 0, screen
    assert_advances_mid_blob(screen, "push")
    assert out.startswith("pushed ") and "\r" not in out and "blobs:" not in out

    code, out, screen = on_terminal("pull", ref, str(tmp_path / "out"))
    assert code == 0, screen
    assert_advances_mid_blob(screen, "pull")
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()
    assert "\r" not in out

    code, out, screen = on_terminal("copy", ref, f"oci:{tmp_path}/layout:v1")
    assert code == 0, screen
    assert_advances_mid_blob(screen, "copy")
    assert "\r" not in out


def test_path_draws_the_bar_pull_draws_and_stdout_stays_the_path(tmp_path, registry, unique_repo):
    model = make_big_model(tmp_path / "m")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert on_terminal("push", str(model), ref, "-q")[0] == 0

    code, out, screen = on_terminal("path", ref)
    assert code == 0, screen
    assert_advances_mid_blob(screen, "path")
    where = Path(out.strip())
    assert "\r" not in out
    assert (where / "model.safetensors").read_bytes() == (model / "model.safetensors").read_bytes()

    code, again, screen = on_terminal("path", ref, "--progress", "bar")  # cached: the warm answer draws nothing
    assert (code, again, screen) == (0, out, "")


def test_no_bar_when_piped_or_json_or_quiet(tmp_path):
    model = make_big_model(tmp_path / "m")
    proc = subprocess.run([sys.executable, "-c", CHILD, "push", str(model), f"oci:{tmp_path}/s:a"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.startswith("pushed ")

    code, out, screen = on_terminal("push", str(model), f"oci:{tmp_path}/s:b", "--json")
    assert code == 0 and screen == ""
    assert json.loads(out)["digest"].startswith("sha256:")

    code, out, screen = on_terminal("pull", f"oci:{tmp_path}/s:b", str(tmp_path / "o"), "-q")
    assert code == 0 and screen == "" and out.startswith("pulled ")

    for quiet in (("-q",), ("--json",)):
        code, out, screen = on_terminal("path", f"oci:{tmp_path}/s:b", *quiet)
        assert code == 0 and screen == "" and "snapshots" in out
        shutil.rmtree(os.environ["OCIBRIDGE_CACHE"], ignore_errors=True)  # not warm next time


def test_bar_counts_each_blob_at_most_its_size():
    sink = io.StringIO()
    bar = ProgressBar("copy", file=sink)
    a = Descriptor(mediaType="x", digest=sha256_bytes(b"a"), size=100)
    b = Descriptor(mediaType="x", digest=sha256_bytes(b"b"), size=50)
    bar("plan", a, 0)
    bar("plan", b, 0)
    bar("bytes", a, 70)
    bar("bytes", a, 70)  # a resumed upload reads part of it again
    assert bar.counted == 100
    bar("done", a, 100)
    bar("skip", a, 100)  # seen again (a shared blob): nothing more
    bar("skip", b, 50)  # already there: leaves the total rather than filling it
    assert (bar.counted, bar.total) == (100, 100)
    bar.close()
    assert "copy 2/2 blobs, 1 already there" in sink.getvalue()


def test_a_mounted_blob_is_counted_as_mounted_as_the_result_says():
    sink = io.StringIO()
    bar = ProgressBar("copy", file=sink)
    a, b = (Descriptor(mediaType="x", digest=sha256_bytes(d), size=10) for d in (b"a", b"b"))
    for desc in (a, b):
        bar("plan", desc, 0)
    bar("mount", a, 10)
    bar("skip", b, 10)
    bar.close()
    assert "copy 2/2 blobs, 1 already there, 1 mounted" in sink.getvalue()


def test_counting_keeps_a_verifying_reader_and_counts_what_it_reads():
    data = os.urandom(3 * REPORT_BYTES + 5)
    desc = Descriptor(mediaType="x", digest=sha256_bytes(data), size=len(data))
    events = []
    reader = VerifyingReader(io.BytesIO(data), desc.digest, desc.size)
    counted = counting(reader, desc, lambda e, d, n: events.append((e, n)))
    assert counted is reader  # a destination still sees a source that verifies itself
    reads = 0
    while counted.read(100_000):
        reads += 1
    assert reader.verified and sum(n for _, n in events) == len(data)
    # reported in steps of REPORT_BYTES (the rest at the end), not once per read
    assert len(events) < reads and all(n >= REPORT_BYTES for _, n in events[:-1])

    plain = counting(io.BytesIO(data), desc, lambda e, d, n: events.append((e, n)))
    plain.read(10)
    plain.seek(0)  # an upload resuming by seek still can
    assert plain.read() == data
