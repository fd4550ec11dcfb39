"""The test modules' assertion-rewritten bytecode and the helpers' bytecode, written once by the
controller before the xdist workers start.

Each worker collects every test module, and pytest rewrites a module's asserts on import; it keeps
the result in ``__pycache__`` only where bytecode may be written. Where ``PYTHONDONTWRITEBYTECODE``
is set (these machines set it) every worker rewrote all ~400 modules, about 18 CPU-s each, three
times a run; a cached rewrite is read whatever that variable says. The helpers (``tests/*.py``,
``tests/support``) are imported by the workers and by many of the suite's subprocesses, each
compiling them from source otherwise.

pytest's rewriting functions are private: where they are not what this expects, nothing is written
and each worker rewrites its own, as before (a cost, never a different test)."""

from __future__ import annotations

import compileall
import os
import re
from pathlib import Path

import pytest

#: the modules pytest rewrites: its default ``python_files`` and the conftest files
_REWRITTEN = re.compile(r"(test_.*|.*_test|conftest)\.py")


def write_bytecode(config: pytest.Config, tests: Path) -> None:
    """Bytecode for ``tests``: rewritten for the test modules this run collects (its paths'),
    plain for the helpers beside them."""
    for folder in (tests, tests / "support"):
        compileall.compile_dir(folder, maxlevels=0, quiet=2, rx=_REWRITTEN)
    asked = [Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve() for arg in config.args]
    write_rewritten(config, rewritten_modules(tests, asked), split=(os.cpu_count() or 1) > 1)


def rewritten_modules(tests: Path, asked: list[Path]) -> list[Path]:
    """The modules under ``tests`` pytest rewrites for a run of the paths ``asked``: their test
    modules and every conftest (``tests/data`` holds inputs, not tests)."""
    return [p for p in sorted(tests.rglob("*.py")) if _REWRITTEN.fullmatch(p.name)
            and "data" not in p.relative_to(tests).parts
            and (p.name == "conftest.py" or any(p == a or a in p.parents for a in asked))]


def write_rewritten(config: pytest.Config, modules: list[Path], *, split: bool) -> None:
    """Each of ``modules`` rewritten as pytest would and cached where its import reads it;
    ``split``: half in a forked process (the controller has no other thread yet)."""
    try:
        from _pytest.assertion import rewrite
        state = config.stash[rewrite.assertstate_key]
        rewrite_test, write_pyc, read_pyc = rewrite._rewrite_test, rewrite._write_pyc, rewrite._read_pyc
        cache_dir, tail = rewrite.get_cache_dir, rewrite.PYC_TAIL
    except (ImportError, AttributeError, KeyError):
        return
    child = _forked() if split and len(modules) > 1 else None
    offset, stride = (0, 1) if child is None else (int(child == 0), 2)  # the child takes the odd ones
    mine = modules[offset::stride]
    try:
        for path in mine:
            pyc = cache_dir(path) / (path.name[:-3] + tail)
            if read_pyc(path, pyc, state.trace) is not None:
                continue  # up to date
            try:
                source_hash, code = rewrite_test(path, config)
                pyc.parent.mkdir(exist_ok=True)
                write_pyc(state, code, source_hash, pyc)
            except Exception:  # a speed-up only: the worker rewrites it, and reports what fails
                continue
    finally:
        if child == 0:
            os._exit(0)
    if child:
        os.waitpid(child, 0)


def _forked() -> int | None:
    try:
        return os.fork()
    except OSError:
        return None
