"""Running the CLI in a fresh interpreter that counts the registry clients it makes and closes,
with ``ResourceWarning`` as an error (or several commands, each in a process forked from one such
interpreter): shared by the tests that check clients are closed and that references are parsed once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

#: the start of a probe: ``made`` (ids of clients made) and ``closed`` (ids closed) count them
CLIENT_COUNTER = """
import gc, sys
from ocibridge.stores.registry import client
made, closed = [], set()
init, close = client.RegistryClient.__init__, client.RegistryClient.close
def counting_init(self, *a, **k):
    made.append(id(self)); init(self, *a, **k)
def counting_close(self):
    closed.add(id(self)); close(self)
client.RegistryClient.__init__ = counting_init
client.RegistryClient.close = counting_close
"""


def run_probe(code: str, cwd: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with ``ResourceWarning`` as an error: an unclosed file, socket
    or process is a line naming it on stderr (the filter is all it takes; ``-X dev``'s debug
    allocator and its other checks cost a third more CPU and see nothing more of this)."""
    return subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", code, *argv],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={"PYTHONPATH": str(REPO_ROOT), "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


#: between a probe's set-up and its tail: one forked child per entry of the batch (``args``), in
#: order, each with its own stdout and stderr files; the parent waits for each and exits
_FORK_EACH = """
import json as _json, os as _os
_out = sys.argv[2]
for _index, args in enumerate(_json.loads(sys.argv[1])):
    sys.stdout.flush(); sys.stderr.flush()
    _child = _os.fork()
    if _child == 0:
        for _fd, _name in ((1, "out"), (2, "err")):
            _file = _os.open(_os.path.join(_out, f"{_index}.{_name}"), _os.O_WRONLY | _os.O_CREAT, 0o600)
            _os.dup2(_file, _fd)
            _os.close(_file)
        break
    _status = _os.waitpid(_child, 0)[1]
    with open(_os.path.join(_out, f"{_index}.rc"), "w") as _rc:
        _rc.write(str(_os.waitstatus_to_exitcode(_status)))
else:
    sys.exit(0)
"""


def run_probe_each(setup: str, tail: str, batch: list[list[str]], cwd: Path,
                   out: Path) -> list[subprocess.CompletedProcess[str]]:
    """``setup`` once, then ``tail`` (which reads ``args``) for each argument list of ``batch`` in a
    process forked from that state: each starts as a fresh interpreter that ran ``setup`` would,
    knowing nothing an earlier one did, without paying an interpreter's start and imports again."""
    out.mkdir(parents=True, exist_ok=True)
    done = run_probe(setup + _FORK_EACH + tail, cwd, json.dumps(batch), str(out), timeout=60 + 60 * len(batch))
    assert done.returncode == 0, (done.stdout, done.stderr)
    results = []
    for index, args in enumerate(batch):
        rc = out / f"{index}.rc"
        results.append(subprocess.CompletedProcess(
            args, int(rc.read_text()) if rc.exists() else -1,
            (out / f"{index}.out").read_text(), (out / f"{index}.err").read_text()))
    return results


def small_model(parent: Path) -> Path:
    """A two-file model directory under ``parent``."""
    model = parent / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 50_000)
    (model / "config.json").write_text("{}")
    return model
