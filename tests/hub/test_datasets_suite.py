"""bench/datasets_suite.py changes only the endpoint and user constants of the datasets library's Hub
fixtures, and gives serve the suite's own token: the harness's claim that the tests run unchanged."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from bench.datasets_suite import RENAMED_USER, prepare_tests, token_file_text

HUB_FIXTURES = '''import os

CI_HUB_USER = "__DUMMY_DATASETS_USER__"
CI_HUB_USER_FULL_NAME = "Dummy User"
CI_HUB_USER_TOKEN = "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"

CI_HUB_ENDPOINT = "https://hub-ci.huggingface.co"
CI_HUB_DATASETS_URL = CI_HUB_ENDPOINT + "/datasets/{repo_id}/resolve/{revision}/{path}"
'''
PYPROJECT = '''[tool.ruff]
line-length = 119

[tool.pytest.ini_options]
markers = [
    "integration: integration test",
]

[tool.other]
x = 1
'''


def source_tree(root: Path) -> Path:
    (root / "tests" / "fixtures").mkdir(parents=True)
    (root / "tests" / "fixtures" / "hub.py").write_text(HUB_FIXTURES)
    (root / "tests" / "test_upstream_hub.py").write_text("def test_x():\n    pass\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def test_only_the_endpoint_and_the_user_change(tmp_path):
    src = source_tree(tmp_path / "src")
    prepare_tests(src, tmp_path / "suite", "http://127.0.0.1:9999")
    after = (tmp_path / "suite" / "tests" / "fixtures" / "hub.py").read_text()
    changed = [line for line in difflib.ndiff(HUB_FIXTURES.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert changed == ['- CI_HUB_USER = "__DUMMY_DATASETS_USER__"', f'+ CI_HUB_USER = "{RENAMED_USER}"',
                       '- CI_HUB_ENDPOINT = "https://hub-ci.huggingface.co"',
                       '+ CI_HUB_ENDPOINT = "http://127.0.0.1:9999"']
    assert (tmp_path / "suite" / "tests" / "test_upstream_hub.py").read_text() == "def test_x():\n    pass\n"
    assert (tmp_path / "suite" / "pyproject.toml").read_text().startswith("[tool.pytest.ini_options]\nmarkers")
    assert (src / "tests" / "fixtures" / "hub.py").read_text() == HUB_FIXTURES  # the checkout is never written


def test_serve_knows_the_suite_s_token_as_its_user(tmp_path):
    text = token_file_text(source_tree(tmp_path / "src"))
    assert text.splitlines() == [f"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 user={RENAMED_USER} write=* "
                                 "fullname=Dummy%20User", "anonymous read=*"]


def test_a_changed_fixture_file_is_one_error_not_a_silent_run(tmp_path):
    src = source_tree(tmp_path / "src")
    (src / "tests" / "fixtures" / "hub.py").write_text(HUB_FIXTURES.replace("CI_HUB_ENDPOINT =", "ENDPOINT ="))
    with pytest.raises(RuntimeError, match="CI_HUB_ENDPOINT not found once"):
        prepare_tests(src, tmp_path / "suite", "http://127.0.0.1:9999")
