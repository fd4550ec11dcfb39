"""The catalog over 100,000 repositories (issue 62, red team): a layout source whose index.json
lists 100,000 names, all of one small model. Serve runs as a process; the listing must cost
what it shows: the index parsed once per change, not once per row and per call (before: the
catalog page took 525 s under load, ``/api/models?limit=5`` 8.6 s). The work is counted, not
timed: the bytes serve's process reads (``/proc/PID/io``) while it answers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from serve_processes import running

from ocibridge.cli import main
from ocibridge.stores.layout import LayoutStore
from tests.modelgen import make_bert_model

ENTRIES = 100_000
AUTH = {"Authorization": "Bearer reader-token"}


def big_layout(tmp_path: Path) -> Path:
    """One tiny model pushed, then its index entry written 100,000 times under other names
    (written directly: pushing 100,000 names would take the suite's budget)."""
    src = make_bert_model(tmp_path / "tiny")
    layout = tmp_path / "lay"
    LayoutStore(layout, create=True)
    assert main(["push", str(src), f"oci:{layout}:acme/tiny:latest", "-q"]) == 0
    index = json.loads((layout / "index.json").read_text())
    entry = index["manifests"][0]
    manifests = []
    for n in range(ENTRIES):
        named = dict(entry, annotations={**entry["annotations"],
                                         "org.opencontainers.image.ref.name": f"org{n % 100}/m{n:06d}:latest"})
        manifests.append(named)
    index["manifests"] = manifests
    (layout / "index.json").write_text(json.dumps(index))
    return layout


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def bytes_read(pid: int) -> int:
    """What the process read through read(2) and its kin (files and sockets), from its start."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def test_a_100000_repository_layout_lists_reading_its_index_once(tmp_path, monkeypatch):
    layout = big_layout(tmp_path)
    size = (layout / "index.json").stat().st_size
    assert size > 16 << 20  # over the default cap: serving it is the operator's choice
    monkeypatch.setenv("OCIBRIDGE_MAX_INDEX_BYTES", str(64 << 20))
    with running(tmp_path / "serve", f"oci:{layout}") as served:
        assert served.proc is not None
        login = httpx.post(f"{served.url}/ocibridge/login", data={"token": "reader-token", "next": "/"})
        jar = {"ocibridge_session": login.cookies["ocibridge_session"]}
        before = bytes_read(served.proc.pid)
        api = httpx.get(f"{served.url}/api/models", params={"limit": 5}, headers=AUTH, timeout=120)
        page = httpx.get(f"{served.url}/", cookies=jar, timeout=120)
        read = bytes_read(served.proc.pid) - before
        assert api.status_code == 200, api.text
        assert len(api.json()) == 5
        assert page.status_code == 200, page.text[:500]
        assert "org0/m000000" in page.text
        # the index read once for both answers (and the page's templates and modules, a few MiB);
        # before, every row parsed it again: hundreds of reads of it
        print(f"read {read / size:.2f}x index.json ({size >> 20} MiB), rss {rss_mib(served.proc.pid):.0f} MiB")
        assert size <= read < 2 * size, f"serve read {read} bytes for an index of {size}"
        assert rss_mib(served.proc.pid) < 1024


def test_a_registry_catalog_cut_short_says_so(tmp_path, registry, monkeypatch, caplog):
    """A registry whose ``_catalog`` has more pages than serve reads: the page and the log say
    the listing is incomplete (it used to stop silently at 100 pages). The bound is lowered to
    one page of one name so the test registry's few repositories are past it."""
    import logging

    from serving import serving

    from ocibridge.hubserver.repo import sources

    for name in ("one", "two"):
        model = make_bert_model(tmp_path / name)
        assert main(["push", str(model), f"{registry.host}/cut/acme/{name}:latest", "-q"]) == 0
    monkeypatch.setattr(sources, "CATALOG_PAGE", 1)
    monkeypatch.setattr(sources, "CATALOG_PAGES", 1)
    with caplog.at_level(logging.WARNING, logger="ocibridge.hubserver"), serving([registry.host]) as served:
        page = httpx.get(f"{served.url}/", timeout=30)
    assert page.status_code == 200
    assert 'class="note cut-short"' in page.text and "has more" in page.text
    assert any("has more" in r.getMessage() for r in caplog.records)


def test_the_index_is_parsed_once_per_change(tmp_path):
    """Calls of a served layout share one parse until index.json changes (a tag added by a
    plain LayoutStore, as serve's own writes and other commands make them)."""
    from ocibridge.hubserver.repo import layoutindex

    layout = tmp_path / "lay"
    LayoutStore(layout, create=True)
    assert main(["push", str(make_bert_model(tmp_path / "tiny")), f"oci:{layout}:acme/tiny:latest", "-q"]) == 0
    served = layoutindex.ServedLayout(layout)
    before = layoutindex.parses
    desc = served.resolve("acme/tiny:latest")
    for _ in range(50):
        assert served.tags() == ["acme/tiny:latest"]
        assert served.resolve("acme/tiny:latest") == desc
        served.referrers(desc)
    assert layoutindex.parses == before + 1
    LayoutStore(layout).tag(desc, "acme/tiny:v2")
    assert layoutindex.ServedLayout(layout).tags() == ["acme/tiny:latest", "acme/tiny:v2"]
    assert layoutindex.parses == before + 2
    assert (desc.annotations or {}).get("org.opencontainers.image.ref.name") is None
