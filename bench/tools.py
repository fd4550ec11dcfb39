"""Command lines of the tools being compared: ocibridge, oras-py, skopeo, and curl (the floor)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PY = sys.executable


def ocibridge(command: str, *args: str) -> list[str]:
    return [PY, "-m", "ocibridge", command, *args, "--json", "-q"]


def oras(command: str, target: str, *args: str) -> list[str]:
    return [PY, "-m", "bench.oras_cli", command, target, *args]


def skopeo_copy(src: str, dst: str) -> list[str]:
    """skopeo between ``oci:`` layouts and ``docker://`` loopback registries (plain HTTP)."""
    return ["skopeo", "--insecure-policy", "copy", "--quiet",
            "--src-tls-verify=false", "--dest-tls-verify=false", src, dst]


def registry_store_ready() -> bool:
    """Whether ocibridge can talk to registries yet (its registry store may still be missing)."""
    probe = [PY, "-c", "from ocibridge.stores.registry import open_repository"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def carton_ready() -> bool:
    probe = [PY, "-c", "from ocibridge.kinds.carton import read_carton"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def start_upload(url: str, repo: str) -> str:
    """POST an upload session (not timed: a few ms) and return its absolute Location."""
    out = subprocess.run(["curl", "-sS", "-f", "-D", "-", "-o", "/dev/null", "-X", "POST",
                          f"{url}/v2/{repo}/blobs/uploads/"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        if line.lower().startswith("location:"):
            location = line.split(":", 1)[1].strip()
            return location if location.startswith("http") else url + location
    raise RuntimeError(f"no Location in the upload answer:\n{out.stdout}")


def curl_put(uploads: Sequence[tuple[Path, str, str]], parallel: int = 1) -> list[str]:
    """One curl streaming each file with a known digest: the monolithic PUT, nothing else."""
    cmd = ["curl", "-sS", "-f", "-X", "PUT", "-H", "Expect:", "-H", "Content-Type: application/octet-stream",
           "-o", "/dev/null"]
    if parallel > 1:
        cmd += ["--parallel", "--parallel-max", str(parallel)]
    for path, location, digest in uploads:
        sep = "&" if "?" in location else "?"
        cmd += ["-T", str(path), f"{location}{sep}digest={digest}"]
    return cmd


def curl_get(url: str, repo: str, blobs: Sequence[tuple[str, Path]], parallel: int = 1) -> list[str]:
    """One curl fetching each blob to a file (following the redirect, unverified)."""
    cmd = ["curl", "-sS", "-f", "-L"]
    if parallel > 1:
        cmd += ["--parallel", "--parallel-max", str(parallel)]
    for digest, out in blobs:
        cmd += ["-o", str(out), f"{url}/v2/{repo}/blobs/{digest}"]
    return cmd


_SHA256 = """
import hashlib, sys
for name in sys.argv[1:]:
    h = hashlib.sha256()
    with open(name, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
"""


def sha256_files(paths: Sequence[Path]) -> list[str]:
    """hashlib's sha256 of every file, one after the other: the other half of the verified
    pull floor (issue 14: max of this and curl's unverified GET)."""
    return [sys.executable, "-c", _SHA256, *map(str, paths)]


def openssl_sha256(paths: Sequence[Path]) -> list[str]:
    """OpenSSL's own SHA-256 of every file: the hashing floor of a verified pull (issue 64;
    Debian's coreutils ``sha256sum`` is 3-6x slower here and is no floor)."""
    return ["openssl", "dgst", "-sha256", *map(str, paths)]
