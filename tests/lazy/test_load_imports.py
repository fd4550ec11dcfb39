"""A program that imports ocibridge and loads a model does not import httpx's command-line tool
(click, rich, pygments) nor trio, which httpx and httpcore import wherever they are installed:
both are start-up time before the first request and objects to tear down at exit. Both still
work when the program uses them: ``httpx.main`` runs httpx's tool, trio loads at its first use
and httpx runs under it, and a program that imported httpx first is left as it was. The
``ocibridge`` command keeps both out by the same finder, refusing trio instead."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from support.fixtures import new_repo

import ocibridge

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_MODULES = ("httpx._main", "click", "rich", "pygments")
needs_cli = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in CLI_MODULES[1:]),
                               reason="httpx's command-line tool is not installed here")
needs_trio = pytest.mark.skipif(importlib.util.find_spec("trio") is None, reason="trio is not installed here")


def python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def model(registry, tmp_path_factory) -> str:
    """A small model of two tensors, pushed: its reference."""
    src = tmp_path_factory.mktemp("imports") / "m"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "test"}')
    save_file({"a": np.arange(4096, dtype=np.float32), "b": np.ones((64, 64), np.float16)},
              str(src / "model.safetensors"))
    ref = f"{registry.host}/{new_repo('imports')}:v1"
    ocibridge.push(str(src), ref)
    return ref


@needs_cli
@needs_trio
def test_a_load_imports_neither_httpx_cli_nor_trio(model):
    out = python("import sys, ocibridge\n"
                 "tensors = ocibridge.load_tensors(sys.argv[1])\n"
                 f"print(len(tensors), sorted(m for m in {CLI_MODULES + ('trio._core',)!r} if m in sys.modules))",
                 model)
    assert out.split(" ", 1) == ["2", "[]\n"], out


@needs_cli
def test_httpx_main_still_runs_httpx_tool(model):
    """httpx's ``main``, and its module imported by name, are the real tool's."""
    out = python("import sys, ocibridge\n"
                 "ocibridge.load_tensors(sys.argv[1])\n"
                 "import httpx\n"
                 "sys.argv = ['httpx', '--help']\n"
                 "try:\n"
                 "    httpx.main()\n"
                 "except SystemExit as e:\n"
                 "    print('exit', e.code)\n"
                 "import httpx._main\n"
                 "print('print_help' in vars(httpx._main))", model)
    assert "Usage: httpx <URL> [OPTIONS]" in out, out
    assert out.splitlines()[-2:] == ["exit 0", "True"], out


@needs_trio
def test_trio_loads_at_its_first_use_and_httpx_runs_under_it(model, registry):
    out = python("import sys, ocibridge, httpx\n"
                 "ocibridge.load_tensors(sys.argv[1])\n"
                 "import trio\n"
                 "print('trio._core' in sys.modules)\n"
                 "async def ask():\n"
                 "    async with httpx.AsyncClient() as client:\n"
                 "        return (await client.get(sys.argv[2])).status_code\n"
                 "print(trio.run(ask), type(trio).__name__, trio.__spec__.loader is trio.__loader__)",
                 model, f"{registry.url}/v2/")
    assert out.split() == ["False", "200", "module", "True"], out


@needs_cli
def test_a_program_that_imported_httpx_first_is_left_as_it_was():
    out = python("import sys, httpx, ocibridge\n"
                 "from ocibridge.core.httpx_defer import DeferHttpxExtras\n"
                 "print('httpx._main' in sys.modules, httpx.main is sys.modules['httpx._main'].main,\n"
                 "      any(isinstance(f, DeferHttpxExtras) for f in sys.meta_path))")
    assert out.split() == ["True", "True", "False"], out


def test_the_finder_leaves_once_httpx_and_httpcore_are_loaded():
    out = python("import sys, ocibridge\n"
                 "from ocibridge.core.httpx_defer import DeferHttpxExtras\n"
                 "def here():\n"
                 "    return any(isinstance(f, DeferHttpxExtras) for f in sys.meta_path)\n"
                 "first = here()\n"
                 "import httpx\n"
                 "import httpcore\n"
                 "print(first, here(), httpx.__spec__.loader is httpx.__loader__,\n"
                 "      type(httpx.__loader__).__module__ != 'ocibridge.core.httpx_defer')")
    assert out.split() == ["True", "False", "True", "True"], out


@needs_cli
@needs_trio
def test_the_command_uses_the_one_finder_and_its_refusals_leave_both_tools_working():
    """The console entry point (``--version``: before httpx is imported) keeps one finder of
    ocibridge's on ``sys.meta_path``, switched to the command's column: httpx and httpcore then
    load without httpx's tool, trio or a module of ocibridge's, the finder leaves, and both tools
    still work when used: ``httpx.main`` is the real tool, a later ``import trio`` the real trio."""
    out = python("import sys\n"
                 "from ocibridge.cli.entry import run\n"
                 "from ocibridge.core.httpx_defer import DeferHttpxExtras\n"
                 "sys.argv = ['ocibridge', '--version']\n"
                 "try:\n"
                 "    run()\n"
                 "except SystemExit as e:\n"
                 "    assert not e.code, e.code\n"
                 "ours = [f for f in sys.meta_path if type(f).__module__.startswith('ocibridge')]\n"
                 "print('FINDERS', [(type(f).__name__, getattr(f, 'for_command', None)) for f in ours])\n"
                 "before = set(sys.modules)\n"
                 "import httpx, httpcore\n"
                 "added = set(sys.modules) - before\n"
                 f"kept_out = {CLI_MODULES + ('trio',)!r}\n"
                 "print('LOADED', sorted(m for m in added if m in kept_out or m.startswith('ocibridge')))\n"
                 "print('LEFT', not any(isinstance(f, DeferHttpxExtras) for f in sys.meta_path))\n"
                 "sys.argv = ['httpx', '--help']\n"
                 "try:\n"
                 "    httpx.main()\n"
                 "except SystemExit as e:\n"
                 "    print('HTTPX exit', e.code)\n"
                 "import trio\n"
                 "trio.run(trio.sleep, 0)\n"
                 "print('TRIO', type(trio).__name__, 'trio._core' in sys.modules)\n")
    assert "Usage: httpx <URL> [OPTIONS]" in out, out
    marks = ("FINDERS", "LOADED", "LEFT", "HTTPX", "TRIO")
    marked = [line for line in out.splitlines() if line.split(" ", 1)[0] in marks]
    assert marked == ["FINDERS [('DeferHttpxExtras', True)]", "LOADED []", "LEFT True", "HTTPX exit 0",
                      "TRIO module True"], out


@needs_cli
def test_httpx_and_httpcore_imported_at_once_by_threads_still_leave_the_cli_out():
    """A thread that finishes httpcore while another still runs httpx's ``__init__`` does not
    take the finder away from it (httpx would then import its tool); each of three runs."""
    code = ("import sys, threading, ocibridge\n"
            "from ocibridge.core.httpx_defer import DeferHttpxExtras\n"
            "start = threading.Barrier(4)\n"
            "def load(name):\n"
            "    start.wait()\n"
            "    __import__(name)\n"
            "threads = [threading.Thread(target=load, args=(n,)) for n in ('httpx', 'httpcore') * 2]\n"
            "[t.start() for t in threads]\n"
            "[t.join() for t in threads]\n"
            "import httpx\n"
            f"print(sorted(m for m in {CLI_MODULES!r} if m in sys.modules), type(httpx.main).__name__,\n"
            "      any(isinstance(f, DeferHttpxExtras) for f in sys.meta_path))")
    for _ in range(3):
        assert python(code).split() == ["[]", "function", "False"]


def test_a_module_left_for_later_runs_at_its_first_use_and_a_failing_one_raises_at_each(tmp_path):
    from ocibridge.core.httpx_defer import _OnUse

    (tmp_path / "counted.py").write_text("import builtins\n"
                                         "builtins.counted_runs = getattr(builtins, 'counted_runs', 0) + 1\n"
                                         "VALUE = 7\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken at import')\n")
    made = {}
    for name in ("counted", "broken"):
        spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
        assert spec is not None and spec.loader is not None
        spec.loader = _OnUse(spec.loader)  # type: ignore[arg-type]
        made[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(made[name])  # (what the import system does: nothing runs yet)
    import builtins

    assert not hasattr(builtins, "counted_runs")
    assert made["counted"].VALUE == 7 and made["counted"].VALUE == 7
    assert builtins.counted_runs == 1  # type: ignore[attr-defined]
    del builtins.counted_runs  # type: ignore[attr-defined]
    for _ in range(2):
        with pytest.raises(RuntimeError, match="broken at import"):
            getattr(made["broken"], "anything")  # noqa: B009  (the first use is what runs it)
