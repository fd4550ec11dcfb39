"""A model card (README.md, untrusted) as HTML a page may hold: its YAML front matter apart,
read and checked as the Hub reads it (:mod:`..cards`: what the check says is shown above the
card, as the Hub's page shows it), the Markdown rendered by markdown-it-py (HTML comments left
out, as the Hub's page leaves them; any other tag written in the card comes out as text), then
sanitized by nh3 (Rust's ammonia) against an allow-list: no script, no event handler, no
``style``, no frame; links only http(s), mailto and the model's own files; images only https or
the model's own files (rewritten to its resolve route). The page's CSP forbids scripts besides,
should anything slip through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ocibridge.hubserver.cards import read_card

if TYPE_CHECKING:
    from markdown_it.token import Token

#: bytes of a README rendered (the Hub's own cards are far smaller)
CARD_MAX = 512 * 1024
#: the front matter fields the page shows first, as the Hub's model cards name them
FRONT_FIELDS = ("license", "base_model", "tags", "pipeline_tag", "library_name", "language", "datasets")
TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
        "i", "img", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead",
        "tr", "ul"}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "th": {"align"}, "td": {"align"}}
_HEADING = re.compile(r"<(/?)h([1-6])>")  # sanitized: a heading tag carries no attribute
#: one HTML comment, or several with only space between them
_COMMENT = re.compile(r"(?:<!--.*?-->\s*)+", re.S)


@dataclass(frozen=True)
class Card:
    front: tuple[tuple[str, str], ...]  # the front matter's fields, as text
    html: str  # sanitized: safe to put in a page as it is
    problems: tuple[str, ...] = ()  # what the Hub's check says of the metadata, as the Hub's page shows it

    @property
    def gate_terms(self) -> str:
        """The card's ``extra_gated_prompt``: what a gated repository asks its readers to accept
        (the artifact's card metadata keeps only the Hub's listing fields, so the page reads it here)."""
        return dict(self.front).get("extra_gated_prompt", "")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_text(v)}" for k, v in value.items())
    return "" if value is None else str(value)


def _markdown(body: str) -> str:
    """The card's Markdown as HTML: an HTML comment (``<!-- Provide a quick summary -->``, which
    transformers' card template is full of) is left out, as the Hub's page leaves it out; any
    other HTML the card writes comes out as text, as with raw HTML off. (markdown-it-py is
    loaded by the first card shown, not at serve's start: about 4 MiB of an API-only replica.)"""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = md.parse(body)
    for token in tokens:
        if token.type == "html_block":
            _as_text_or_dropped(token, block=True)
        for child in token.children or ():
            if child.type == "html_inline":
                _as_text_or_dropped(child, block=False)
    return str(md.renderer.render(tokens, md.options, {}))


def _as_text_or_dropped(token: Token, block: bool) -> None:
    if _COMMENT.fullmatch(token.content.strip()):
        token.content = ""
        return
    if block:  # shown as the paragraph of text it would be with raw HTML off
        from markdown_it.common.utils import escapeHtml

        token.type, token.tag, token.nesting = "html_block", "", 0
        token.content = f"<p>{escapeHtml(token.content.strip())}</p>\n"
    else:
        token.type = "text"


def render_card(data: bytes, repo_id: str, revision: str) -> Card:
    text = data[:CARD_MAX].decode("utf-8", "replace")
    read = read_card(text)
    front, body = read.front, read.body
    fields = [k for k in FRONT_FIELDS if k in front] + sorted(str(k) for k in front if k not in FRONT_FIELDS)
    shown = tuple((k, _text(front.get(k))) for k in fields if _text(front.get(k)))
    raw = _markdown(body)
    own = f"/{repo_id}/resolve/{quote(revision, safe='')}/"
    page = f"/{repo_id}/blob/{quote(revision, safe='')}/"

    def keep(element: str, attribute: str, value: str) -> str | None:
        if attribute not in ("href", "src"):
            return value
        parts = urlsplit(value)
        if parts.scheme or value.startswith("//"):
            if element == "img":
                return value if parts.scheme == "https" else None
            return value if parts.scheme in ("http", "https", "mailto") else None
        if value.startswith("#"):
            return value
        path = parts.path.lstrip("/")
        if not path or ".." in path.split("/"):
            return None
        return (own if element == "img" else page) + quote(path)

    import nh3  # loaded with the first card shown, as markdown-it-py

    html = nh3.clean(raw, tags=TAGS, attributes=ATTRIBUTES, attribute_filter=keep,
                     url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow",
                     clean_content_tags={"script", "style"})
    # the card's headings go under the page's own (one h1, then h2 sections): h1 becomes h3
    html = _HEADING.sub(lambda m: f"<{m.group(1)}h{min(int(m.group(2)) + 2, 6)}>", html)
    problems = tuple(f"YAML Metadata Error: {e}" for e in read.errors) + tuple(
        f"YAML Metadata Warning: {w}" for w in read.warnings)
    return Card(shown, html, problems)
