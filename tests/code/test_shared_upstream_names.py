"""A session-scoped Hub (tests/upstream_proxy.proxied, tests/serving.publishing_serve) is one server for every
test file that asks for it: a repository name created there by two files makes the second create a 409 whenever
xdist puts both on one worker (CI at 2122a4a6: acme/moving)."""
import re
from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CREATED = re.compile(r'create_repo\(\s*"([^"]+)"')


@pytest.mark.parametrize("fixture, defined_in, seeded", [("proxied", "upstream_proxy.py", "acme/tiny"),
                                                         ("publishing_serve", "serving.py", None)])
def test_no_two_files_create_the_same_repository_on_a_shared_hub(fixture: str, defined_in: str,
                                                                 seeded: str | None) -> None:
    users = [p for p in TESTS.rglob("test_*.py") if re.search(rf"\b{fixture}\b", p.read_text())]
    assert len(users) >= 3, users  # the scan found the fixture's users
    creators: dict[str, set[str]] = defaultdict(set)
    for path in [TESTS / defined_in, *users]:
        for name in CREATED.findall(path.read_text()):
            creators[name].add(str(path.relative_to(TESTS)))
    shared = {name: sorted(paths) for name, paths in creators.items() if len(paths) > 1}
    assert shared == {}, shared
    assert seeded is None or seeded in creators
