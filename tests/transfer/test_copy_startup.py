"""A copy within one registry loads only what it uses: no signature verifier (cryptography)
without ``--verify-key``, no body decoders (the carton package) for plain answers, no httpx
command-line tool (rich, click, pygments), no download code for blobs it mounts. Its start-up
is most of its time (issue 14: copy within a registry against skopeo, measured by
bench/run.py)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.registry import open_repository

REPO_ROOT = Path(__file__).resolve().parents[2]
UNUSED = ("cryptography", "rich", "click", "pygments", "ocibridge.kinds.carton", "ocibridge.core.httpencodings",
          "ocibridge.signing.verify", "subprocess",
          # the download machinery: every blob is mounted, none downloaded
          "ocibridge.stores.partial", "ocibridge.stores.inorder_hash", "ocibridge.stores.part_governor")
PROBE = """
import sys
from ocibridge.core.httpx_defer import defer_httpx_extras
defer_httpx_extras(for_command=True)  # as the console entry point (cli.run) does first
from ocibridge.cli import main
try:
    main({args!r})
except SystemExit as e:
    assert not e.code, e.code
print("LOADED:" + ",".join(m for m in {unused!r} if m in sys.modules), file=sys.stderr)
"""


def _artifact(registry, repo: str) -> None:
    layer, config = b"weights" * 1000, b"{}"
    layer_desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, config)
    data = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=[layer_desc]).to_json_bytes()
    with open_repository(host=registry.host, repository=repo) as store:
        store.push_blob(layer_desc, io.BytesIO(layer))
        store.push_blob(config_desc, io.BytesIO(config))
        store.push_manifest(Descriptor.for_bytes(OCI_MANIFEST, data), data, "v1")


def test_copy_within_a_registry_loads_no_unused_package(registry, unique_repo):
    _artifact(registry, unique_repo)
    args = ["copy", "-q", f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-copy:v1"]
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args, unused=UNUSED)],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "LOADED:\n" in done.stderr, done.stderr  # none of them
    with open_repository(host=registry.host, repository=f"{unique_repo}-copy") as copied:
        assert copied.resolve("v1").mediaType == OCI_MANIFEST


def test_httpx_cli_still_loads_after_the_deferral():
    """Only httpx's own first import of its CLI module is refused: a later import loads the
    real module (no failed or stand-in module was left in ``sys.modules``)."""
    probe = ("from ocibridge.core.httpx_defer import defer_httpx_extras\ndefer_httpx_extras(for_command=True)\n"
             "import ocibridge.stores.registry, httpx, sys\n"
             "assert 'rich' not in sys.modules\n"
             "import httpx._main\n"
             "try:\n    httpx._main.main(['--help'])\nexcept SystemExit:\n    pass\n"
             "assert 'rich' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout or "usage" in done.stdout.lower(), done.stdout


def test_trio_is_left_out_of_the_command_and_of_no_program_importing_ocibridge():
    """httpcore imports trio whenever it is installed (selenium, in the test extras, brings it:
    ~90 ms, and subprocess through ctypes); the command refuses it (it never runs under trio),
    a program that imports ocibridge gets it as before."""
    import importlib.util

    assert importlib.util.find_spec("trio") is not None  # installed: else this proves nothing
    command = ("from ocibridge.core.httpx_defer import defer_httpx_extras\ndefer_httpx_extras(for_command=True)\n"
               "import httpx, httpcore, sys\n"
               "assert 'trio' not in sys.modules\n")
    program = "import ocibridge.stores.registry, httpx, httpcore, sys\nassert 'trio' in sys.modules\n"
    for probe in (command, program):
        done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_plain_http_copy_makes_no_ssl_context(registry, unique_repo):
    """A plain-HTTP (loopback) registry is reached without building any SSL context: httpx
    makes one even for ``verify=False``, OpenSSL's first costing ~2.5 ms of the start."""
    _artifact(registry, unique_repo)
    args = ["copy", "-q", f"{registry.host}/{unique_repo}:v1", f"{registry.host}/{unique_repo}-plain:v1"]
    probe = ("import ssl, sys\n"
             "made = []\n"
             "new = ssl.SSLContext.__new__\n"
             "def counting(cls, *a, **k):\n    made.append(cls)\n    return new(cls, *a, **k)\n"
             "ssl.SSLContext.__new__ = counting\n"
             "from ocibridge.cli import main\n"
             f"assert main({args!r}) == 0\n"
             "print('CONTEXTS:%d' % len(made), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "CONTEXTS:0" in done.stderr, done.stderr
