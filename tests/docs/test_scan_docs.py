"""docs/scanning.md runs as printed (tests/docrun.py: a reader's virtualenv with only what the doc
says to install, ./tiny, a real registry), and what its blocks print last is what the doc shows, less
what differs where it runs (the registry, digests, times, versions)."""

from __future__ import annotations

import re

from tests.docrun import doc_env, doc_text, reader_venvs, run_block, runnable_blocks

__all__ = ["doc_env", "reader_venvs"]  # the fixtures, used by name

DOC = "scanning.md"
TEXT = re.compile(r"^```text\n(.*?)^```", re.S | re.M)


def _normal(text: str, registry: str) -> list[str]:
    text = text.replace(registry, "localhost:5000/ml")
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:…", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", "TIME", text)
    text = re.sub(r"(ocibridge-scan|picklescan) [0-9][\w.]*", r"\1 VERSION", text)
    return text.strip().splitlines()


def test_the_scanning_doc_runs_and_prints_what_it_shows(doc_env):
    work, env = doc_env(DOC)
    printed = []
    for lang, code, line in runnable_blocks(DOC):
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, f"docs/{DOC}:{line} ({lang}) exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if proc.stdout.strip():
            printed.append(proc.stdout)
    shown = TEXT.findall(doc_text(DOC))
    assert len(printed) == len(shown) == 3
    for out, doc in zip(printed, shown, strict=True):  # each block's last lines are what the doc shows it prints
        want = _normal(doc, env["REGISTRY"])
        assert _normal(out, env["REGISTRY"])[-len(want):] == want
