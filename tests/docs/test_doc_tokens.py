"""The docs' serve tokens have the form every Hub client takes: ``hf_…``. @huggingface/hub
refuses any other before it sends a request (``TypeError: Your access token must start with
'hf_'``), so a reader who tried the docs' ``ci-token`` from JavaScript got no further. Each token
file a block writes is read by serve's own parser, and the tokens the blocks send are its tokens.
The blocks themselves run in the docs' tests (test_serve_docs.py, test_doc_examples.py)."""

from __future__ import annotations

import re

from ocibridge.hubserver.grants import parse_lines
from tests.docrun import DOCS_DIR, FENCE, doc_text

#: a token file a block writes: ``printf 'LINES' > FILE`` or ``echo "LINE" > FILE``
WRITTEN = re.compile(r"""(?:printf|echo) (['"])(.*?)\1 > (\S+)""")
#: a token a block sends: HF_TOKEN=, a Bearer header, the status() helper of serve-access.md's scoped block
SENT = re.compile(r"""HF_TOKEN=([^\s'"]+)|Bearer ([^\s'"]+)|status ([^\s$'"]+) /|tokens=\(["']([^"']+)""")


def docs() -> list[str]:
    return sorted(p.name for p in DOCS_DIR.glob("*.md") if p.name != "benchmarks.md")


def token_files() -> list[tuple[str, str, list[str]]]:
    """(doc, file, its lines) of every token file a block writes and gives serve."""
    found = []
    for doc in docs():
        for block in FENCE.finditer(doc_text(doc)):
            code = block[2]
            for m in WRITTEN.finditer(code):
                if f"--token-file {m[3]}" in code:
                    found.append((doc, m[3], [x for x in m[2].split("\\n") if x]))
    return found


def test_every_token_file_of_the_docs_is_serves_and_holds_hf_tokens():
    files = token_files()
    assert len(files) >= 8, files
    for doc, name, lines in files:
        grants = parse_lines(lines, where=f"docs/{doc} {name}")  # serve's own reading of --token-file
        for grant in grants:
            assert grant.anonymous or grant.token.startswith("hf_"), (doc, name, grant.token)


def test_the_token_lines_serve_publish_md_shows_are_serves_and_hf_tokens():
    text = doc_text("serve-publish.md")
    shown = text[text.index("**Tokens.**"):text.index("\n## ", text.index("**Tokens.**"))]
    block = next(b[1] for b in re.finditer(r"^```\w*\n(.*?)^```", shown, re.S | re.M) if "user=" in b[1])
    lines = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    grants = parse_lines(lines)
    assert len(grants) == 4
    assert all(g.token.startswith("hf_") for g in grants if not g.anonymous), lines
    assert "must start with 'hf_'" in " ".join(shown.split())  # and the reason is given


def test_every_token_a_doc_sends_is_an_hf_token():
    sent = [(doc, next(g for g in m.groups() if g)) for doc in docs() for m in SENT.finditer(doc_text(doc))]
    tokens = [(doc, t) for doc, t in sent if t not in ("TOKEN", "TOKEN`") and not t.startswith("$")]
    assert len(tokens) >= 15, tokens
    assert [(doc, t) for doc, t in tokens if not t.startswith("hf_")] == []
