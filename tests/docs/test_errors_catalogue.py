"""docs/errors.md is the one catalogue of the errors users meet: every exception the package raises
on purpose, with the CLI's exit code and serve's answer (status, the Hub's error code, the client's
exception). The page is written by scripts/errors_catalogue.py; it must be what that writes now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _catalogue():
    spec = importlib.util.spec_from_file_location("errors_catalogue", ROOT / "scripts" / "errors_catalogue.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["errors_catalogue"] = module
    spec.loader.exec_module(module)
    return module


def test_the_errors_page_is_the_catalogue_of_today():
    written = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert written == _catalogue().catalogue(), "run: python scripts/errors_catalogue.py > docs/errors.md"


def test_serve_answers_each_row_as_its_table_says():
    """The page's serve column is failures.TABLE's: checked against the live table, not the source text."""
    from ocibridge.hubserver import failures
    from ocibridge.hubserver.repo.moves import Conflict
    from ocibridge.hubserver.repo.sources import RepoNotFound

    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    for cls, status, code, _title in failures.TABLE:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{cls.__name__}` |"))
        assert row.split(" | ")[-1].startswith(f"{status}{', ' + code if code else ''}, "), row
    assert failures.failure_of(Conflict("x exists")).status == 409  # a move onto a repository that exists
    assert failures.failure_of(RepoNotFound("acme/none")).code == "RepoNotFound"


def test_every_exception_a_user_meets_is_listed():
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    from ocibridge import errors

    for name in ("UsageError", "DigestMismatch", "NotFound", "InvalidReference", "ValidationError"):
        assert isinstance(getattr(errors, name), type)
        assert f"| `{name}` | `ocibridge.errors` |" in page
    assert "| `UsageError` | `ocibridge.errors` |" in page and "| 2 |" in page
