"""docs/warm.md runs as printed (tests/docrun.py): a reader's virtualenv with what the page says to
install, the example model pushed, a cache compiled on one "node" and restored on another, the
directory form from the command line, and a key that differs refused."""

from __future__ import annotations

import pytest

from tests.docrun import commented_commands, doc_env, reader_venvs, run_block, runnable_blocks  # noqa: F401

#: torch's own start-up on the suite's two cores, not the page's: every fresh Inductor cache makes
#: torch build and load test programs for the base vector ISA (seconds a process: the blocks that
#: compile each start with an empty one), and two compile threads start a pool of worker
#: processes. The blocks, their output and the graph cache's hit are the same either way.
INDUCTOR_ON_TWO_CORES = {"TORCHINDUCTOR_VEC_ISA_OK": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}


@pytest.mark.timeout(900)  # compiles twice: minutes on a loaded 2-core machine, not the usual 240 s
def test_warm_md_runs_as_printed(doc_env):  # noqa: F811
    work, env = doc_env("warm.md")
    env.update(INDUCTOR_ON_TWO_CORES)
    # Inductor's precompiled C++ header (150 MB, a new one each run: the reader's virtualenv is new)
    # is kept outside its cache, in $TMPDIR/torchinductor_$USER: in the test's folder, not left in /tmp
    (work.parent / "tmp").mkdir()
    env["TMPDIR"] = str(work.parent / "tmp")
    outputs = []
    for lang, code, line in runnable_blocks("warm.md"):
        proc = run_block(lang, code, work, env, timeout=900)
        assert proc.returncode == 0, (f"docs/warm.md:{line} ({lang}) exit {proc.returncode}\n"
                                      f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        outputs.append(proc.stdout + proc.stderr)
    assert "graph cache hits: 1 misses: 0" in outputs[2] and "signature verified: True" in outputs[2]
    assert "options differs (here sha256:" in outputs[4] and "nothing restored" in outputs[4]
    assert not commented_commands("warm.md")
