"""The docs' blocks that start ``ocibridge serve`` and wait for its ``/healthz``, run as printed
with a serve that cannot start: each ends with serve's error instead of waiting forever (a bare
``until curl …/healthz`` loop spun until killed). The runs' timeout only stops a hung block."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.docrun import (  # noqa: F401  (fixture)
    SERVE_PAGES,
    kept_distributions,
    reader_env,
    reader_venvs,
    run_block,
    runnable_blocks,
    venv_holding,
)

#: serve's pages that start it (serve-kubernetes*.md's blocks print manifests), tasks.md, mirroring.md, datasets.md
DOCS = (*(page for page in SERVE_PAGES if not page.startswith("serve-kubernetes")), "tasks.md", "mirroring.md",
        "datasets.md")
EXTRA_LINE = ("ocibridge: error: ocibridge serve needs Starlette, uvicorn and its page renderers: "
              "pip install 'ocibridge[serve]'")
#: what stops a block that waits forever; the blocks' own bound is a minute
HUNG = 240


def starting_blocks(doc: str) -> list[tuple[str, int]]:
    return [(code, line) for lang, code, line in runnable_blocks(doc) if lang == "sh" and "/healthz" in code]


def test_every_doc_that_starts_serve_is_checked_here():
    """A doc whose blocks start serve and wait for it is in DOCS."""
    from tests.docrun import DOCS_DIR

    waiting = {p.name for p in DOCS_DIR.glob("*.md") if p.name != "benchmarks.md"
               and any(lang == "sh" and "/healthz" in code and "ocibridge serve" in code
                       for lang, code, _ in runnable_blocks(p.name))}
    assert waiting == set(DOCS), waiting
    assert all(starting_blocks(doc) for doc in DOCS)


@pytest.mark.parametrize(("doc", "code", "line"), [pytest.param(doc, code, line, id=f"{doc}:{line}")
                                                  for doc in DOCS for code, line in starting_blocks(doc)])
def test_a_block_whose_serve_cannot_start_ends_with_its_error(tmp_path, registry, unique_repo, reader_venvs,  # noqa: F811
                                                              doc, code, line):
    """The reader has everything the doc names but the server stack (Starlette, uvicorn): serve
    says which extra and exits, and the block ends there, non-zero, with that line."""
    work, env = reader_env(tmp_path, reader_venvs, doc, f"{registry.host}/{unique_repo}")
    without = venv_holding(reader_venvs, kept_distributions(doc) - {"starlette", "uvicorn"})
    env["PATH"] = env["PATH"].replace(env["VIRTUAL_ENV"], str(without), 1)
    env["VIRTUAL_ENV"] = str(without)
    with socket.socket() as s, socket.socket() as t:
        s.bind(("127.0.0.1", 0))
        t.bind(("127.0.0.1", 0))
        port, second = s.getsockname()[1], t.getsockname()[1]
    for fixed, free in ((":8080", port), (":8081", second), (":8090", port), (":8091", second)):
        code = code.replace(fixed, f":{free}")
    try:
        proc = run_block("sh", code, work, env, timeout=HUNG)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"docs/{doc}:{line}: still waiting for serve after {HUNG} s") from e
    assert proc.returncode != 0, f"docs/{doc}:{line}\n{proc.stdout}\n{proc.stderr}"
    # (two serves started at once may write their lines into each other: the text, not the line)
    assert EXTRA_LINE in proc.stderr, f"docs/{doc}:{line}\n{proc.stderr}"


def test_serve_pages_first_block_with_its_port_taken_ends_with_serves_error(tmp_path, registry, unique_repo,
                                                                        reader_venvs):  # noqa: F811
    """Port 8080 held by another program (bound here, never answering): serve says so and exits;
    the block ends with that line."""
    first = SERVE_PAGES[0]
    work, env = reader_env(tmp_path, reader_venvs, first, f"{registry.host}/{unique_repo}")
    code, line = starting_blocks(first)[0]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        try:
            proc = run_block("sh", code.replace(":8080", f":{port}"), work, env, timeout=HUNG)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"docs/{first}:{line}: still waiting for serve after {HUNG} s") from e
    assert proc.returncode != 0
    said = [x for x in proc.stderr.splitlines() if x.startswith("ocibridge: error: ")]
    assert said and said[0].startswith(f"ocibridge: error: --listen 127.0.0.1:{port}: "), proc.stderr
