"""No test asserts that something took less than so many seconds of wall time: on a loaded
machine every such bound fails sooner or later, and speed is the benches' to measure (bench/).
A test asserts the behaviour instead (a count, a state, an event, the CPU work done); a loop
waiting for a condition may keep a generous deadline, as ``time.monotonic() < deadline`` with a
message naming the condition. Lower bounds (it waited at least the backoff) stay allowed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
#: the clocks that read wall time
WALL_CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
#: names a wall-clock duration goes by in this suite
ELAPSED_NAMES = {"elapsed", "took", "duration", "wall", "seconds"}


def _reads_wall_clock(node: ast.AST) -> bool:
    """``time.monotonic()`` and its kind, called."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in WALL_CLOCKS


def _is_elapsed(node: ast.AST, elapsed_names: set[str], readings: set[str]) -> bool:
    """A wall-clock duration: ``clock() - start`` (or ``reading - start``), or a name (attribute,
    subscript) holding one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        left = node.left
        return _reads_wall_clock(left) or isinstance(left, ast.Name) and left.id in readings
    if isinstance(node, ast.Subscript):
        return _is_elapsed(node.value, elapsed_names, readings)
    if isinstance(node, ast.Name):
        return node.id in elapsed_names
    if isinstance(node, ast.Attribute):
        return node.attr in ELAPSED_NAMES
    return False


def _upper_bounds(test: ast.AST, elapsed_names: set[str], readings: set[str]) -> Iterator[ast.Compare]:
    """The comparisons in an assert's test that bound a duration from above."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for (low, high), op in zip(zip(sides, sides[1:], strict=False), node.ops, strict=True):
            if isinstance(op, (ast.Lt, ast.LtE)) and _is_elapsed(low, elapsed_names, readings) \
                    or isinstance(op, (ast.Gt, ast.GtE)) and _is_elapsed(high, elapsed_names, readings):
                yield node
                break


def _names_of(assigns: list[ast.Assign]) -> tuple[set[str], set[str]]:
    """The names a scope's ``assigns`` give wall-clock differences (with the usual names of one),
    and those they give wall-clock readings."""
    readings = {t.id for node in assigns if _reads_wall_clock(node.value)
                for t in node.targets if isinstance(t, ast.Name)}
    names = set(ELAPSED_NAMES)
    for node in assigns:
        if _is_elapsed(node.value, set(), readings):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names, readings


def _outermost_functions(tree: ast.AST) -> Iterator[ast.AST]:
    """The functions not inside another function. A function's names and readings hold those of
    every function inside it, and the checks only grow with them, so an assert an inner function
    bounds is one its outermost function bounds: each node is walked once, not once per enclosing
    function (seconds over the suite's files)."""
    todo = [tree]
    while todo:
        for child in ast.iter_child_nodes(todo.pop()):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child
            else:
                todo.append(child)


def wall_clock_asserts(source: str) -> list[int]:
    """The lines of asserts bounding a wall-clock duration from above."""
    tree = ast.parse(source)
    lines: list[int] = []
    for scope in _outermost_functions(tree):
        nodes = list(ast.walk(scope))
        names, readings = _names_of([n for n in nodes if isinstance(n, ast.Assign)])
        for node in nodes:
            if isinstance(node, ast.Assert) and any(True for _ in _upper_bounds(node.test, names, readings)):
                lines.append(node.lineno)
    return sorted(set(lines))


def _test_sources() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" not in path.parts:
            yield path


def test_no_test_asserts_an_upper_bound_on_wall_time() -> None:
    found = [f"{path.relative_to(TESTS.parent)}:{line}" for path in _test_sources()
             for line in wall_clock_asserts(path.read_text(encoding="utf-8"))]
    assert found == [], "wall-clock upper bounds (assert the behaviour; speed goes to bench/):\n" + "\n".join(found)


def test_the_scan_finds_each_form_and_leaves_deadlines_and_lower_bounds() -> None:
    flagged = '''
import time
def f(ran, took):
    t0 = time.monotonic()
    assert time.monotonic() - t0 < 5
    spent = time.perf_counter() - t0
    assert spent < 1
    assert 2 <= took["x"] < 3.5
    assert ran.seconds < 10 and ran.peak_mb < 300
    assert 10 > time.time() - t0
    now = time.monotonic()
    assert now - t0 < 5
'''
    assert wall_clock_asserts(flagged) == [5, 7, 8, 9, 10, 12]
    allowed = '''
import time
def f(ran, took, deadline):
    t0 = time.monotonic()
    assert time.monotonic() < deadline, "the file never appeared"
    assert took >= 2
    assert time.monotonic() - t0 >= 1.0
    assert ran.cpu_seconds < 10
    assert time.thread_time() - t0 < 1
'''
    assert wall_clock_asserts(allowed) == []
