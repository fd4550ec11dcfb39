"""The registry-profile matrix at realistic size (issue 30): push, pull, copy, sign and verify of
a model over every profile of tests/support/profiles.py, with the limits at their real values
where they fit a loopback run (Cloudflare's 100 MB body cap, not a scaled one), and one large
push and pull across bearer tokens that die mid-transfer (Docker Hub / GHCR, scaled to seconds).

    .venv/bin/python -m bench.registry_profiles --size-mib 300 --token-mib 2048
    .venv/bin/python -m bench.registry_profiles --size-mib 300 --profiles gar cloudflare --token-mib 0

Everything runs in one process, as the test suite does: the client, the fault proxy (Python,
threaded) and a real docker-registry behind it; so the times are what the matrix would add to
the suite on this machine, proxy included. Bytes are counted on the proxy's log (what the
registry's side of the link saw): upload bodies the registry took (201/202) against the blob
sizes, bodies it refused, and blob bytes sent on pulls, so "re-sent per failure" is
(sent - needed) / refusals.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import ocibridge as api
from ocibridge import TransferOptions
from ocibridge.cli import main as cli
from tests.signing_keys import key_pair
from tests.support.faultproxy import FaultProxy, RecordedRequest
from tests.support.profiles import (
    BodyCap,
    MaxMonolithicPut,
    NoChunkedPatch,
    NoDigestOnHead,
    NoMount,
    Quirk,
    RangeEndExclusive,
    RateLimited,
    ReferrersApi,
    RelativeLocation,
    ShortTokens,
)
from tests.support.registry import RegistryProcess

MiB = 1024 * 1024
CLOUDFLARE_CAP = 100_000_000  # the real value (podman #24919)


def profiles(size: int, token_lifetime: float) -> dict[str, Callable[[], list[Quirk]]]:
    """The matrix's profiles. Quay's 20 GB single PUT cannot be reached on loopback: it is set at
    a third of the model, so the model must go in chunks there as a 60 GB file would on Quay."""
    return {
        "distribution": lambda: [],
        "gar": lambda: [NoChunkedPatch()],
        "cloudflare": lambda: [BodyCap(CLOUDFLARE_CAP)],
        "quay": lambda: [MaxMonolithicPut(size // 3)],
        "dockerhub": lambda: [ShortTokens(lifetime=token_lifetime), RateLimited(every=50)],
        "ghcr": lambda: [ShortTokens(lifetime=token_lifetime)],
        "ecr": lambda: [NoMount()],
        "harbor": lambda: [ReferrersApi(), RelativeLocation()],
        "no-head-digest": lambda: [NoDigestOnHead()],
        "range-end-exclusive": lambda: [RangeEndExclusive()],
    }


@dataclass
class Phase:
    """One operation over one profile, counted on the proxy's log."""

    profile: str
    phase: str
    seconds: float
    needed: int  # blob bytes the operation had to move
    sent: int  # blob bytes that crossed the proxy in accepted requests/answers
    refusals: int  # upload requests with a body refused (401, 413, 405, 429 ...), or 401s on pulls
    refused_bytes: int  # bytes of those refused bodies
    status_401: int
    status_429: int

    @property
    def resent_per_failure(self) -> float:
        extra = max(0, self.sent - self.needed) + self.refused_bytes
        return extra / self.refusals if self.refusals else float(extra)


def _upload_phase(proxy: FaultProxy, profile: str, phase: str, seconds: float, needed: int) -> Phase:
    bodies = [r for r in proxy.requests if r.method in ("PATCH", "PUT") and "/blobs/uploads/" in r.path]
    refused = [r for r in bodies if r.status not in (201, 202)]
    return Phase(profile, phase, seconds, needed,
                 sum(r.request_bytes for r in bodies if r.status in (201, 202)),
                 len(refused), sum(r.request_bytes for r in refused), *_codes(proxy.requests))


def _pull_phase(proxy: FaultProxy, profile: str, phase: str, seconds: float, needed: int) -> Phase:
    gets = [r for r in proxy.requests if r.method == "GET" and "/blobs/sha256:" in r.path]
    refused = [r for r in gets if r.status not in (200, 206, 307)]
    return Phase(profile, phase, seconds, needed,
                 sum(r.response_bytes for r in gets if r.status in (200, 206)),
                 len(refused), 0, *_codes(proxy.requests))


def _codes(requests: list[RecordedRequest]) -> tuple[int, int]:
    return sum(r.status == 401 for r in requests), sum(r.status == 429 for r in requests)


def _model(root: Path, size: int) -> tuple[int, str]:
    """A model of fresh random bytes (each profile its own, so nothing is mounted or skipped
    from an earlier profile): (blob bytes, sha256 of the weights)."""
    root.mkdir(parents=True)
    hasher = hashlib.sha256()
    with open(root / "weights.bin", "wb") as f:
        left = size
        while left:
            block = os.urandom(min(left, 4 * MiB))
            hasher.update(block)
            f.write(block)
            left -= len(block)
    (root / "config.json").write_bytes(b'{"model_type": "llama"}')
    return size + 23, hasher.hexdigest()


def _check(path: Path, digest: str) -> None:
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        while data := f.read(4 * MiB):
            hasher.update(data)
    if hasher.hexdigest() != digest:
        raise SystemExit(f"{path}: pulled bytes differ from what was pushed")


@contextlib.contextmanager
def _fresh_env(work: Path) -> Iterator[None]:
    """A settings file and a cache of their own: every profile starts as a first push."""
    saved = {k: os.environ.get(k) for k in ("OCIBRIDGE_REGISTRIES_CONF", "OCIBRIDGE_CACHE_DIR")}
    os.environ["OCIBRIDGE_REGISTRIES_CONF"] = str(work / "registries.toml")
    os.environ["OCIBRIDGE_CACHE_DIR"] = str(work / "cache")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _timed(proxy: FaultProxy, run: Callable[[], object]) -> float:
    proxy.clear()
    start = time.monotonic()
    run()
    return time.monotonic() - start


def run_profile(proxy: FaultProxy, name: str, quirks: list[Quirk], size: int, work: Path,
                sign: bool) -> list[Phase]:
    """push, pull, copy (and sign + verify + copy -r) of a fresh model over one profile."""
    proxy.quirks[:] = quirks
    opts = TransferOptions(plain_http=True)
    needed, digest = _model(work / "model", size)
    ref, copied = f"{proxy.host}/bench/{name}:v1", f"{proxy.host}/bench/{name}-copy:v1"
    out: list[Phase] = []
    with _fresh_env(work):
        pushed: list[api.PushResult] = []
        seconds = _timed(proxy, lambda: pushed.append(api.push(str(work / "model"), ref, transfer=opts)))
        out.append(_upload_phase(proxy, name, "push", seconds, needed))
        seconds = _timed(proxy, lambda: api.pull(ref, str(work / "out"), transfer=opts))
        _check(work / "out" / "weights.bin", digest)
        out.append(_pull_phase(proxy, name, "pull", seconds, needed))
        shutil.rmtree(work / "out")
        seconds = _timed(proxy, lambda: api.copy_reference(pushed[0].reference, copied, transfer=opts))
        out.append(_upload_phase(proxy, name, "copy", seconds, 0 if proxy.requests_matching(
            "POST", "mount=") and not any(isinstance(q, NoMount) for q in quirks) else needed))
        if sign:
            private, public = key_pair(work / "keys")
            seconds = _timed(proxy, lambda: _sign_verify(ref, copied + "-signed", private, public))
            out.append(_upload_phase(proxy, name, "sign+verify+copy -r", seconds, 0))
    return out


def _sign_verify(ref: str, copied: str, private: Path, public: Path) -> None:
    with contextlib.redirect_stdout(sys.stderr):
        for argv in (["sign", ref, "--key", str(private)],
                     ["verify", ref, "--key", str(public)],
                     ["copy", "-r", ref, copied, "--verify-key", str(public), "-q"],
                     ["verify", copied, "--key", str(public)]):
            if cli(argv) != 0:
                raise SystemExit(f"ocibridge {' '.join(argv[:2])} failed")


def token_case(proxy: FaultProxy, size: int, lifetime: float, work: Path) -> list[Phase]:
    """One large push and pull while tokens die every ``lifetime`` seconds (claiming 300)."""
    tokens = ShortTokens(lifetime=lifetime)
    proxy.quirks[:] = [tokens]
    needed, digest = _model(work / "model", size)
    ref = f"{proxy.host}/bench/tokens:v1"
    opts = TransferOptions(plain_http=True)
    with _fresh_env(work):
        seconds = _timed(proxy, lambda: api.push(str(work / "model"), ref, transfer=opts))
        push = _upload_phase(proxy, "tokens", f"push {size // MiB} MiB", seconds, needed)
        seconds = _timed(proxy, lambda: api.pull(ref, str(work / "out"), transfer=opts))
        _check(work / "out" / "weights.bin", digest)
        pull = _pull_phase(proxy, "tokens", f"pull {size // MiB} MiB", seconds, needed)
    return [push, pull]


def _table(phases: list[Phase]) -> str:
    lines = ["| profile | phase | time | blob bytes needed | sent (accepted) | refused requests | "
             "refused bytes | 401 | 429 | re-sent per failure |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in phases:
        lines.append(f"| {p.profile} | {p.phase} | {p.seconds:.1f} s | {p.needed / MiB:.1f} MiB | "
                     f"{p.sent / MiB:.1f} MiB | {p.refusals} | {p.refused_bytes / MiB:.1f} MiB | "
                     f"{p.status_401} | {p.status_429} | {p.resent_per_failure / MiB:.2f} MiB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.registry_profiles", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=300, help="the model's weights per profile (300)")
    p.add_argument("--profiles", nargs="*", help="profiles to run (default: all)")
    p.add_argument("--token-lifetime", type=float, default=3.0,
                   help="seconds a bearer token lives in the token profiles (3; they claim 300)")
    p.add_argument("--token-mib", type=int, default=2048, help="the token-expiry case's file (0: skip)")
    p.add_argument("--no-sign", action="store_true", help="skip sign/verify/copy -r")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = p.parse_args(argv)
    size = args.size_mib * MiB
    table = profiles(size, args.token_lifetime)
    names = args.profiles or list(table)
    unknown = sorted(set(names) - set(table))
    if unknown:
        p.error(f"unknown profile {unknown[0]!r} (known: {', '.join(table)})")
    phases: list[Phase] = []
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ocibridge-profiles-"))
        registry = stack.enter_context(RegistryProcess(Path(tmp) / "registry"))
        proxy = stack.enter_context(FaultProxy(registry.url, timeout=300))
        for name in names:
            phases += run_profile(proxy, name, table[name](), size, Path(tmp) / name, not args.no_sign)
            shutil.rmtree(Path(tmp) / name)
            print(_table([ph for ph in phases if ph.profile == name]), file=sys.stderr)
        matrix = sum(ph.seconds for ph in phases)
        if args.token_mib:
            phases += token_case(proxy, args.token_mib * MiB, args.token_lifetime, Path(tmp) / "tokens")
    print(_table(phases))
    print(f"\nmatrix ({len(names)} profiles, {args.size_mib} MiB): {matrix:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(ph), "resent_per_failure": ph.resent_per_failure}
                                               for ph in phases], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
