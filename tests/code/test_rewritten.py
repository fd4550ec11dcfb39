"""tests/support/rewritten.py: the controller's cache of rewritten test modules is one pytest reads,
and it covers the modules a run collects."""

from __future__ import annotations

from pathlib import Path
from types import CodeType

from _pytest.assertion import rewrite
from support.rewritten import rewritten_modules, write_rewritten


def _tree(root: Path) -> Path:
    for name in ("a/test_one.py", "a/helper.py", "b/test_two.py", "b/conftest.py", "data/test_input.py",
                 "conftest.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("def test_it():\n    x = 1\n    assert x == 1, x\n")
    return root


def test_a_run_of_one_folder_rewrites_its_tests_and_every_conftest(tmp_path):
    tests = _tree(tmp_path / "tests")
    names = [str(p.relative_to(tests)) for p in rewritten_modules(tests, [tests / "a"])]
    assert names == ["a/test_one.py", "b/conftest.py", "conftest.py"]
    assert len(rewritten_modules(tests, [tests])) == 4  # tests/data's inputs are never rewritten


def test_what_is_written_is_read_back_as_pytest_reads_its_own_cache(tmp_path, pytestconfig):
    tests = _tree(tmp_path / "tests")
    modules = rewritten_modules(tests, [tests])
    write_rewritten(pytestconfig, modules, split=False)
    state = pytestconfig.stash[rewrite.assertstate_key]
    for path in modules:
        pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
        code = rewrite._read_pyc(path, pyc, state.trace)
        assert code is not None, path
        assert any(n.startswith("@py_assert") for n in _names(code)), path  # rewritten, not a plain compile


def _names(code: CodeType) -> set[str]:
    inner = [c for c in code.co_consts if isinstance(c, CodeType)]
    return set(code.co_varnames) | set(code.co_names) | {n for c in inner for n in _names(c)}
