"""docs/serve.md's examples, run as written against a real registry (the listen port replaced by
a free one, so runs on one machine do not meet)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from serving import make_model
from test_doc_examples import runnable_blocks

ROOT = Path(__file__).resolve().parent.parent


def test_serve_md_examples_run(tmp_path, registry, unique_repo):
    work = tmp_path / "work"
    make_model(work / "tiny")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, argv in (("ocibridge", f'"{sys.executable}" -m ocibridge'), ("python", f'"{sys.executable}"'),
                       ("hf", f'"{sys.executable}" -m huggingface_hub.cli.hf')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    with socket.socket() as s, socket.socket() as t:  # :8080 and :8081, as the examples name them
        s.bind(("127.0.0.1", 0))
        t.bind(("127.0.0.1", 0))
        port, second = s.getsockname()[1], t.getsockname()[1]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "REGISTRY": f"{registry.host}/{unique_repo}", "OCIBRIDGE_STORE": str(tmp_path / "store"),
           "OCIBRIDGE_CACHE_DIR": str(tmp_path / "cache"), "DOCKER_CONFIG": str(tmp_path / "docker")}
    blocks = runnable_blocks("serve.md")
    assert blocks
    for lang, code, line in blocks:
        assert lang == "sh"
        code = code.replace(":8080", f":{port}").replace(":8081", f":{second}")
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code],
                              cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"docs/serve.md:{line} exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        if "snapshot_download" in code:
            assert str(work / "hf-cache" / "models--acme--tiny" / "snapshots") in proc.stdout
