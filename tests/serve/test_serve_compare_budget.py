"""A compare page costs what it shows (issue 62 items 4-5, issue 63 item 1): serve runs as a
process (test_serve_publish's; its pages behind the read token's login) in front of a counting
proxy to the real registry; the bytes the registry sends for a page are bounded by
``--compare-budget``, the other order of the same pair is free, the files are there whatever
the budget, and what was not compared is said with the command that compares it. Tensors are
paginated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from safetensors.numpy import save_file
from support.publishing import serve_process

import ocibridge
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.hubserver.web.compare import ClientReads, Compare
from tests.support.faultproxy import FaultProxy
from tests.support.fixtures import new_repo

MIB = 1024 * 1024
BUDGET = 4 * MIB
TENSORS = 24  # of 512 KiB each: 12 MiB a version, every tensor different in each


def version(root: Path, number: int, tensors: int = TENSORS, width: int = 128 * 1024) -> Path:
    root.mkdir(parents=True)
    rng = np.random.default_rng(number)
    save_file({f"t.{i:04d}": rng.random(width, dtype=np.float32) for i in range(tensors)},
              str(root / "model.safetensors"))
    (root / "config.json").write_text(f'{{"hidden": {number}}}\n')
    (root / f"notes-{number}.md").write_text("# notes\n")
    return root


@pytest.fixture(scope="module")
def versions(registry, tmp_path_factory) -> str:
    """A repository with v1, v2, v3: every tensor of model.safetensors differs between any two."""
    tmp = tmp_path_factory.mktemp("budget")
    repo = new_repo("budget")
    for number in (1, 2, 3):
        options = ocibridge.PushOptions(name="tiny", chunk_threshold=MIB, chunk_size=256 * 1024)
        ocibridge.push(str(version(tmp / f"v{number}", number)), f"{registry.host}/{repo}:v{number}",
                       options=options)
    return repo


@pytest.fixture(scope="module")
def proxy(registry) -> Iterator[FaultProxy]:
    counting = FaultProxy(registry)
    try:
        yield counting
    finally:
        counting.stop()


@contextlib.contextmanager
def reader(url: str) -> Iterator[httpx.Client]:
    """A client logged in to the pages with serve's read token (test_serve_publish's tokens)."""
    with httpx.Client(base_url=url, timeout=60) as client:
        login = client.post("/ocibridge/login", data={"token": "reader-token", "next": "/"})
        assert login.status_code == 303, login.text
        yield client


def registry_bytes(proxy: FaultProxy, since: int) -> tuple[int, int]:
    """(blob bytes, all bytes) the registry sent through ``proxy`` after its ``since``-th request."""
    done = proxy.requests[since:]
    return (sum(r.response_bytes for r in done if "/blobs/" in r.path), sum(r.response_bytes for r in done))


def test_a_page_reads_at_most_its_budget_and_the_other_order_nothing(tmp_path, registry, versions, proxy):
    org, name = versions.split("/")
    with serve_process(tmp_path, f"{proxy.host}/{org}", "--compare-budget", "4M") as url, reader(url) as client:
        before = len(proxy.requests)
        page = client.get(f"/{name}/compare/v1...v2")
        assert page.status_code == 200, page.text
        blobs, everything = registry_bytes(proxy, before)
        # the whole diff would read 2 x 12 MiB of tensors: the page read its budget at most
        assert 0 < blobs <= BUDGET, blobs
        assert everything <= BUDGET + 256 * 1024, everything  # manifests, a chunk table: small
        assert 'id="files"' in page.text and 'data-change="changed"' in page.text
        assert "notes-1.md" in page.text and "notes-2.md" in page.text  # files: no reads needed
        assert 'class="bad unread" data-file="model.safetensors"' in page.text
        assert "tensors not compared" in page.text and "read budget" in page.text
        assert f"run: <code>ocibridge diff {proxy.host}/{versions}@sha256:" in page.text
        assert "(this page may read 4.0 MiB)" in page.text
        # the configs were read within the budget; their one difference, modelfs.diffIds, is the files
        # table's and is left out (issue 78): no config section
        assert 'id="config-changes"' not in page.text and "diffIds" not in page.text

        before = len(proxy.requests)
        reverse = client.get(f"/{name}/compare/v2...v1")
        assert reverse.status_code == 200, reverse.text
        assert registry_bytes(proxy, before)[0] == 0  # the same comparison, made once
        # ... the other way round: what v1...v2 added, v2...v1 removed
        assert '<tr class="file added" data-change="added">\n  <td>added</td><td class="path"><code>notes-1.md' \
            in reverse.text
        assert '<tr class="file removed" data-change="removed">\n  <td>removed</td><td class="path"><code>notes-1.md' \
            in page.text


def test_a_client_has_a_budget_across_pages(registry, versions, proxy):
    """Three pairs asked by one client: each page within the page budget, all of them within
    the client's (the third gets what is left: nothing)."""
    org, name = versions.split("/")
    catalog = Catalog(parse_sources([f"{proxy.host}/{org}"]))
    compare = Compare(catalog, lambda old, new, budget: ocibridge.diff(old, new, max_read=budget),
                      page_budget=BUDGET, clients=ClientReads(budget=6 * MIB))
    try:
        before = len(proxy.requests)
        shown = [compare(name, a, b, "192.0.2.7") for a, b in (("v1", "v2"), ("v2", "v3"), ("v1", "v3"))]
        other = compare(name, "v3", "v1", "192.0.2.8")  # another client: its own budget
    finally:
        catalog.close()
    blobs, _ = registry_bytes(proxy, before)
    read = [s.diff.bytes_read for s in shown if s.diff is not None]
    assert all(0 < n <= BUDGET for n in read[:2]) and sum(read) <= 6 * MIB, read
    assert read[2] <= 6 * MIB - read[0] - read[1]
    assert blobs <= 6 * MIB + BUDGET, blobs
    assert all(s.command is not None for s in shown)  # each says what compares the rest
    assert other.diff is not None and 0 < other.diff.bytes_read <= BUDGET


def test_tensors_are_paginated(tmp_path, registry):
    """1,200 changed tensors: 500 a page, the next page linked."""
    repo = new_repo("pages")
    for number in (1, 2):
        ocibridge.push(str(version(tmp_path / f"v{number}", number, tensors=1200, width=4)),
                       f"{registry.host}/{repo}:v{number}")
    org, name = repo.split("/")
    with serve_process(tmp_path, f"{registry.host}/{org}") as url, reader(url) as client:
        first = client.get(f"/{name}/compare/v1...v2")
        third = client.get(f"/{name}/compare/v1...v2?tensors=1000")
        odd = client.get(f"/{name}/compare/v1...v2?tensors=x")
    assert first.status_code == third.status_code == odd.status_code == 200
    assert first.text.count('<li class="tensor"') == 500 and third.text.count('<li class="tensor"') == 200
    assert "Tensors 1–500 of 1200." in first.text and 'href="?tensors=500"' in first.text
    assert "Tensors 1001–1200 of 1200." in third.text and 'href="?tensors=500"' in third.text
    assert "1200 tensors differ" in first.text and "t.0000" in first.text and "t.1100" in third.text
    assert odd.text.count('<li class="tensor"') == 500
