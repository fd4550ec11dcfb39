"""The queue of writes nobody waits for (core/writebehind.py, issue 91): jobs run in order off
the caller's thread, ``settle`` waits for them, the jobs left run at exit, and a forked child
has a queue of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ocibridge.core.writebehind import WriteBehind

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_jobs_run_in_order_off_the_callers_thread_and_settle_waits_for_them():
    queue = WriteBehind("test-writes")
    seen: list[tuple[int, bool]] = []
    gate = threading.Event()
    queue.submit(lambda: (gate.wait(5), seen.append((0, threading.current_thread() is threading.main_thread()))))
    for n in (1, 2):
        queue.submit(lambda n=n: seen.append((n, False)))
    assert seen == []  # submit returned while the first job waits
    gate.set()
    queue.settle()
    assert seen == [(0, False), (1, False), (2, False)]


def test_a_failing_job_is_its_own_loss():
    queue = WriteBehind("test-writes")
    seen = []
    queue.submit(lambda: 1 / 0)
    queue.submit(lambda: seen.append("after"))
    queue.settle()
    assert seen == ["after"]


def test_the_jobs_left_at_exit_run_before_the_process_ends(tmp_path):
    out = tmp_path / "written"
    code = ("import sys, time\nfrom pathlib import Path\nfrom ocibridge.core.writebehind import WriteBehind\n"
            "q = WriteBehind('exit-writes')\n"
            "q.submit(lambda: (time.sleep(0.3), Path(sys.argv[1]).write_text('done')))\n")
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "done"


def test_a_forked_child_has_a_queue_of_its_own(tmp_path):
    queue = WriteBehind("test-writes")
    gate = threading.Event()
    queue.submit(lambda: gate.wait(5))  # the parent's thread busy (its lock taken and let go) at the fork
    time.sleep(0.05)
    out = tmp_path / "child"
    pid = os.fork()
    if pid == 0:  # the child: its queue runs its own job, and settles without the parent's
        try:
            queue.submit(lambda: out.write_text("child"))
            queue.settle()
        finally:
            os._exit(0)
    gate.set()
    _, status = os.waitpid(pid, 0)
    queue.settle()
    assert os.waitstatus_to_exitcode(status) == 0 and out.read_text() == "child"
