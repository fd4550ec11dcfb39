"""docs/lifetimes.md runs as printed (tests/docrun.py: a reader's virtualenv with only what the doc says
to install, a real registry): ``$REGISTRY`` is first filled as a proxy fills it (``serve --upstream
--upstream-keep``, the session's stand-in upstream, two models read through it), then each block runs
and what it prints last is what the doc shows, less what differs where it runs (the registry, ids,
digests, seconds, byte counts)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import httpx
import huggingface_hub
from serving import ROOT, serve_as_process

from tests.docrun import doc_env, doc_text, reader_venvs, run_block, runnable_blocks

__all__ = ["doc_env", "reader_venvs"]  # the fixtures, used by name

DOC = "lifetimes.md"
ACCEPT = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
TEXT = re.compile(r"^```text\n(.*?)^```", re.S | re.M)


def _normal(text: str, registry: str) -> list[str]:
    text = text.replace(registry, "localhost:5000/proxy")
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:…", text)
    text = re.sub(r"@[0-9a-f]{40}", "@COMMIT", text)
    text = re.sub(r"ocibridge-(upstream|commit)-[0-9a-f]{40}", r"ocibridge-\1-ID", text)
    text = re.sub(r"\b\d+ bytes", "N bytes", text)
    text = re.sub(r"read \d+[smhd] ago", "read a while ago", text)
    text = re.sub(r"unread for \d+[smhd];", "unread for a while;", text)
    return text.strip().splitlines()


def test_the_lifetimes_doc_runs_and_prints_what_it_shows(doc_env, proxied, tmp_path):
    work, env = doc_env(DOC)
    prefix = env["REGISTRY"]
    proxy_env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "proxy-cache"),
                 "HF_HUB_DISABLE_XET": "1"}
    flags = [prefix, "--plain-http", "--no-access-log", "--upstream", proxied.upstream,
             "--upstream-token-file", str(proxied.root / "up-token.txt"), "--upstream-keep", "30d"]
    with serve_as_process(flags, proxy_env, tmp_path / "proxy.log") as proxy:
        for repo in ("acme/tiny", "acme/other"):
            huggingface_hub.snapshot_download(repo, endpoint=proxy, cache_dir=tmp_path / "hub" / repo)
        host, _, path = prefix.partition("/")
        until = time.monotonic() + 60
        for repo in ("acme/tiny", "acme/other"):  # landed and main tagged: just after the files streamed
            while httpx.head(f"http://{host}/v2/{path}/{repo}/manifests/latest",
                             headers=ACCEPT).status_code != 200:
                assert time.monotonic() < until, f"{repo} never landed"
                time.sleep(0.1)
    # stopped: the reads it noted are in the registry now

    def tags_now() -> dict[str, str | None]:
        return {f"{repo}:{tag}": httpx.head(f"http://{host}/v2/{path}/{repo}/manifests/{tag}", headers=ACCEPT)
                .headers.get("docker-content-digest") for repo in ("acme/tiny", "acme/other")
                for tag in ("latest", "ocibridge-reads")}

    before = tags_now()
    assert None not in before.values(), before
    printed = []
    for lang, code, line in runnable_blocks(DOC):
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, f"docs/{DOC}:{line} ({lang}) exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if proc.stdout.strip():
            printed.append(proc.stdout)
    assert tags_now() == before  # a dry run: nothing dropped, not even the reads record written
    shown = TEXT.findall(doc_text(DOC))
    assert len(printed) == len(shown) == 2
    for out, doc in zip(printed, shown, strict=True):
        want = _normal(doc, prefix)
        assert sorted(_normal(out, prefix)[-len(want):]) == sorted(want), out


def test_the_doc_names_every_keep_flag():
    text = (Path(ROOT) / "docs" / DOC).read_text()
    for flag in ("--upstream-keep", "--upstream-keep-dry-run", "garbage-collect --delete-untagged", "upstream_drop"):
        assert flag in text
