"""push / pull / copy of a small model over every registry-behaviour profile (tests/support/
profiles.py): the real registry behind the fault proxy, one documented quirk in front.

Each test checks the bytes that come back, and counts through the proxy that nothing was sent
more than once per refusal: the blob bytes the registry took add up to the blobs' sizes, and
the bytes of refused requests to at most one body per refusal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import pytest
from support.faultproxy import FaultProxy
from support.profiles import (
    BodyCap,
    MaxMonolithicPut,
    NoChunkedPatch,
    NoDigestOnHead,
    NoMount,
    RangeEndExclusive,
    RateLimited,
    ReferrersApi,
    RejectManifests,
    RelativeLocation,
    ShortTokens,
)

import ocibridge as api
from ocibridge import TransferOptions
from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.stores.registry import hostsettings as hosts
from ocibridge.stores.registry import upload as upload_module

KiB = 1024
MiB = 1024 * KiB
SIZE = 3 * MiB  # the model's weights: over every scaled-down limit below
CAP = 1 * MiB  # Cloudflare's 100 MB, scaled
MAX_PUT = 512 * KiB  # Quay's 20 GB single PUT, scaled

PROFILES = {
    "distribution": lambda: [],
    "gar": lambda: [NoChunkedPatch()],
    "cloudflare": lambda: [BodyCap(CAP)],
    "quay": lambda: [MaxMonolithicPut(MAX_PUT)],
    "ecr": lambda: [NoMount()],
    "harbor": lambda: [ReferrersApi(), RelativeLocation()],
    "no-head-digest": lambda: [NoDigestOnHead()],
    "dockerhub-ratelimit": lambda: [RateLimited(every=6)],
    "range-end-exclusive": lambda: [RangeEndExclusive()],
}


@pytest.fixture(autouse=True)
def _large_is_small(monkeypatch):
    """The weights count as a large blob (chunked, resumable), as 64 MiB and more do."""
    monkeypatch.setattr(upload_module, "RESUMABLE_MIN", 1 * MiB)


def _model(root: Path) -> dict[str, bytes]:
    root.mkdir()
    files = {"weights.bin": os.urandom(SIZE), "config.json": b'{"model_type": "llama"}'}
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


def _opts(**kw: object) -> TransferOptions:
    return TransferOptions(plain_http=True, concurrency=2, **kw)  # type: ignore[arg-type]


def _pulled(proxy: FaultProxy, ref: str, dest: Path, files: dict[str, bytes]) -> None:
    api.pull(ref, str(dest), transfer=_opts())
    for name, data in files.items():
        got = (dest / name).read_bytes()
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), name


def _taken_upload_bytes(proxy: FaultProxy) -> int:
    return sum(r.request_bytes for r in proxy.requests
               if "/blobs/uploads/" in r.path and r.status in (201, 202))


def _refused_upload_bytes(proxy: FaultProxy) -> tuple[int, int]:
    refused = [r for r in proxy.requests
               if "/blobs/uploads/" in r.path and r.status not in (201, 202, 204, None)]
    return len(refused), sum(r.request_bytes for r in refused)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_push_pull_copy_over_profile(name, fault_proxy, unique_repo, tmp_path):
    quirks = PROFILES[name]()
    fault_proxy.quirks[:] = quirks
    files = _model(tmp_path / "model")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    pushed = api.push(str(tmp_path / "model"), ref, transfer=_opts())
    blob_bytes = sum(len(d) for d in files.values())

    taken = _taken_upload_bytes(fault_proxy)
    assert blob_bytes <= taken < blob_bytes + 64 * KiB  # + the config and manifest-ish blobs
    count, refused = _refused_upload_bytes(fault_proxy)
    assert refused <= count * SIZE  # at most one body per refusal

    _pulled(fault_proxy, ref, tmp_path / "out", files)

    fault_proxy.clear()
    copied = f"{fault_proxy.host}/{unique_repo}-copy:v1"
    api.copy_reference(pushed.reference, copied, transfer=_opts())
    assert _taken_upload_bytes(fault_proxy) < blob_bytes + 64 * KiB  # once, or mounted
    _pulled(fault_proxy, copied, tmp_path / "out2", files)


def test_gar_push_goes_monolithic_and_remembers(fault_proxy, unique_repo, tmp_path, caplog):
    """No PATCH accepted: the upload is one PUT, and the host is remembered as monolithic
    (in the settings file, and said in the --debug log)."""
    caplog.set_level(logging.INFO, logger="ocibridge.http")
    fault_proxy.quirks[:] = [NoChunkedPatch()]
    files = _model(tmp_path / "model")
    api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    patches = fault_proxy.requests_matching("PATCH", "/blobs/uploads/")
    assert len(patches) <= 1  # at most the first try, refused before its body is stored
    settings = hosts.host_settings(fault_proxy.host)
    assert settings.upload == "monolithic"
    assert any("refuses chunked (PATCH) uploads" in r.getMessage() for r in caplog.records)
    fault_proxy.clear()
    (tmp_path / "model" / "weights.bin").write_bytes(os.urandom(SIZE))
    api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v2", transfer=_opts())
    assert not fault_proxy.requests_matching("PATCH", "/blobs/uploads/")  # learnt: no retry
    _pulled(fault_proxy, f"{fault_proxy.host}/{unique_repo}:v2", tmp_path / "o", {
        "weights.bin": (tmp_path / "model" / "weights.bin").read_bytes(), "config.json": files["config.json"]})


def test_body_cap_chunks_under_the_cap_and_remembers(fault_proxy, unique_repo, tmp_path):
    fault_proxy.quirks[:] = [BodyCap(CAP)]
    files = _model(tmp_path / "model")
    api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    taken = [r for r in fault_proxy.requests if r.status in (201, 202) and "/blobs/uploads/" in r.path]
    assert all(r.request_bytes <= CAP for r in taken)
    body_bytes, refusals, refused_bytes = _upload_bodies(fault_proxy)
    assert SIZE <= body_bytes < SIZE + 64 * KiB  # every byte the registry took, once
    assert refusals >= 1 and refused_bytes <= refusals * SIZE  # at most one body per 413
    settings = hosts.host_settings(fault_proxy.host)
    assert settings.max_body is not None and settings.max_body <= CAP
    _pulled(fault_proxy, f"{fault_proxy.host}/{unique_repo}:v1", tmp_path / "out", files)


def test_token_expiry_mid_upload_and_download(fault_proxy, unique_repo, tmp_path):
    """Tokens that die after 1 s while claiming 300: a chunked upload paced over several
    seconds gets 401 mid-way, refreshes, and goes on from the registry's offset; a pull
    resumed after the expiry refreshes too. No blob restarts."""
    from support.faultproxy import throttle

    tokens = ShortTokens(lifetime=1.0)
    fault_proxy.quirks[:] = [tokens]
    fault_proxy.add("PATCH", "/blobs/uploads/", throttle(2 * MiB), times=None)
    files = _model(tmp_path / "model")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    api.push(str(tmp_path / "model"), ref, transfer=_opts(chunk_size=512 * KiB))
    expired = [r for r in fault_proxy.requests if r.method == "PATCH" and r.status == 401]
    assert expired  # the lifetime really ran out between chunks of the weights
    body_bytes, count, refused = _upload_bodies(fault_proxy)
    assert SIZE <= body_bytes < sum(len(d) for d in files.values()) + 64 * KiB  # each byte taken once
    assert refused <= count * 512 * KiB  # a refused chunk at most, per 401
    assert {r.status for r in fault_proxy.requests if r.method in ("PATCH", "PUT") and "/blobs/uploads/" in r.path
            and r.status not in (201, 202)} == {401}  # the only refusals: expired tokens
    assert not [r for r in fault_proxy.requests if r.method == "DELETE"]  # no blob restarted

    fault_proxy.clear()
    fault_proxy.add("GET", "/blobs/sha256:", throttle(512 * KiB), times=None)  # 3 rounds of 2 parts, 1 s each
    api.pull(ref, str(tmp_path / "out"), transfer=_opts(part_size=512 * KiB, parts_in_flight=2))
    assert (tmp_path / "out" / "weights.bin").read_bytes() == files["weights.bin"]
    weights = hashlib.sha256(files["weights.bin"]).hexdigest()
    parts = fault_proxy.requests_matching("GET", f"/blobs/sha256:{weights}")
    assert any(r.status == 401 for r in parts)  # a part asked after the expiry: renewed
    assert sum(r.response_bytes for r in parts if r.status in (200, 206)) == SIZE  # none twice


def test_referrers_through_the_api_when_the_registry_has_it(fault_proxy, unique_repo, tmp_path):
    from ocibridge.oci.mediatypes import OCI_MANIFEST
    from ocibridge.oci.models import Descriptor, Manifest
    from ocibridge.stores.registry import open_repository

    api_quirk = ReferrersApi()
    fault_proxy.quirks[:] = [api_quirk]
    _model(tmp_path / "model")
    pushed = api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    subject = pushed.descriptor
    empty = Descriptor.for_bytes("application/vnd.oci.empty.v1+json", b"{}")
    sig = Manifest(config=empty, layers=[empty], subject=subject,
                   artifactType="application/vnd.example.sig").to_json_bytes()
    sig_desc = Descriptor.for_bytes(OCI_MANIFEST, sig)
    with open_repository(host=fault_proxy.host, repository=unique_repo, plain_http=True) as store:
        store.push_blob(empty, __import__("io").BytesIO(b"{}"))
        store.push_manifest(sig_desc, sig)
        found = store.referrers(subject)
    assert [d.digest for d in found] == [sig_desc.digest]
    assert api_quirk.client_tag_writes == 0  # the registry kept the index: no tag written
    assert fault_proxy.requests_matching("GET", "/referrers/")


def test_manifest_rejected_for_artifact_type_is_one_line(fault_proxy, unique_repo, tmp_path):
    fault_proxy.quirks[:] = [RejectManifests(artifact_type=True)]
    _model(tmp_path / "model")
    with pytest.raises(RegistryError) as e:
        api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    text = str(e.value)
    assert "\n" not in text and "artifactType" in text and "OCI 1.1" in text


def test_unknown_config_rejected_is_one_line(fault_proxy, unique_repo, tmp_path):
    fault_proxy.quirks[:] = [RejectManifests(artifact_type=False, unknown_config=True)]
    _model(tmp_path / "model")
    with pytest.raises(OcibridgeError) as e:
        api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    text = str(e.value)
    assert "\n" not in text and "config media type" in text


def test_ecr_mount_falls_back_to_upload_once(fault_proxy, unique_repo, tmp_path):
    fault_proxy.quirks[:] = [NoMount()]
    files = _model(tmp_path / "model")
    pushed = api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    fault_proxy.clear()
    api.copy_reference(pushed.reference, f"{fault_proxy.host}/{unique_repo}-b:v1", transfer=_opts())
    posts = fault_proxy.requests_matching("POST", "/blobs/uploads/")
    assert len(posts) <= 3  # config + two files: one session each, the mount's 202 reused
    assert _taken_upload_bytes(fault_proxy) >= SIZE
    _pulled(fault_proxy, f"{fault_proxy.host}/{unique_repo}-b:v1", tmp_path / "out", files)


def test_check_registry_reports_support(fault_proxy, unique_repo, capsys):
    from ocibridge.cli import main

    fault_proxy.quirks[:] = [NoChunkedPatch(), ReferrersApi()]
    code = main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["chunkedUploads"] is False
    assert report["monolithicUploads"] is True
    assert report["referrersApi"] is True
    assert report["mount"] is True
    assert report["oci11Artifacts"] is True


@pytest.mark.parametrize("quirk", ["gar", "cloudflare"])
def test_streamed_ingest_of_unknown_digest_adapts(quirk, fault_proxy, unique_repo, tmp_path):
    """A file whose digest is learnt while sending (one streamed PATCH) on a registry that
    takes no PATCH, or behind a body cap: hashed first, then sent as the registry takes it."""
    import io

    from ocibridge.stores.registry import open_repository

    fault_proxy.quirks[:] = [NoChunkedPatch()] if quirk == "gar" else [BodyCap(CAP)]
    data = os.urandom(SIZE)
    with open_repository(host=fault_proxy.host, repository=unique_repo, plain_http=True) as store:
        digest, size = store.ingest_blob(io.BytesIO(data))
    assert (digest, size) == ("sha256:" + hashlib.sha256(data).hexdigest(), SIZE)
    count, refused = _refused_upload_bytes(fault_proxy)
    assert count <= 2 and refused <= count * SIZE
    assert _taken_upload_bytes(fault_proxy) == SIZE
    got = fault_proxy.upstream("GET", f"/v2/{unique_repo}/blobs/{digest}")[2]
    assert got == data


def test_check_registry_on_plain_distribution_and_an_old_registry(fault_proxy, unique_repo, capsys):
    """distribution 2.8 as it is: chunks yes, referrers API no; behind a pre-1.1 validator:
    artifact manifests no. Nothing is learnt as a limit."""
    from ocibridge.cli import main

    assert main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert (plain["chunkedUploads"], plain["referrersApi"], plain["oci11Artifacts"]) == (True, False, True)
    assert plain["maxBody"] is None and hosts.host_settings(fault_proxy.host).upload is None
    fault_proxy.quirks[:] = [RejectManifests(artifact_type=True)]
    assert main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["oci11Artifacts"] is False


def test_check_registry_refuses_a_reference_in_one_line(capsys):
    from ocibridge.cli import main

    assert main(["check-registry", "registry.example/team/x@sha256:00"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HOST/REPO" in err


def test_a_blob_that_cannot_fit_is_one_line_naming_the_limits(fault_proxy, unique_repo, tmp_path):
    """No chunks and a body cap under the blob's size: nothing can bring it there."""
    fault_proxy.quirks[:] = [NoChunkedPatch(), BodyCap(CAP)]
    _model(tmp_path / "model")
    with pytest.raises(RegistryError) as e:
        api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    text = str(e.value)
    assert "\n" not in text and "takes no chunked uploads" in text and "refuses request bodies over" in text
    count, refused = _refused_upload_bytes(fault_proxy)
    assert refused <= count * SIZE


def test_a_spent_pull_quota_is_one_line_without_retries(fault_proxy, unique_repo, tmp_path):
    """429 with RateLimit-Remaining: 0 and no Retry-After (Docker Hub's pull limit): no
    retry can help within the hours of the window, so one line names the limit at once."""
    _model(tmp_path / "model")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    api.push(str(tmp_path / "model"), ref, transfer=_opts())
    fault_proxy.clear()
    fault_proxy.quirks[:] = [RateLimited(every=1000, quota=0)]
    with pytest.raises(RegistryError) as e:
        api.pull(ref, str(tmp_path / "out"), transfer=_opts())
    text = str(e.value)
    assert "\n" not in text and "RateLimit-Limit 100;w=21600" in text
    assert len([r for r in fault_proxy.requests if r.status == 429]) == 1


@pytest.mark.parametrize("entry", ['upload = "sometimes"', "max_body = 0", 'max_body = "8M"',
                                   'range_end = "open"'])
def test_bad_learnt_settings_are_one_line(entry, tmp_path, monkeypatch):
    conf = tmp_path / "bad.toml"
    conf.write_text(f'[registry."r.example"]\n{entry}\n')
    monkeypatch.setenv(hosts.ENV_FILE, str(conf))
    with pytest.raises(OcibridgeError) as e:
        hosts.host_settings("r.example")
    assert "\n" not in str(e.value) and "registry.'r.example'" in str(e.value)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_mirror_job_into_a_profile(name, registry, fault_proxy, unique_repo, tmp_path):
    """A mirror job (the copy under every mirror run) into a registry of every profile."""
    from ocibridge.mirror import load_job, run_job

    files = _model(tmp_path / "model")
    api.push(str(tmp_path / "model"), f"{registry.host}/{unique_repo}:v1", transfer=_opts())
    fault_proxy.quirks[:] = PROFILES[name]()
    job_file = tmp_path / "job.yaml"
    job_file.write_text(f"sync:\n  - source: {registry.host}/{unique_repo}\n"
                        f"    target: {fault_proxy.host}/{unique_repo}-mirror\n    tags: {{latest: 1}}\n")
    summary = run_job(load_job(job_file))
    assert summary.ok, summary.format_text()
    assert _taken_upload_bytes(fault_proxy) < sum(len(d) for d in files.values()) + 64 * KiB
    _pulled(fault_proxy, f"{fault_proxy.host}/{unique_repo}-mirror:v1", tmp_path / "out", files)


def test_range_style_is_remembered_for_the_next_run(fault_proxy, unique_repo, tmp_path, caplog, capsys):
    """An end-exclusive ``Range`` registry: the first run learns the style and writes it to the
    settings file. A push that failed after its first chunk is continued by a new run, whose
    first answer is the session's status: read in the remembered style, the upload resumes at
    the registry's offset (read in distribution's, it would skip a byte and start again)."""
    import io

    from ocibridge.cli import main
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.registry import open_repository

    chunk = 512 * KiB
    fault_proxy.quirks[:] = [RangeEndExclusive()]
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes("application/octet-stream", data)

    class CtrlC(io.BytesIO):
        """Ctrl-C once the first chunk is read: the session is kept for the next run."""

        def read(self, n: int | None = -1) -> bytes:
            if self.tell() >= chunk:
                raise KeyboardInterrupt
            return super().read(n if n is None or n < 0 else min(n, chunk - self.tell()))

    with open_repository(host=fault_proxy.host, repository=unique_repo, plain_http=True,
                         chunk_size=chunk) as store, pytest.raises(KeyboardInterrupt):
        store.push_blob(desc, CtrlC(data))
    assert [r.status for r in fault_proxy.requests_matching("PATCH", "/blobs/uploads/")][0] == 202
    assert hosts.host_settings(fault_proxy.host).range_end == "exclusive"

    # the second PATCH, broken off by the Ctrl-C, may reach the proxy late (its handler thread
    # records it on arrival): wait for it, so it is not taken for the next run's first request
    deadline = time.monotonic() + 5
    while len(fault_proxy.requests_matching("PATCH", "/blobs/uploads/")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    caplog.set_level(logging.INFO, logger="ocibridge.http")
    fault_proxy.clear()
    with open_repository(host=fault_proxy.host, repository=unique_repo, plain_http=True,
                         chunk_size=chunk) as store:
        store.push_blob(desc, io.BytesIO(data))
        assert (store.stats.upload_resumes, store.stats.upload_restarts) == (1, 0)
    first = fault_proxy.requests[0]
    assert first.method in ("HEAD", "GET") and not fault_proxy.requests_matching("POST", "/blobs/uploads/")
    assert _taken_upload_bytes(fault_proxy) == SIZE - chunk  # from the registry's offset, once
    messages = [r.getMessage() for r in caplog.records]
    assert any("Range answers end-exclusive" in m for m in messages)  # --debug says where it came from
    assert fault_proxy.upstream("GET", f"/v2/{unique_repo}/blobs/{desc.digest}")[2] == data

    assert main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rangeEnd"] == "exclusive"


def test_check_registry_learns_the_range_style(fault_proxy, unique_repo, capsys):
    from ocibridge.cli import main

    assert main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http"]) == 0
    assert "upload Range answers: 0-(N-1) for N bytes held" in capsys.readouterr().out
    assert hosts.host_settings(fault_proxy.host).range_end is None  # distribution's: nothing to keep
    fault_proxy.quirks[:] = [RangeEndExclusive()]
    assert main(["check-registry", f"{fault_proxy.host}/{unique_repo}", "--plain-http", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rangeEnd"] == "exclusive"
    assert hosts.host_settings(fault_proxy.host).range_end == "exclusive"


def _upload_bodies(proxy: FaultProxy) -> tuple[int, int, int]:
    """From the proxy's log: (bytes of PATCH/PUT bodies the registry took, refused requests,
    bytes of refused bodies), uploads only."""
    bodies = [r for r in proxy.requests if r.method in ("PATCH", "PUT") and "/blobs/uploads/" in r.path]
    taken = sum(r.request_bytes for r in bodies if r.status in (201, 202))
    refused = [r for r in bodies if r.status not in (201, 202)]
    return taken, len(refused), sum(r.request_bytes for r in refused)


def test_cloudflare_real_body_cap_with_a_150_mib_blob(fault_proxy, unique_repo, tmp_path):
    """Cloudflare's real cap (100 MB, not scaled) and a 150 MiB file pushed with the default
    chunking (chunks sized by time grow past 100 MB): one 413, chunks under the cap from the
    registry's offset, nothing else sent twice; the learnt cap is what then passed."""
    cap = 100_000_000
    fault_proxy.quirks[:] = [BodyCap(cap)]
    model = tmp_path / "model"
    model.mkdir()
    size = 150 * MiB
    hasher = hashlib.sha256()
    with open(model / "weights.bin", "wb") as f:  # random 1 MiB blocks, each used once
        for _ in range(size // MiB):
            block = os.urandom(MiB)
            hasher.update(block)
            f.write(block)
    (model / "config.json").write_bytes(b'{"model_type": "llama"}')
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    api.push(str(model), ref, transfer=TransferOptions(plain_http=True))
    taken, refusals, refused_bytes = _upload_bodies(fault_proxy)
    assert size <= taken < size + 64 * KiB  # every byte once, + the small blobs
    # one 413 (the first chunk over 100 MB; Cloudflare reads it whole before refusing), then
    # chunks of half that size: that body is the only one sent twice
    assert refusals == 1 and cap < refused_bytes < size
    weights = [r for r in fault_proxy.requests if r.method in ("PATCH", "PUT") and r.status in (201, 202)]
    assert max(r.request_bytes for r in weights) <= cap
    learnt = hosts.host_settings(fault_proxy.host).max_body
    assert learnt is not None and learnt <= cap
    got = fault_proxy.upstream("GET", f"/v2/{unique_repo}/blobs/sha256:{hasher.hexdigest()}")[2]
    assert len(got) == size and hashlib.sha256(got).hexdigest() == hasher.hexdigest()


def test_tokens_that_die_early_are_renewed_before_that_age(fault_proxy, unique_repo, tmp_path, caplog):
    """Tokens claiming 300 s that die after 2.5 s: the first death mid-upload shows the real
    lifetime, and later tokens are renewed before it, so no other chunk is sent with a dead
    token (each such chunk would be sent whole, refused, and sent again)."""
    from support.faultproxy import throttle

    caplog.set_level(logging.INFO, logger="ocibridge.http")
    fault_proxy.quirks[:] = [ShortTokens(lifetime=2.5)]
    fault_proxy.add("PATCH", "/blobs/uploads/", throttle(512 * KiB), times=None)
    _model(tmp_path / "model")
    started = __import__("time").monotonic()
    api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1",
             transfer=TransferOptions(plain_http=True, concurrency=1, chunk_size=256 * KiB))
    assert __import__("time").monotonic() - started > 5.5  # two lifetimes and more
    body_bytes, refusals, refused = _upload_bodies(fault_proxy)
    assert refusals == 1 and refused <= 256 * KiB  # the first death only
    assert SIZE <= body_bytes < SIZE + 64 * KiB
    assert any("before its announced expiry" in r.getMessage() for r in caplog.records)


def test_gar_push_of_held_content_unknown_here_sends_nothing(fault_proxy, unique_repo, tmp_path, monkeypatch):
    """Issue 43 on a registry that takes no PATCH: a large file no local index knows is hashed
    first for its one PUT, so its digest is known before any byte goes, and the registry is
    asked: content it holds (pushed from elsewhere) is not sent again, its session is dropped.
    (Under another path: at the same path the repository's own manifest names it, and it is
    confirmed without a session: tests/transfer/test_push_sample_index.py.)"""
    fault_proxy.quirks[:] = [NoChunkedPatch()]
    files = _model(tmp_path / "model")
    api.push(str(tmp_path / "model"), f"{fault_proxy.host}/{unique_repo}:v1", transfer=_opts())
    fault_proxy.clear()
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "another-machine"))  # no digest cache, no index
    moved = {("renamed.bin" if name == "weights.bin" else name): data for name, data in files.items()}
    (tmp_path / "moved").mkdir()
    for name, data in moved.items():
        (tmp_path / "moved" / name).write_bytes(data)
    api.push(str(tmp_path / "moved"), f"{fault_proxy.host}/{unique_repo}:v2", transfer=_opts())
    assert _taken_upload_bytes(fault_proxy) < 1024  # the new config (it names the new path), not the file
    assert fault_proxy.requests_matching("DELETE", "/blobs/uploads/"), "the unneeded session is dropped"
    _pulled(fault_proxy, f"{fault_proxy.host}/{unique_repo}:v2", tmp_path / "o", moved)
