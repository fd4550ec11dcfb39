"""Every fenced ``sh`` and ``python`` example of the docs runs as printed (issues 18 and 78), against
a layout, the default store and a real registry, as a reader runs it (tests/docrun.py): ``tiny`` is
a copy of examples/tiny-model, and the programs come from a virtualenv holding only what the doc's
text says to install. docs/cli.md lists exactly the program's commands. Add a doc to ``DOCS`` once
its examples can run here (``$REGISTRY``, ``./tiny``)."""

from __future__ import annotations

import re

import pytest

from ocibridge.cli.help import subcommands
from ocibridge.cli.parser import build_parser
from tests.docrun import (
    DOCS_DIR,
    RUNNERS,
    SERVE_PAGES,
    commented_commands,
    doc_env,
    doc_text,
    named_installs,
    reader_venvs,
    run_block,
    runnable_blocks,
)

__all__ = ["RUNNERS", "doc_env", "reader_venvs", "runnable_blocks"]

DOCS = ["tasks.md", "cli.md", "api.md", "registry.md", "kubernetes.md", "using.md", "airgap.md", "mount.md"]
#: docs whose ``sh`` examples run here; their ``python`` ones name registry.example, not $REGISTRY
SH_ONLY_DOCS = ["lazy.md", "formats/directory.md"]
#: every doc whose blocks a test runs as printed (these; serve's pages, mirroring.md, datasets.md, lifetimes.md,
#: quotas.md: their own tests)
RUN_DOCS = [*DOCS, *SH_ONLY_DOCS, *SERVE_PAGES, "mirroring.md", "scanning.md", "datasets.md", "lifetimes.md",
            "quotas.md"]


@pytest.mark.parametrize("doc", DOCS + SH_ONLY_DOCS)
def test_doc_examples_run(doc, doc_env):
    work, env = doc_env(doc)
    blocks = [b for b in runnable_blocks(doc) if doc not in SH_ONLY_DOCS or b[0] == "sh"]
    assert blocks, f"docs/{doc} has no runnable example"
    for lang, code, line in blocks:
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, (
            f"docs/{doc}:{line} ({lang}) exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


@pytest.mark.parametrize("doc", RUN_DOCS)
def test_no_command_of_a_block_hides_in_a_comment(doc):
    """Issue 78: tasks.md's serve block ended in ``# then: ... AutoConfig.from_pretrained("tiny")``,
    which the runner skipped as a comment and which fails for the reader. A command the reader is
    to run is a line of the block (run here), not a comment."""
    assert not commented_commands(doc)


@pytest.mark.parametrize("doc", RUN_DOCS)
def test_each_doc_that_runs_tiny_says_where_it_comes_from(doc):
    """The blocks use ``tiny``: the doc says it is a copy of examples/tiny-model, the files the
    runner copies (a test model with other files once hid steps that fail on the example)."""
    text = doc_text(doc)
    if any(re.search(r"(?<![\w/-])\.?/?tiny(?![\w-])", code) for _, code, _ in runnable_blocks(doc)):
        assert "cp -r examples/tiny-model tiny" in text or "examples/tiny-model" in text, doc


def test_named_installs_reads_the_forms_the_docs_use():
    extras, packages = named_installs(
        "`pip install 'ocibridge[serve]'`, from a clone `pip install -e '.[signing,k8s]'`; "
        "the client: `pip install huggingface_hub transformers`; `.venv/bin/pip install -q -e .`")
    assert extras == {"serve", "signing", "k8s"} and packages == {"huggingface-hub", "transformers"}


def test_cli_md_lists_every_command():
    text = (DOCS_DIR / "cli.md").read_text()
    start = text.index("| command | what |")
    table = text[start:text.index("\n\n", start)]
    first_cells = [row.split(" | ")[0] for row in table.splitlines()[2:] if row.startswith("| `")]
    documented = {word for cell in first_cells for word in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)*)", cell)}
    commands = {name.split()[0] for name in subcommands(build_parser())}
    aliases = {"cp", "ls"}
    assert documented - aliases == commands, (documented ^ commands)


def test_mount_md_mounts_a_commit_id_rather_than_saying_it_cannot():
    """Issue 78: mount.md said a bare 40-hex commit id is no reference mount (or pull) takes; both
    take it. The page now mounts one in a block (run by test_doc_examples_run[mount.md])."""
    text = doc_text("mount.md")
    assert "commit id is not a reference" not in text
    assert any('ocibridge mount "$REGISTRY@$id"' in code for lang, code, _ in runnable_blocks("mount.md"))
