"""The session's stand-in Hub (tests/upstream_proxy.proxied) is one server for every test file that asks for it:
a repository name created there by two files makes the second create a 409 whenever xdist puts both on one
worker (CI at 2122a4a6: acme/moving)."""
import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CREATED = re.compile(r'create_repo\(\s*"([^"]+)"')


def test_no_two_files_create_the_same_repository_on_the_shared_upstream() -> None:
    users = [p for p in TESTS.rglob("test_*.py") if re.search(r"\bproxied\b", p.read_text())]
    files = [TESTS / "upstream_proxy.py", *users]
    assert len(users) > 5, users  # the scan found the proxy tests
    creators: dict[str, set[str]] = defaultdict(set)
    for path in files:
        for name in CREATED.findall(path.read_text()):
            creators[name].add(str(path.relative_to(TESTS)))
    shared = {name: sorted(paths) for name, paths in creators.items() if len(paths) > 1}
    assert "acme/tiny" in creators and shared == {}, shared
