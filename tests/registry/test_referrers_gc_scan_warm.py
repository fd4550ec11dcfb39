"""Scan reports and compile caches survive the registry's own garbage collection, as signatures
do: each referrer ocibridge writes has its own ``ocibridge-ref-<hex>`` tag (docs/signing.md, "Tags
ocibridge keeps, and garbage collection"). A model is pushed, scanned (a signed report), given a
signed compile cache and signed; Debian's distribution runs ``garbage-collect --delete-untagged``
on its stopped storage; after the restart every referrer is there and verifies: the signature,
the scan report under an ``ocibridgeCleanScan`` policy, the cache restored byte for byte. A
report written without its tag (as a tool that writes by digest alone does) is the control: the
collection takes it, so the collection did run."""

from __future__ import annotations

import json
import os

from support.registry import RegistryProcess
from test_referrers_gc import GONE, collect_garbage, ok, referrer_digests, run

from tests.modelgen import make_bert_model
from tests.signing_keys import key_pair

SCAN_TYPE = "https://ocibridge.dev/scan/v1"
WARM = ("--engine", "vllm", "--engine-version", "0.11.0", "--option", "level=3")


def cache_dir(root):
    (root / "rank_0_0").mkdir(parents=True)
    (root / "rank_0_0" / "kernel.so").write_bytes(bytes(range(256)) * 40)
    os.chmod(root / "rank_0_0" / "kernel.so", 0o755)
    (root / "rank_0_0" / "cache_key_factors.json").write_text('{"torch": "x"}\n')
    return root


def test_scan_reports_compile_caches_and_signatures_survive_garbage_collection(tmp_path, capsysbinary,
                                                                               monkeypatch):
    from ocibridge.stores.registry import store as registry_store

    registry = RegistryProcess(tmp_path / "registry")
    try:
        ref = f"{registry.host}/acme/scanned:v1"
        private, public = key_pair(tmp_path / "keys")
        ok(capsysbinary, "push", str(make_bert_model(tmp_path / "m")), ref, "-q")
        ok(capsysbinary, "scan", ref, "--key", str(private))
        cache = cache_dir(tmp_path / "cache")
        out, _ = ok(capsysbinary, "warm", "save", ref, str(cache), "--key", str(private), "--json", *WARM)
        cache_ref = f"{registry.host}/acme/scanned@{json.loads(out)['digest']}"
        ok(capsysbinary, "sign", ref, "--key", str(private))
        kept = referrer_digests(capsysbinary, ref)
        assert len(kept) == 3  # the scan report, the cache, the model's bundle signature
        cache_signatures = referrer_digests(capsysbinary, cache_ref)
        assert len(cache_signatures) == 1  # the cache's own bundle signature
        with monkeypatch.context() as untagged:  # the control: a report written by digest alone
            untagged.setattr(registry_store, "referrer_tag", lambda digest: digest)
            ok(capsysbinary, "scan", ref)
        control = referrer_digests(capsysbinary, ref) - kept
        assert len(control) == 1

        registry = collect_garbage(registry)

        code, out, err = run(capsysbinary, "discover", ref, "--json")
        assert code == 0, err
        assert {r["digest"] for r in json.loads(out)["referrers"]} == kept
        assert next(iter(control)) in err and GONE in err  # collected, as untagged manifests are
        assert referrer_digests(capsysbinary, cache_ref) == cache_signatures
        ok(capsysbinary, "verify", ref, "--key", str(public))
        ok(capsysbinary, "verify", cache_ref, "--key", str(public))
        ok(capsysbinary, "verify", ref, "--key", str(public), "--attestation-type", SCAN_TYPE)
        policy = tmp_path / "scan-policy.json"
        policy.write_text(json.dumps({"default": [{"type": "ocibridgeCleanScan", "keyPath": str(public)}]}))
        ok(capsysbinary, "pull", ref, str(tmp_path / "by-policy"), "-q", "--policy", str(policy))
        out, _ = ok(capsysbinary, "inspect", ref)
        assert [line for line in out.splitlines() if line.startswith("Scan:") and "clean" in line and "signed" in line]
        restored = tmp_path / "restored"
        ok(capsysbinary, "warm", "load", ref, str(restored), "--verify-key", str(public), *WARM)
        assert (restored / "rank_0_0" / "kernel.so").read_bytes() == (cache / "rank_0_0" / "kernel.so").read_bytes()
    finally:
        registry.stop()
