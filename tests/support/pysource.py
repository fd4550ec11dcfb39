"""Reading the package's own source as Python, for tests that hold rules about its code."""

from __future__ import annotations

import ast


def docstring_ids(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (a module's, class's or function's):
    prose, which a rule about code leaves alone."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found
