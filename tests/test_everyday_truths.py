"""Small truths a new user met (issue 107, item 7): what the docs say to install, what the proxy
logs without --debug, the date of a repository pushed without one."""

from __future__ import annotations

import importlib.metadata as md
import re

from huggingface_hub import snapshot_download
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from upstream_proxy import Proxied

from tests.docrun import DOCS_DIR, PIP_INSTALL


def test_no_doc_says_to_install_what_every_install_has():
    """mirroring.md said YAML job files need ``pip install pyyaml``: PyYAML is a requirement of
    ocibridge itself, there after a plain ``pip install ocibridge``."""
    core = {canonicalize_name(Requirement(line).name) for line in md.requires("ocibridge") or []
            if Requirement(line).marker is None}
    assert "pyyaml" in core
    told = []
    for doc in sorted(DOCS_DIR.glob("*.md")):
        for m in PIP_INSTALL.finditer(doc.read_text()):
            words = [w.strip("'\"") for w in m[1].split()]
            told += [f"{doc.name}: {m[0]}" for w in words
                     if re.fullmatch(r"[A-Za-z][\w.-]*", w) and canonicalize_name(w) in core]
    assert told == []


def test_the_proxy_logs_no_http_request_lines_without_debug(proxied: Proxied, tmp_path):
    """httpx's INFO lines (``HTTP Request: GET …``) of the proxy's upstream requests are for
    ``--debug``; the proxy's log keeps its own lines."""
    snapshot_download("acme/tiny", endpoint=proxied.proxy, token="client-token", cache_dir=tmp_path / "hf")
    log = (proxied.root / "proxy" / "serve.log").read_text()
    assert "ocibridge: " in log
    assert [line for line in log.splitlines() if "HTTP Request:" in line] == []
