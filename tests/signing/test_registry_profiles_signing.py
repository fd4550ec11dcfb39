"""sign, verify and copy -r of a signed model over every registry-behaviour profile
(tests/support/profiles.py, the matrix of tests/registry/test_registry_profiles.py).

Where the profile serves the referrers API (harbor) the bundle is found through it and the
client writes no fallback tag; everywhere else it goes through the OCI 1.1 fallback tag
``sha256-<hex>``. A copy carries both signatures, which verify at the target.
"""

from __future__ import annotations

import json

import pytest
from support.profiles import ReferrersApi, ShortTokens

from ocibridge.cli import main
from tests.registry.test_registry_profiles import PROFILES, _large_is_small, _model  # noqa: F401 (fixture)
from tests.signing_keys import key_pair

#: the push/pull matrix's profiles, and GHCR's bearer tokens that die early (1 s, claimed 300)
SIGNING_PROFILES = {**PROFILES, "ghcr": lambda: [ShortTokens(lifetime=1.0)]}


def _verified(capsys: pytest.CaptureFixture[str], ref: str, public: str) -> set[str]:
    capsys.readouterr()
    assert main(["verify", ref, "--key", public, "--json"]) == 0
    return {s["form"] for s in json.loads(capsys.readouterr().out)["signatures"]}


@pytest.mark.parametrize("name", sorted(SIGNING_PROFILES))
def test_sign_verify_copy_over_profile(name, fault_proxy, unique_repo, tmp_path, capsys):
    quirks = SIGNING_PROFILES[name]()
    fault_proxy.quirks[:] = quirks
    _model(tmp_path / "model")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    assert main(["push", str(tmp_path / "model"), ref, "--json", "-q"]) == 0
    digest = json.loads(capsys.readouterr().out)["digest"]
    private, public = key_pair(tmp_path / "k")
    fault_proxy.clear()
    assert main(["sign", ref, "--key", str(private)]) == 0

    api = next((q for q in quirks if isinstance(q, ReferrersApi)), None)
    fallback = f"/manifests/sha256-{digest[7:]}$"
    if api is not None:  # the registry keeps the referrers index: the client writes no fallback tag,
        # only the bundle under its own tag (what keeps it from garbage collection), in the one PUT
        assert api.client_tag_writes == 0 and fault_proxy.requests_matching("PUT", "/manifests/ocibridge-ref-")
        assert not fault_proxy.requests_matching("PUT", "/manifests/sha256:")
    else:
        # written once: a rate-limited profile may refuse a try first (429, retried), and a profile
        # whose tokens die before their advertised life (ghcr) may answer 401 to a slow sign (the
        # client fetches a new token and tries again); which request is refused depends on how many
        # the push and sign made and how long they took, which the machine's load changes
        statuses = [r.status for r in fault_proxy.requests_matching("PUT", fallback)]
        assert statuses[-1:] == [201] and set(statuses[:-1]) <= {401, 429}, statuses
    fault_proxy.clear()
    assert _verified(capsys, ref, str(public)) == {"classic", "bundle"}
    if api is not None:
        assert [r.status for r in fault_proxy.requests_matching("GET", f"/referrers/{digest}")] == [200]
        assert not fault_proxy.requests_matching(None, fallback)
    else:
        assert fault_proxy.requests_matching(None, fallback)

    copied = f"{fault_proxy.host}/{unique_repo}-copy:v1"
    assert main(["copy", "-r", ref, copied, "--json", "--verify-key", str(public)]) == 0
    assert len(json.loads(capsys.readouterr().out)["signatures"]) == 2
    assert _verified(capsys, copied, str(public)) == {"classic", "bundle"}
    _, other = key_pair(tmp_path / "o", "other")
    assert main(["verify", copied, "--key", str(other)]) != 0  # a real check, not a listing
