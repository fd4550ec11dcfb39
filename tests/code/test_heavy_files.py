"""tests/heavy_files.txt orders the files pytest-xdist hands out (tests/conftest.py): a path that
names no test file (one renamed or moved) would lose its place silently and be handed out last."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import HEAVY_FILES, heavy_files_first

ROOT = Path(__file__).resolve().parents[2]


def listed() -> list[tuple[float, str]]:
    rows = [line.split(maxsplit=1) for line in Path(HEAVY_FILES).read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return [(float(seconds), path.strip()) for seconds, path in rows]


def test_every_listed_path_is_a_test_file_once_heaviest_first():
    rows = listed()
    assert rows
    paths = [path for _, path in rows]
    assert len(set(paths)) == len(paths), "a file listed twice"
    missing = [p for p in paths if not (ROOT / p).is_file() or not Path(p).name.startswith("test_")]
    assert not missing, f"tests/heavy_files.txt names no test file at: {missing}"
    seconds = [s for s, _ in rows]
    assert seconds == sorted(seconds, reverse=True), "not heaviest first"


def test_listed_files_go_first_in_their_order_and_each_files_tests_keep_theirs():
    first, second = listed()[0][1], listed()[1][1]
    names = ["tests/a/test_unlisted.py::t1", f"{second}::t1", "tests/a/test_unlisted.py::t2",
             f"{first}::t2", f"{second}::t0", f"{first}::t1[x::y]", "tests/b/test_other.py::t"]
    items = [SimpleNamespace(nodeid=n) for n in names]
    heavy_files_first(items)
    assert [i.nodeid for i in items] == [f"{first}::t2", f"{first}::t1[x::y]", f"{second}::t1", f"{second}::t0",
                                         "tests/a/test_unlisted.py::t1", "tests/a/test_unlisted.py::t2",
                                         "tests/b/test_other.py::t"]
