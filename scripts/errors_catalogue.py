#!/usr/bin/env python3
"""Write docs/errors.md: every exception class of the package, what it means, the CLI's exit code
for it and what serve answers (status, the Hub's ``X-Error-Code``, the huggingface_hub exception a
client raises). Read from the source (no optional package imported) and from serve's one table
(``hubserver/failures.py``); tests/docs/test_errors_catalogue.py checks the page equals this output.

    python scripts/errors_catalogue.py > docs/errors.md
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ocibridge"

#: X-Error-Code → what huggingface_hub raises for it (utils/_http.py's hf_raise_for_status)
HUB_EXCEPTION = {
    "RepoNotFound": "RepositoryNotFoundError",
    "RevisionNotFound": "RevisionNotFoundError",
    "GatedRepo": "GatedRepoError",
    "EntryNotFound": "EntryNotFoundError",
    "BadRequest": "BadRequestError",
    None: "HfHubHTTPError",
}

OCIBRIDGE_ERROR = "ocibridge.errors.OcibridgeError"
DENIED = "ocibridge.hubserver.access.Denied"

HEADER = """# Errors users meet

Every exception ocibridge raises on purpose, in one table: what it means, the exit code the CLI
ends with (the error itself is one line on stderr, never a traceback), and what `ocibridge serve`
answers when a request meets it: the HTTP status, the Hub's `X-Error-Code` and the exception
huggingface_hub raises for that answer. Access refusals (`Denied`) carry their own status: 401
without a token the token file knows, 403 with one that may not, 503 while the token file cannot be
read. An exception with no serve column is not met on serve's routes (or is answered where it is
raised). Serve's table is `hubserver/failures.py`; the CLI's exits are `cli/entry.py`'s.

Written by `python scripts/errors_catalogue.py > docs/errors.md`; `tests/docs/test_errors_catalogue.py`
fails when a class is added, renamed or answered otherwise and this page was not written again.

| exception | module | means | CLI exit | serve answers |
|---|---|---|---|---|
"""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _classes() -> dict[str, tuple[list[str], str]]:
    """Every class of the package: qualified name → (its bases, qualified where resolvable; first doc line)."""
    found: dict[str, tuple[list[str], str]] = {}
    imported: dict[str, str] = {}  # module.name -> where a name a module imports (and so re-exports) is defined
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                base = node.module
                if node.level:
                    anchor = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                    base = ".".join([*anchor, node.module]) if node.module else ".".join(anchor)
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{base}.{alias.name}"
                    imported[f"{module}.{alias.asname or alias.name}"] = f"{base}.{alias.name}"
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                names[node.name] = f"{module}.{node.name}"
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = []
                for b in node.bases:
                    text = ast.unparse(b)
                    bases.append(names.get(text.split(".")[0], text) + text[len(text.split(".")[0]):]
                                 if "." in text else names.get(text, text))
                doc = (ast.get_docstring(node) or "").strip().split("\n\n")[0].replace("\n", " ")
                doc = re.split(r"(?<=[a-z)`])\. ", doc, maxsplit=1)[0].rstrip(".")  # its first sentence
                clause = re.split(r"; | \(|: ", doc, maxsplit=1)[0]
                doc = (clause if len(clause.split()) >= 5 else doc) + "."  # its first clause, when it says enough
                found[f"{module}.{node.name}"] = (bases, doc)

    def defined(name: str) -> str:
        seen = set()
        while name not in found and name in imported and name not in seen:
            seen.add(name)
            name = imported[name]
        return name

    return {name: ([defined(b) for b in bases], doc) for name, (bases, doc) in found.items()}


def _is_exception(name: str, classes: dict[str, tuple[list[str], str]], seen: frozenset[str] = frozenset()) -> bool:
    if name in seen:
        return False
    short = name.rsplit(".", 1)[-1]
    if name not in classes:
        builtin = getattr(builtins, short, None)
        if isinstance(builtin, type):
            return issubclass(builtin, BaseException)
        return short.endswith(("Error", "Exception"))
    return any(_is_exception(b, classes, seen | {name}) for b in classes[name][0])


def _ancestors(name: str, classes: dict[str, tuple[list[str], str]]) -> list[str]:
    """``name`` and its bases, nearest first (breadth-first)."""
    order, queue = [], [name]
    while queue:
        current = queue.pop(0)
        if current not in order:
            order.append(current)
            queue.extend(classes.get(current, ([], ""))[0])
    return order


def _serve_table() -> list[tuple[str, int, str | None]]:
    """failures.TABLE's rows as (qualified class, status, code), read from its source."""
    path = PACKAGE / "hubserver" / "failures.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.asname or a.name: f"{n.module}.{a.name}" for n in tree.body if isinstance(n, ast.ImportFrom)
             for a in n.names}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "TABLE":
            assert isinstance(node.value, ast.Tuple)
            rows = []
            for row in node.value.elts:
                assert isinstance(row, ast.Tuple)
                cls, status, code = (ast.literal_eval(e) if i else ast.unparse(e) for i, e in enumerate(row.elts[:3]))
                rows.append((names.get(cls, cls), status, code))
            return rows
    raise SystemExit("hubserver/failures.py has no TABLE")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("``", "`")


def catalogue() -> str:
    classes = _classes()
    table = _serve_table()
    lines = [HEADER]
    served = {cls for cls, _, _ in table}
    exceptions = (n for n in classes if _is_exception(n, classes))
    for name in sorted(exceptions, key=lambda n: (n.rsplit(".", 1)[-1].lower(), n)):
        module, short = name.rsplit(".", 1)
        chain = _ancestors(name, classes)
        met = OCIBRIDGE_ERROR in chain or name in served or name == DENIED
        if short.startswith("_") or not met:  # control flow inside one module, never told to a user
            continue
        exit_code = "2" if "ocibridge.errors.UsageError" in chain else "1" if OCIBRIDGE_ERROR in chain else "—"
        serve = "—"
        if name == DENIED:
            serve = "401 / 403 / 503, HfHubHTTPError"
        else:
            for cls, status, code in table:
                if cls in chain:
                    serve = f"{status}{', ' + code if code else ''}, {HUB_EXCEPTION.get(code, 'HfHubHTTPError')}"
                    break
        lines.append(f"| `{short}` | `{module}` | {_cell(classes[name][1]) or '—'} | {exit_code} | {serve} |\n")
    return "".join(lines)


if __name__ == "__main__":
    sys.stdout.write(catalogue())
