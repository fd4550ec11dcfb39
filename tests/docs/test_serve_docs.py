"""The examples of serve's pages (docs/serve.md's index), run as printed against a real registry, as a reader runs them
(tests/docrun.py: ``tiny`` is a copy of examples/tiny-model, the programs come from a virtualenv
holding what the page says to install); the listen ports are replaced by free ones, so runs on
one machine do not meet."""

from __future__ import annotations

import re
import shutil
import socket

import httpx
import pytest
from serving import serving

import ocibridge
from tests.docrun import (  # noqa: F401
    DOCS_DIR,
    EXAMPLE_MODEL,
    SERVE_PAGES,
    doc_env,
    doc_text,
    reader_venv,
    reader_venvs,
    run_block,
    runnable_blocks,
)


def test_every_serve_page_with_examples_is_run_here():
    """A page of serve's whose blocks no test runs would drift from what serve does."""
    with_blocks = {p.name for p in DOCS_DIR.glob("serve*.md") if runnable_blocks(p.name)}
    assert with_blocks == set(SERVE_PAGES), with_blocks ^ set(SERVE_PAGES)


@pytest.mark.timeout(600)  # every block of every page, one shell's day
def test_serve_pages_examples_run(doc_env, reader_venvs):  # noqa: F811
    work, env = doc_env(SERVE_PAGES[0])
    with socket.socket() as s, socket.socket() as t:  # :8080 and :8081, as the examples name them
        s.bind(("127.0.0.1", 0))
        t.bind(("127.0.0.1", 0))
        port, second = s.getsockname()[1], t.getsockname()[1]
    env["OCIBRIDGE_CACHE_DIR"] = str(work.parent / "cache")
    blocks = [(page, *block) for page in SERVE_PAGES for block in runnable_blocks(page)]
    assert blocks
    for page, lang, code, line in blocks:
        assert lang == "sh"
        venv = str(reader_venv(reader_venvs, page))  # what this page says to install
        env["PATH"] = env["PATH"].replace(env["VIRTUAL_ENV"], venv, 1)
        env["VIRTUAL_ENV"] = venv
        code = code.replace(":8080", f":{port}").replace(":8081", f":{second}")
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, f"docs/{page}:{line} exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if "snapshot_download" in code:  # (the proxy's block keeps a Hub cache of its own)
            cache = "hf-proxy-cache" if "hf-proxy-cache" in code else "hf-cache"
            assert str(work / cache / "models--acme--tiny" / "snapshots") in proc.stdout, proc.stdout


#: the words of serve's limits (serve-reference.md) for the Hub's metadata, and the model_info key each names
METADATA_WORDS = {"downloads": "downloads", "likes": "likes", "card data": "cardData"}


def test_what_the_limits_call_empty_is_empty(tmp_path, registry, unique_repo):
    """Issue 78: the limits said card data is empty, and model_info returns it. Each field the
    sentence lists as empty is empty for a model whose card fills every field serve keeps."""
    limits = doc_text("serve-reference.md").split("\n## Limits\n", 1)[1]
    sentence = re.search(r"Hub metadata that OCI has no place for \(([^)]*)\) is empty", limits)
    assert sentence, "serve-reference.md's limits say no more which Hub metadata is empty"
    listed = [w.strip() for w in sentence[1].replace(" and ", ", ").split(",")]
    assert set(listed) <= set(METADATA_WORDS), listed
    model = tmp_path / "carded"
    shutil.copytree(EXAMPLE_MODEL, model)
    (model / "README.md").write_text("---\nlicense: mit\ntags: [tiny]\npipeline_tag: text-generation\n---\n# x\n")
    ocibridge.push(str(model), f"{registry.host}/{unique_repo}/acme/carded:latest")
    with serving([f"{registry.host}/{unique_repo}"]) as served:
        info = httpx.get(f"{served.url}/api/models/acme/carded").json()
    assert info["cardData"] == {"license": "mit", "tags": ["tiny"], "pipeline_tag": "text-generation"}
    for word in listed:
        assert not info.get(METADATA_WORDS[word]), (word, info.get(METADATA_WORDS[word]))
