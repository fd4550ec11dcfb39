"""Issue 61's bookkeeping, piece by piece: the ``@<40 hex>`` reference form, the refs record as
read from an untrusted registry, the tagging of a history serve wrote before it tagged commits,
and serve publishing into an OCI layout (its commit tags there, hidden by ``ls``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import Served, serving

from ocibridge.errors import InvalidReference
from ocibridge.hubserver.repo.commits import PARENT
from ocibridge.hubserver.repo.landing import tag_ancestors
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.hubserver.repo.refsrecord import RecordUnread, RefsRecord, parsed, read_record, write_record
from ocibridge.hubserver.repo.sources import Repository
from ocibridge.oci.bookkeeping import REFS_ARTIFACT_TYPE, REFS_LAYER_TYPE, REFS_TAG, commit_id, is_bookkeeping
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.writer import Blob, write_artifact

HEX = "3f1e5487c0a1d2b3e4f5a6b7c8d9e0f1a2b3c4d5"
TOKENS = ("reader", "writer write * ci-bot")


def test_a_commit_id_after_at_names_serves_commit_tag():
    ref = parse_registry_reference(f"reg.example:5000/acme/m@{HEX.upper()}")
    assert (ref.tag, ref.digest) == (f"ocibridge-commit-{HEX}", None)
    assert ref.text == f"reg.example:5000/acme/m@{HEX.upper()}"  # messages say what was typed
    digest = "sha256:" + "a" * 64
    assert parse_registry_reference(f"reg.example/acme/m@{digest}").digest == digest
    for bad in (f"reg.example/acme/m:v1@{HEX}", f"reg.example/acme/m@{HEX[:6]}"):  # 7 to 39: an abbreviation
        with pytest.raises(InvalidReference):
            parse_registry_reference(bad)
    assert parse_registry_reference(f"reg.example/acme/m@{HEX[:39]}").tag == f"ocibridge-commit-{HEX[:39]}"


def test_a_refs_record_from_the_registry_is_read_as_untrusted():
    assert parsed(b'{"branches": ["dev", "dev"], "tags": ["v1"]}') == RefsRecord(frozenset({"dev"}), frozenset({"v1"}))
    # not names: kept out; serve's own names: neither
    doc = {"branches": ["ok", 7, None, "bad name", "a..b", "x" * 300, "ocibridge-refs", "both", "feature/x"],
           "tags": "v1,v2", "extra": {"deep": [[[]]]}}
    # git's names, not only registry tags: feature/x is a branch, at its reserved tag whatever the record says
    assert parsed(json.dumps(doc).encode()) == RefsRecord(frozenset({"ok", "both", "feature/x"}), frozenset(),
                                                          branches_aside=frozenset({"feature/x"}))
    assert parsed(json.dumps({"branches": [], "tags": ["both", "v2"]}).encode()).tags == {"both", "v2"}
    # a name both a branch and a tag: at most one at the registry tag of its name (the branch,
    # unless the record puts it aside); a name aside that the record does not list: not aside
    both = parsed(json.dumps({"branches": ["both"], "tags": ["both"], "tagsAside": ["v1"]}).encode())
    assert (both.branches_aside, both.tags_aside) == (frozenset(), {"both"})
    aside = parsed(json.dumps({"branches": ["both"], "tags": ["both"], "branchesAside": ["both"]}).encode())
    assert (aside.branches_aside, aside.tags_aside) == ({"both"}, frozenset())
    for hostile in (b"[]", b"not json", b'"text"'):
        with pytest.raises(ValueError):
            parsed(hostile)
    assert is_bookkeeping("acme/m:ocibridge-commit-" + HEX) and not is_bookkeeping("acme/m:latest")


def layout_repo(tmp_path: Path) -> tuple[LayoutStore, Repository]:
    store = LayoutStore(tmp_path / "lay", create=True)
    return store, Repository(store, "oci:lay acme/m", prefix="acme/m:")


def test_the_record_round_trips_and_a_foreign_one_is_refused(tmp_path):
    store, repo = layout_repo(tmp_path)
    assert read_record(repo) == RefsRecord()
    record = RefsRecord().with_ref("dev", True).with_ref("v1", False)
    write_record(repo, store, record)
    assert read_record(repo) == record
    # a branch and a tag of one name: both kept, the one made second aside, as written
    both = read_record(repo).with_ref("dev", False, aside=True)
    assert (both.branches, both.tags, both.tags_aside) == ({"dev"}, {"dev", "v1"}, {"dev"})
    write_record(repo, store, both)
    assert read_record(repo) == both
    assert both.without_ref("dev", True) == RefsRecord(frozenset(), frozenset({"dev", "v1"}),
                                                       tags_aside=frozenset({"dev"}))
    # something else under the record's tag (another tool's artifact, a record cut short): serve
    # cannot tell what the record said (private? gated?), so it is refused, never read as empty
    # (issue 85: fail closed); only a tag that is not there is no record
    small(store, {}, tag=f"acme/m:{REFS_TAG}")
    with pytest.raises(RecordUnread, match="cannot tell whether the repository is private"):
        read_record(repo)
    data = b'{"branches": [], "private": tr'
    layer = Descriptor.for_bytes(REFS_LAYER_TYPE, data)
    body = Manifest(mediaType=OCI_MANIFEST, artifactType=REFS_ARTIFACT_TYPE, config=Descriptor.for_bytes(
        OCI_EMPTY, b"{}"), layers=[layer]).to_json_bytes()
    write_artifact(store, Descriptor.for_bytes(OCI_MANIFEST, body), body,
                   [Blob.of_bytes(Descriptor.for_bytes(OCI_EMPTY, b"{}"), b"{}"), Blob.of_bytes(layer, data)],
                   tags=[f"acme/m:{REFS_TAG}"])
    with pytest.raises(RecordUnread):
        read_record(repo)
    assert read_record(Repository(store, "oci:lay acme/none", prefix="acme/none:")) == RefsRecord()


def small(store: LayoutStore, annotations: dict[str, str], tag: str | None = None) -> str:
    """A small manifest written into ``store`` (one config blob); its digest."""
    config = json.dumps(annotations, sort_keys=True).encode()  # unique per manifest
    desc = Descriptor.for_bytes(OCI_EMPTY, config)
    body = Manifest(mediaType=OCI_MANIFEST, config=desc, layers=[], annotations=annotations or None).to_json_bytes()
    manifest = Descriptor.for_bytes(OCI_MANIFEST, body)
    write_artifact(store, manifest, body, [Blob.of_bytes(desc, config)], tags=[tag] if tag else [])
    return manifest.digest


def test_a_history_from_before_commit_tags_is_tagged_at_the_next_commit(tmp_path):
    """Three commits chained by their parent annotations, none with its tag: all three tagged,
    newest first; then nothing more to do (the walk stops at the first tagged)."""
    store, _ = layout_repo(tmp_path)
    first = small(store, {"n": "1"})
    second = small(store, {"n": "2", PARENT: first})
    third = small(store, {"n": "3", PARENT: second}, tag="acme/m:latest")
    assert tag_ancestors(store, third, "acme/m:latest", 1000) == 3
    for digest in (first, second, third):
        assert store.resolve(f"acme/m:ocibridge-commit-{commit_id(digest)}").digest == digest
    assert tag_ancestors(store, third, "acme/m:latest", 1000) == 0
    fourth = small(store, {"n": "4", PARENT: third})
    assert tag_ancestors(store, fourth, "acme/m:latest", 1000) == 1
    assert tag_ancestors(store, small(store, {"n": "5", PARENT: fourth}), "acme/m:latest", 1) == 1  # at most


@pytest.fixture
def served_layout(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    LayoutStore(tmp_path / "lay", create=True)
    with serving([f"oci:{tmp_path}/lay"], tokens=TOKENS, publish=Publishing()) as served:
        yield served, tmp_path / "lay"


def post(served: Served, path: str, token: str = "writer", **kwargs: Any) -> httpx.Response:
    return httpx.post(served.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=60, **kwargs)


def commit_file(served: Served, name: str, data: bytes, branch: str = "main") -> str:
    body = b"".join(json.dumps(line).encode() + b"\n" for line in (
        {"key": "header", "value": {"summary": f"add {name}"}},
        {"key": "file", "value": {"path": name, "content": base64.b64encode(data).decode(), "encoding": "base64"}}))
    answer = post(served, f"/api/models/acme/m/commit/{branch}", content=body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["commitOid"])


def test_serve_publishing_into_a_layout_tags_its_commits_and_ls_hides_them(served_layout, capsys):
    from ocibridge.cli import main

    served, lay = served_layout
    assert post(served, "/api/repos/create", json={"name": "m", "organization": "acme"}).status_code == 200
    first = commit_file(served, "a.txt", b"a\n")
    second = commit_file(served, "b.txt", b"b\n")
    names = LayoutStore(lay).tags()
    assert {f"acme/m:ocibridge-commit-{first}", f"acme/m:ocibridge-commit-{second}", "acme/m:latest"} <= set(names)
    for refused in ("ocibridge-refs", "ocibridge-commit-x"):
        answer = post(served, f"/api/models/acme/m/branch/{refused}", json={})
        assert answer.status_code == 400 and "bookkeeping" in answer.json()["error"], answer.text
    assert post(served, "/api/models/acme/m/branch/dev", json={"startingPoint": first}).status_code == 200
    refs = httpx.get(served.url + "/api/models/acme/m/refs", headers={"Authorization": "Bearer reader"}).json()
    assert [(b["name"], b["targetCommit"]) for b in refs["branches"]] == [("main", second), ("dev", first)]
    assert refs["tags"] == []
    login = httpx.post(served.url + "/ocibridge/login", data={"token": "reader", "next": "/"})
    page = httpx.get(served.url + "/acme/m", cookies={"ocibridge_session": login.cookies["ocibridge_session"]}).text
    assert '">dev</a></td><td>branch</td>' in page and "ocibridge-" not in page  # the model page says so too
    capsys.readouterr()
    assert main(["ls", f"oci:{lay}", "--json"]) == 0
    listed = {entry["ref"] for entry in json.loads(capsys.readouterr().out)}
    assert listed == {"acme/m:latest", "acme/m:dev"}
    assert main(["ls", f"oci:{lay}", "--all", "--json"]) == 0
    assert f"acme/m:ocibridge-commit-{first}" in {e["ref"] for e in json.loads(capsys.readouterr().out)}
    # the catalog page of a serve whose default tag the repository lacks shows its last tag by
    # name: a version, never serve's own ocibridge-refs (which sorts last)
    with serving([f"oci:{lay}"], tokens=TOKENS, default_tag="v9") as other:
        login = httpx.post(other.url + "/ocibridge/login", data={"token": "reader", "next": "/"})
        page = httpx.get(other.url + "/", cookies={"ocibridge_session": login.cookies["ocibridge_session"]})
        assert page.status_code == 200 and "acme/m" in page.text
        assert "ocibridge-refs" not in page.text and "ocibridge-commit" not in page.text
