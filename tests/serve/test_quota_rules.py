"""The quotas file's rules and the proxy's hourly allowances (hubserver/quotas), without a server:
what the file may say, what one client may have the proxy fetch in an hour, and that the hour
passes (a clock of the test's). The routes that enforce them: test_serve_quotas.py and
test_serve_upstream_quotas.py."""

from __future__ import annotations

import pytest

from ocibridge.errors import UsageError
from ocibridge.hubserver.quotas.ingests import IngestLimits, IngestRateLimited, IngestRefused
from ocibridge.hubserver.quotas.quotafile import IngestRules, Limit, parse_quotas

MIB = 1024 * 1024


def test_the_file_gives_each_namespace_its_limits_and_star_the_rest():
    rules = parse_quotas('[namespaces.Acme]\nbytes = "2M"\nrepos = 3\n[namespaces."*"]\nbytes = 100\n'
                         '[upstream]\nnamespace = "Proxied"\nmax-size = "1G"\ningests-per-hour = 5\n', "q")
    assert rules.limit_of("acme") == Limit(2 * MIB, 3)  # names compare lower-cased
    assert rules.limit_of("other") == Limit(100, None)
    assert rules.upstream.namespace == "proxied" and rules.upstream.max_size == 1024 ** 3
    assert parse_quotas("", "q").limit_of("acme") is None  # an empty file: no quota


@pytest.mark.parametrize(("text", "said"), [
    ("[namespaces.acme]\nbytes = -1\n", "q [namespaces.acme] bytes: expected a size of 0 or more, got -1"),
    ("[namespaces.acme]\nrepos = \"2\"\n", "q [namespaces.acme] repos: expected a whole number of 0 or more"),
    ("[namespaces.acme]\nbites = 1\n", "q: [acme] has no key 'bites' (known: bytes, repos)"),
    ("[limits]\n", "q: no table 'limits' (known: namespaces, upstream)"),
    ("[upstream]\nnamespace = \"a/b\"\n", "q [upstream] namespace: expected a namespace's name"),
    ("bytes = \n", "q: not TOML"),
])
def test_a_file_that_is_not_one_is_one_line_naming_the_fault(text, said):
    with pytest.raises(UsageError) as refused:
        parse_quotas(text, "q")
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_clients_ingests_and_bytes_of_the_hour_are_its_own_and_the_hour_passes():
    clock = Clock()
    limits = IngestLimits(None, max_size=10 * MIB, clock=clock, said=lambda: IngestRules(None, None, 2, 5 * MIB))
    first = limits.admit("address:10.0.0.1", "a/x", "a/x@1")
    first.listed([3 * MIB])
    second = limits.admit("address:10.0.0.1", "a/y", "a/y@1")
    with pytest.raises(IngestRateLimited) as bytes_over:  # 3 + 3 MiB past the 5 MiB of the hour
        second.listed([3 * MIB])
    assert "bytes-per-hour" in str(bytes_over.value) and bytes_over.value.retry_after == 3600
    with pytest.raises(IngestRateLimited) as count_over:  # two ingests started: the third waits
        limits.admit("address:10.0.0.1", "a/z", "a/z@1")
    assert "ingests-per-hour" in str(count_over.value)
    limits.admit("address:10.0.0.2", "a/z", "a/z@1").listed([MIB])  # another client: its own hour
    with pytest.raises(IngestRefused) as large:
        limits.admit("address:10.0.0.3", "a/big", "a/big@1").listed([6 * MIB, 5 * MIB])
    assert "--upstream-max-size" in str(large.value)
    clock.now += 3600  # an hour on: the first client starts again
    limits.admit("address:10.0.0.1", "a/z", "a/z@1").listed([4 * MIB])
