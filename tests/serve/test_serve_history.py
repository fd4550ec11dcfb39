"""The data of serve's history and compare pages (issue 56): commits linked by the parent digest
serve's publishing annotates, else tags by date; a compare that is ``ocibridge diff``'s own
result for the same two revisions. Against the real registry, through serve's Catalog."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

import ocibridge
from ocibridge.cli import main
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.commits import PARENT, SUMMARY
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.hubserver.web.compare import Compare
from ocibridge.hubserver.web.history import history, split_compare
from tests.signing_keys import key_pair
from tests.support.fixtures import new_repo

CHUNK = 64 * 1024
TENSORS = 4


def version(root, number: int):
    """Version ``number`` of one model: from 2 on, tensor 0 changed, a file renamed."""
    root.mkdir(parents=True)
    tensors = {f"layer.{i}.weight": np.full(64 * 1024, i, dtype=np.float32) for i in range(TENSORS)}
    tensors["layer.0.weight"] = tensors["layer.0.weight"] + number
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text('{"hidden": 4}\n')
    (root / ("README.md" if number == 1 else "NOTES.md")).write_text("# notes\n")
    return root


def push(root, ref: str, tag: str, day: int, annotations: dict[str, str] | None = None) -> str:
    options = ocibridge.PushOptions(name="tiny", overrides={"version": tag}, chunk_threshold=100_000,
                                    chunk_size=CHUNK,
                                    build=ocibridge.BuildOptions(created_at=f"2026-01-{day:02d}T00:00:00Z",
                                                                 annotations=annotations or {}))
    return ocibridge.push(str(root), ref, options=options).descriptor.digest


@pytest.fixture(scope="module")
def versions(registry, tmp_path_factory):
    """ORG/NAME with tags v1 (day 1), v3 (day 3) and v2 (day 2) pushed in that order, outside serve."""
    tmp = tmp_path_factory.mktemp("history")
    repo = new_repo("hist")
    for tag, day in (("v1", 1), ("v3", 3), ("v2", 2)):
        push(version(tmp / tag, day), f"{registry.host}/{repo}:{tag}", tag, day)
    private, _ = key_pair(tmp / "keys")  # a cosign signature's tag (sha256-HEX.sig) is no version
    assert main(["sign", f"{registry.host}/{repo}:v2", "--key", str(private)]) == 0
    return repo


def catalog_of(registry, prefix: str) -> Catalog:
    return Catalog(parse_sources([f"{registry.host}/{prefix}"]), default_tag="v3")


def test_a_history_without_parents_is_the_tags_newest_first(registry, versions):
    org, name = versions.split("/")
    catalog = catalog_of(registry, org)
    try:
        found = history(catalog, name, "main")
    finally:
        catalog.close()
    assert not found.linked
    assert [c.tags for c in found.commits] == [("v3",), ("v2",), ("v1",)]
    assert [c.date for c in found.commits] == [f"2026-01-0{d}T00:00:00Z" for d in (3, 2, 1)]
    # each diffed against the one before it in time
    assert [c.previous for c in found.commits] == [found.commits[1].digest, found.commits[2].digest, None]


def test_a_history_follows_the_parent_digest_serve_annotates(registry, tmp_path):
    repo = new_repo("linked")
    ref = f"{registry.host}/{repo}"
    first = push(version(tmp_path / "a", 1), f"{ref}:main-head", "v1", 1, {SUMMARY: "first"})
    second = push(version(tmp_path / "b", 2), f"{ref}:main-head", "v2", 2, {SUMMARY: "second", PARENT: first})
    org, name = repo.split("/")
    catalog = Catalog(parse_sources([f"{registry.host}/{org}"]), default_tag="main-head")
    try:
        found = history(catalog, name, "main")
    finally:
        catalog.close()
    assert found.linked
    assert [(c.digest, c.title, c.previous) for c in found.commits] == [
        (second, "second", first), (first, "first", None)]
    assert found.commits[0].tags == ("main-head",) and found.commits[1].tags == ()  # the parent is untagged now
    # the page links every commit, the untagged parent too, by its digest
    from starlette.testclient import TestClient

    app = ocibridge.create_app(f"{registry.host}/{org}", options=ocibridge.ServeOptions(default_tag="main-head"))
    with TestClient(app) as client:
        page = client.get(f"/{name}/commits/main")
        assert page.status_code == 200 and "second" in page.text and "first" in page.text
        assert f'href="/{name}/compare/{first}...{second}"' in page.text
        for digest in (first, second):
            assert f'href="/{name}/tree/{digest}"' in page.text
            assert client.get(f"/{name}/tree/{digest}").status_code == 200


def test_compare_is_ocibridge_diff_of_the_same_revisions(registry, versions):
    org, name = versions.split("/")
    catalog = catalog_of(registry, org)
    calls: list[tuple[str, str]] = []

    def diff(old: str, new: str, budget):
        calls.append((old, new))
        return ocibridge.diff(old, new, max_read=budget)

    try:
        compare = Compare(catalog, diff)
        shown = compare(name, "v1", "v2")
        again = compare(name, "v1", "v2")
        reverse = compare(name, "v2", "v1")
    finally:
        catalog.close()
    expected = ocibridge.diff(f"{registry.host}/{versions}:v1", f"{registry.host}/{versions}:v2").as_dict()
    assert shown.diff is not None and shown.why is None
    made = shown.diff.as_dict()
    assert {k: v for k, v in made.items() if k not in ("old", "new", "readBudget")} == {
        k: v for k, v in expected.items() if k not in ("old", "new", "readBudget")}
    assert made["readBudget"] == 64 * 1024 * 1024 and expected["readBudget"] is None
    assert made["old"]["digest"] == expected["old"]["digest"] and made["new"]["digest"] == expected["new"]["digest"]
    files = {f["path"]: f["change"] for f in made["files"]}
    assert files == {"README.md": "removed", "NOTES.md": "added", "model.safetensors": "changed"}
    weights = next(f for f in made["files"] if f["path"] == "model.safetensors")
    assert [(t["name"], t["change"]) for t in weights["tensors"]] == [("layer.0.weight", "changed")]
    assert again.diff == shown.diff and len(calls) == 1  # two digests' diff is made once
    assert reverse.diff is not None and reverse.diff.as_dict() == ocibridge.diff(
        f"{registry.host}/{versions}:v2", f"{registry.host}/{versions}:v1").as_dict() | {
        "old": reverse.diff.as_dict()["old"], "new": reverse.diff.as_dict()["new"],
        "bytesRead": shown.diff.bytes_read, "readBudget": shown.diff.budget}
    assert len(calls) == 1  # ... whichever order it is asked in


def test_compare_of_a_layout_says_the_diff_reads_registries(tmp_path):
    layout = tmp_path / "layout"
    for tag, number in (("v1", 1), ("v2", 2)):
        ocibridge.push(str(version(tmp_path / tag, number)), f"oci:{layout}:tiny:{tag}")
    catalog = Catalog(parse_sources([f"oci:{layout}"]))
    try:
        shown = Compare(catalog, lambda old, new, budget: ocibridge.diff(old, new, max_read=budget))(
            "tiny", "v1", "v2")
    finally:
        catalog.close()
    assert shown.diff is None and shown.why is not None and "registr" in shown.why


def test_split_compare():
    assert split_compare("v1...v2") == ("v1", "v2")
    assert split_compare("v1..v2") is None and split_compare("...v2") is None and split_compare("v1...") is None


def test_a_compare_page_shows_the_files_and_compares_tensors_within_its_budget(registry, tmp_path):
    """Two versions of a 17 MiB safetensors file pushed without a chunk table (issue 63.1): within
    the default budget (64 MiB) the page reads both whole and compares their tensors; under a
    smaller one it still shows the files, sizes and config, says the tensors were not compared
    and names the command (before, it showed a red paragraph and no table at all)."""
    from starlette.testclient import TestClient

    from ocibridge.api.serve import ServeOptions

    repo = new_repo("whole")
    for tag, number in (("v1", 1), ("v2", 2)):
        root = tmp_path / tag
        root.mkdir()
        save_file({"w": np.full(17 * 1024 * 1024 // 4, number, dtype=np.float32)}, str(root / "model.safetensors"))
        (root / "config.json").write_text(f'{{"hidden": {number}}}\n')
        ocibridge.push(str(root), f"{registry.host}/{repo}:{tag}", options=ocibridge.PushOptions(chunks=False))
    org, name = repo.split("/")
    with TestClient(ocibridge.create_app(f"{registry.host}/{org}")) as client:
        whole = client.get(f"/{name}/compare/v1...v2")
    with TestClient(ocibridge.create_app(f"{registry.host}/{org}",
                                         options=ServeOptions(compare_budget=16 * 1024 * 1024))) as client:
        bounded = client.get(f"/{name}/compare/v1...v2")
    assert whole.status_code == bounded.status_code == 200
    assert 'data-change="changed" data-file="model.safetensors"' in whole.text and "Not compared" not in whole.text
    assert 'id="command"' not in whole.text and "(this page may read 64.0 MiB)" in whole.text
    for page in (whole, bounded):
        assert 'id="files"' in page.text and "17.0 MiB" in page.text and 'id="config-changes"' in page.text
    assert "Not compared: no tensor compared: reading the headers would pass the read budget" in bounded.text
    assert f"run: <code>ocibridge diff {registry.host}/{repo}@sha256:" in bounded.text
    assert "<li class=\"tensor\"" not in bounded.text
