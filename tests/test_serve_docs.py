"""docs/serve.md's examples, run as printed against a real registry, as a reader runs them
(tests/docrun.py: ``tiny`` is a copy of examples/tiny-model, the programs come from a virtualenv
holding what the page says to install); the listen ports are replaced by free ones, so runs on
one machine do not meet."""

from __future__ import annotations

import socket

from tests.docrun import doc_env, reader_venvs, run_block, runnable_blocks  # noqa: F401  (fixtures)


def test_serve_md_examples_run(doc_env):  # noqa: F811
    work, env = doc_env("serve.md")
    with socket.socket() as s, socket.socket() as t:  # :8080 and :8081, as the examples name them
        s.bind(("127.0.0.1", 0))
        t.bind(("127.0.0.1", 0))
        port, second = s.getsockname()[1], t.getsockname()[1]
    env["OCIBRIDGE_CACHE_DIR"] = str(work.parent / "cache")
    blocks = runnable_blocks("serve.md")
    assert blocks
    for lang, code, line in blocks:
        assert lang == "sh"
        code = code.replace(":8080", f":{port}").replace(":8081", f":{second}")
        proc = run_block(lang, code, work, env)
        assert proc.returncode == 0, f"docs/serve.md:{line} exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if "snapshot_download" in code:
            assert str(work / "hf-cache" / "models--acme--tiny" / "snapshots") in proc.stdout
