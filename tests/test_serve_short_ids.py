"""Issue 76: short commit ids. A unique prefix of 7 or more hex digits of a commit id names that
commit, as git resolves one (the CLI's ``REG/org/name@<short>``); an ambiguous prefix is refused
naming its candidates. The decision is tested at the function level (two commit ids sharing a
7-hex prefix cannot be made on purpose)."""

from __future__ import annotations

import pytest

from ocibridge.errors import InvalidReference, NotFound
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry.commitscan import AmbiguousCommit, find_commit


# -- the decision, at the function level ---------------------------------------------------------
def digest_of(commit: str) -> str:
    return "sha256:" + commit + "0" * 24


def resolver(table: dict[str, str]):
    """A fake repository's ``resolve``: its plain tags' digests."""
    asked: list[str] = []

    def resolve(tag: str) -> Descriptor:
        asked.append(tag)
        if tag not in table:
            raise NotFound(tag)
        return Descriptor(mediaType="application/vnd.oci.image.manifest.v1+json", digest=table[tag], size=1)

    return resolve, asked


A, B, C = "abc1234" + "1" * 33, "abc1234" + "2" * 33, "def5678" + "3" * 33


def test_a_unique_prefix_names_its_commit_by_its_commit_tag_or_a_plain_tags_digest():
    resolve, _ = resolver({"main": digest_of(A), "v1": digest_of(C)})
    tags = ["main", "v1", f"ocibridge-commit-{A}", f"ocibridge-commit-{C}", "ocibridge-refs"]
    assert find_commit("def5678", tags, resolve) == digest_of(C)  # a plain tag's digest: no request more
    assert find_commit(A[:12], tags, resolve) == digest_of(A)
    assert find_commit(A, tags, resolve) == digest_of(A)  # the whole id is its own prefix
    resolve, _ = resolver({})
    assert find_commit("def5678", [f"ocibridge-commit-{C}"], resolve) == f"ocibridge-commit-{C}"
    assert find_commit("0000000", tags, resolve) is None


def test_an_ambiguous_prefix_is_refused_naming_every_candidate():
    resolve, asked = resolver({"main": digest_of(A)})
    tags = ["main", f"ocibridge-commit-{A}", f"ocibridge-commit-{B}"]
    with pytest.raises(AmbiguousCommit) as two:
        find_commit("abc1234", tags, resolve, "reg.example/acme/m@abc1234")
    said = str(two.value)
    assert said.startswith("reg.example/acme/m@abc1234: the commit id abc1234 is ambiguous: 2 commits") and A in said
    assert B in said and "\n" not in said and two.value.candidates == [A, B]
    assert asked == []  # two commit tags decide it: no plain tag resolved
    assert isinstance(two.value, NotFound)  # what names no one manifest is not found
    # a commit tag and a manifest pushed outside serve (only a plain tag names it)
    resolve, _ = resolver({"v3": digest_of(B)})
    with pytest.raises(AmbiguousCommit):
        find_commit("abc1234", ["v3", f"ocibridge-commit-{A}"], resolve)
    assert find_commit("abc12341", ["v3", f"ocibridge-commit-{A}"], resolve) == f"ocibridge-commit-{A}"
    # two tags naming one commit are one candidate
    resolve, _ = resolver({"main": digest_of(A), "v1": digest_of(A)})
    assert find_commit("abc1234", ["main", "v1", f"ocibridge-commit-{A}"], resolve) == digest_of(A)


def test_the_cli_reads_a_short_commit_id_after_the_at_sign():
    ref = parse_registry_reference("localhost:5000/acme/m@ABC1234")
    assert ref.tag == "ocibridge-commit-abc1234" and ref.digest is None
    assert parse_registry_reference(f"localhost:5000/acme/m@{A}").tag == f"ocibridge-commit-{A}"
    for short in ("abc12", "a" * 41):
        with pytest.raises(InvalidReference, match="a commit id is 7 to 40 hex digits"):
            parse_registry_reference(f"localhost:5000/acme/m@{short}")
