"""The upstream is a source the catalog holds (repo/arriving.py ``Upstream``), not a kind of
catalog: the catalog's one ``resolve`` hands it a read (``arriving`` passed through), never a
write's resolution; what it took back is neither listed nor has refs; its door rules and whether
this serve fetches are its constructor's. No upstream is asked here: a stand-in that records what
it is asked, and the proxy's own :class:`UpstreamSource` stopped at its door before it asks (the
proxy against the stand-in upstream Hub is every other test of this folder)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.refnames import HEADS
from ocibridge.hubserver.repo.sources import LayoutSource, RepoNotFound, Repository, Source, UpstreamRefused
from ocibridge.hubserver.upstream.errors import FetchedElsewhere
from ocibridge.hubserver.upstream.proxy import UpstreamSource
from ocibridge.hubserver.upstream.settings import UpstreamSettings

#: a revision the stand-in says is arriving
ARRIVING = object()


class TakenBack(Exception):
    pass


class Recording:
    """An upstream that records what the catalog asks it; ``acme/gone`` it took back."""

    def __init__(self, here: Any):
        self.here, self.asked, self.closed = here, [], False

    def resolve(self, repo_id: str, revision: str, reuse_for: float, *, arriving: bool) -> Any:
        self.asked.append((repo_id, revision, reuse_for, arriving))
        return ARRIVING if arriving else self.here.resolve_here(repo_id, revision, reuse_for=reuse_for)

    def taken_back(self, repo_id: str) -> Exception | None:
        return TakenBack(repo_id) if repo_id == "acme/gone" else None

    def describe(self) -> str:
        return "a stand-in"

    def close(self) -> None:
        self.closed = True


class Listing(Source):
    """A source that lists two repositories and holds neither."""

    shown = "listing"

    def repository(self, parts: list[str]) -> Repository | None:
        return None

    def repo_ids(self) -> list[str]:
        return ["acme/gone", "acme/kept"]


def test_a_read_goes_to_the_upstream_through_the_one_resolve_a_write_never():
    catalog = Catalog([Listing()], upstream=Recording)
    upstream = catalog.upstream
    assert isinstance(upstream, Recording) and upstream.here is catalog  # built by the catalog, for it
    assert catalog.resolve("acme/x", None, arriving=True) is ARRIVING
    with pytest.raises(RepoNotFound):  # not arriving: the upstream answers as the sources do
        catalog.resolve("acme/x", "v1", reuse_for=2.0)
    assert upstream.asked == [("acme/x", "main", 0, True), ("acme/x", "v1", 2.0, False)]
    for write in ({"ref": True}, {"kind": HEADS}):  # a write's resolution: the sources as they are
        with pytest.raises(RepoNotFound):
            catalog.resolve("acme/x", "main", **write)
    assert len(upstream.asked) == 2
    assert not hasattr(catalog, "resolve_arriving")  # one resolution, no second path beside it


def test_what_the_upstream_took_back_is_not_listed_and_has_no_refs():
    catalog = Catalog([Listing()], upstream=Recording)
    assert [repo_id for repo_id, _ in catalog.repo_ids()] == ["acme/kept"]
    with pytest.raises(TakenBack):
        catalog.refs("acme/gone")
    catalog.close()
    assert isinstance(catalog.upstream, Recording) and catalog.upstream.closed


def test_a_catalog_without_an_upstream_hands_out_landed_revisions_only():
    catalog = Catalog([Listing()])
    assert catalog.upstream is None
    with pytest.raises(RepoNotFound):
        catalog.resolve("acme/x", None, arriving=True)


def empty_layout(root: Path) -> LayoutSource:
    root.mkdir(parents=True)
    (root / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": []}))
    return LayoutSource(root, f"oci:{root}")


def proxy(tmp_path: Path, audit: list[dict[str, Any]], *, fetches_here: bool, deny: tuple[str, ...] = ()) -> Catalog:
    """A catalog whose upstream is the proxy's, its pieces given to its constructor; the upstream's
    URL one nothing listens on (asking it would be UpstreamDown, not the answers below)."""
    settings = UpstreamSettings("http://127.0.0.1:9", deny=deny)
    return Catalog([empty_layout(tmp_path / "layout")], upstream=functools.partial(
        UpstreamSource, settings, readers=lambda repo_id, *, private, gated: None,
        fetches_here=lambda: fetches_here, audit=audit.append))


def test_the_door_rules_and_the_fetch_here_choice_are_the_upstreams_constructor_arguments(tmp_path: Path):
    audit: list[dict[str, Any]] = []
    denied = proxy(tmp_path / "a", audit, fetches_here=True, deny=("acme/*",))
    with pytest.raises(UpstreamRefused) as refused:
        denied.resolve("acme/x", None, arriving=True)
    assert refused.value.rule == "--upstream-deny acme/*"
    assert [(line["repository"], line["outcome"]) for line in audit] == [("acme/x", "refused")]
    elsewhere = proxy(tmp_path / "b", audit, fetches_here=False)
    with pytest.raises(FetchedElsewhere):  # a reader: the writer fetches, this serve never asks
        elsewhere.resolve("acme/x", None, arriving=True)
    with pytest.raises(RepoNotFound):  # a write's resolution: never the upstream's
        elsewhere.resolve("acme/x", "main", ref=True)
    denied.close()
    elsewhere.close()
