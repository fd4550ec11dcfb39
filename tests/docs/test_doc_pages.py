"""The docs a newcomer reads: each page short enough to read in ten minutes, each one reachable
from the README's list of docs, and each relative link landing on a page and a heading that exist.
A page that grows past the bound is split into pages of one job each (serve.md's index is the
pattern); the pages named in ``NOT_YET_SPLIT`` are the long reference pages still to split, held
near the length they have."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docrun import DOCS_DIR

ROOT = DOCS_DIR.parent
#: a ten-minute read at about 250 words a minute (words as ``wc -w`` counts them, code included)
WORDS = 2500
#: the long reference pages not split yet, and their words when serve.md was split: each may grow by a
#: tenth (other changes under way add to them) before it must be split
NOT_YET_SPLIT = {
    "api.md": 5809, "benchmarks.md": 72528, "kubernetes.md": 6288,
    "lazy.md": 8740, "mirroring.md": 5258, "mount.md": 2630, "registry.md": 3029, "security.md": 8611, "signing.md":
    8464, "transfers.md": 3680,
}
#: the most words a table cell holds: more is a short cell and a section below the table
CELL_WORDS = 150
CELL = re.compile(r"(?<!\\)\|")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def pages() -> list[Path]:
    return sorted(DOCS_DIR.glob("*.md"))


def words(page: Path) -> int:
    return len(page.read_text().split())


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives the page's headings: lowercased, punctuation but ``-`` and ``_`` dropped,
    spaces made ``-``, a repeated one suffixed ``-1``, ``-2``..."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


def test_every_page_reads_in_ten_minutes():
    long = {p.name: words(p) for p in pages() if words(p) > WORDS and p.name not in NOT_YET_SPLIT}
    assert long == {}, f"pages over {WORDS} words: split them into pages of one job each: {long}"


def test_no_table_cell_runs_past_a_paragraph():
    """A cell of hundreds of words is a page squeezed into a column: cli.md's and architecture.md's
    were; the long text is a section below its table, the cell a line that links to it."""
    long = [f"{page.relative_to(ROOT)}:{n}: {len(cell.split())} words"
            for page in sorted(DOCS_DIR.rglob("*.md"))
            for n, line in enumerate(FENCE.sub("", page.read_text()).splitlines(), 1) if line.startswith("|")
            for cell in CELL.split(line)[1:-1] if len(cell.split()) > CELL_WORDS]
    assert long == []


def test_the_pages_not_yet_split_do_not_grow():
    grown = {name: words(DOCS_DIR / name) for name, then in NOT_YET_SPLIT.items()
             if (DOCS_DIR / name).exists() and words(DOCS_DIR / name) > then * 1.1}
    assert grown == {}, grown


def test_every_page_is_reached_from_the_readmes_list_of_docs():
    """The README names each page (``docs/NAME.md``), or a page it reaches links to it."""
    readme = (ROOT / "README.md").read_text()
    reached = {p for p in pages() if f"docs/{p.name}" in readme}
    todo = list(reached)
    while todo:
        page = todo.pop()
        for target in links(page):
            path = (page.parent / target.split("#")[0]).resolve() if not target.startswith("#") else page
            if path.parent == DOCS_DIR and path.suffix == ".md" and path.exists() and path not in reached:
                reached.add(path)
                todo.append(path)
    assert {p.name for p in pages()} - {p.name for p in reached} == set()


def test_every_relative_link_lands_on_a_page_and_a_heading():
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS_DIR.rglob("*.md"))]:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if file and not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
                continue
            if anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert broken == []


def test_the_anchors_are_githubs():
    page = DOCS_DIR / "serve-kubernetes.md"
    assert "many-readers-what-one-replica-serves-and-what-scales-it" in anchors(page)
    assert "on-kubernetes-ocibridge-k8s-serve" in anchors(page)
