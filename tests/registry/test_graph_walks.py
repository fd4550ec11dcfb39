"""Graph walks with memory (issue 34, item 4), against the real registry.

Referrers found through ``sha256-<hex>`` fallback tags are writable by anyone with push rights.
A hostile repository links N manifests so that each one's fallback index lists the next two (a
ladder of diamonds: Fibonacci(N) paths from the root) and, optionally, the last one's lists the
root again (a cycle). ``copy -r`` and a mirror run must cost requests linear in N (counted by the
registry store and the fault proxy, never by wall time), and a graph past the bounds must fail
with one line.
"""

from __future__ import annotations

import io
import json

import pytest
from support.fixtures import new_repo

from ocibridge.cli import main
from ocibridge.core.graphbound import ENV_MAX_DEPTH, ENV_MAX_NODES, MAX_GRAPH_DEPTH
from ocibridge.mirror import load_job, run_job
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_INDEX, OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.signing.attach import SignatureCompanions
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import fallback_tag, open_repository
from ocibridge.transfer.copy import CopyHooks, copy

EMPTY = b"{}"
ARTIFACT_TYPE = "application/vnd.example.hostile"


def _store(host: str, repo: str):
    return open_repository(parse_registry_reference(f"{host}/{repo}:x"))


def _graph(host: str, repo: str, n: int, *, links: tuple[int, ...] = (1, 2), cycle: bool = False) -> list[Descriptor]:
    """Push N small manifests (M0 tagged ``root``) and, for each Mi, a fallback index listing
    M(i+k) for k in ``links``; with ``cycle`` the last one lists M0. Returns their descriptors."""
    empty = Descriptor.for_bytes(OCI_EMPTY, EMPTY)
    descs: list[Descriptor] = []
    with _store(host, repo) as store:
        store.push_blob(empty, io.BytesIO(EMPTY))
        for i in range(n):
            body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": ARTIFACT_TYPE,
                               "config": empty.model_dump(exclude_none=True),
                               "layers": [empty.model_dump(exclude_none=True)],
                               "annotations": {"n": str(i)}}).encode()
            desc = Descriptor.for_bytes(OCI_MANIFEST, body)
            desc.artifactType = ARTIFACT_TYPE
            store.push_manifest(desc, body, "root" if i == 0 else None)
            descs.append(desc)
        for i, desc in enumerate(descs):
            targets = [descs[i + k] for k in links if i + k < n]
            if cycle and i == n - 1:
                targets.append(descs[0])
            if not targets:
                continue
            index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                                "manifests": [t.model_dump(exclude_none=True) for t in targets]}).encode()
            store.push_manifest(Descriptor.for_bytes(OCI_INDEX, index), index, fallback_tag(desc.digest))
    return descs


def _copy_requests(host: str, repo: str, tmp_path, name: str) -> tuple[int, set[str]]:
    """Requests a ``copy -r`` of ``root`` into a new layout costs, and the manifests it wrote."""
    dst = LayoutStore(tmp_path / name, create=True)
    with _store(host, repo) as src:
        copy(src, "root", dst, "root", referrers=True, hooks=CopyHooks(companions=SignatureCompanions()))
        requests = src.stats.requests
    listed = {e.digest for e in dst.read_index().manifests}
    return requests, listed


@pytest.mark.timeout(120)  # without memory this walk runs for hours: fail, do not hang
def test_diamond_ladder_copies_in_requests_linear_in_nodes(registry, tmp_path):
    small, large = 8, 24  # Fibonacci(24) = 46368 paths: a walk without memory never ends
    a, b = new_repo("ladder"), new_repo("ladder")
    digests_small = _graph(registry.host, a, small)
    digests_large = _graph(registry.host, b, large)
    r_small, listed_small = _copy_requests(registry.host, a, tmp_path, "small")
    r_large, listed_large = _copy_requests(registry.host, b, tmp_path, "large")
    assert {d.digest for d in digests_small} <= listed_small
    assert {d.digest for d in digests_large} <= listed_large
    per_node = r_large / large
    assert per_node <= 10, (r_small, r_large)  # GET, referrers (tag), 3 cosign tags per node
    # linear: three times the nodes, about three times the requests (paths grow ~ 100 times)
    assert r_large <= 3 * r_small + 2 * large, (r_small, r_large)


def test_cycle_through_fallback_tags_ends(registry, tmp_path):
    repo = new_repo("cycle")
    digests = _graph(registry.host, repo, 12, cycle=True)
    requests, listed = _copy_requests(registry.host, repo, tmp_path, "out")
    assert {d.digest for d in digests} <= listed
    assert requests <= 10 * 12


def test_mirror_run_walks_the_cycle_once(registry, registry2, tmp_path):
    repo = new_repo("mcycle")
    digests = _graph(registry.host, repo, 16, cycle=True)
    job = tmp_path / "job.toml"
    job.write_text(f'[[sync]]\nsource = "{registry.host}/{repo}"\ntarget = "{registry2.host}/{repo}"\n'
                   'accept = ["any"]\n')
    summary = run_job(load_job(job))
    assert summary.ok, summary.format_text()
    with _store(registry2.host, repo) as dst:
        assert [d.digest for d in digests if not dst.exists(d)] == []


def test_chain_deeper_than_the_bound_fails_with_one_line(registry, tmp_path, capsys):
    repo = new_repo("deep")
    _graph(registry.host, repo, MAX_GRAPH_DEPTH + 3, links=(1,))
    dst = tmp_path / "out"
    assert main(["copy", "-r", f"{registry.host}/{repo}:root", f"oci:{dst}:root"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    assert f"nested deeper than {MAX_GRAPH_DEPTH} manifests" in err and ENV_MAX_DEPTH in err


def test_count_bound_fails_with_one_line_and_can_be_raised(registry, tmp_path, capsys, monkeypatch):
    repo = new_repo("wide")
    _graph(registry.host, repo, 10)
    monkeypatch.setenv(ENV_MAX_NODES, "6")
    assert main(["copy", "-r", f"{registry.host}/{repo}:root", f"oci:{tmp_path / 'a'}:root"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than 6 manifests" in err and ENV_MAX_NODES in err
    monkeypatch.setenv(ENV_MAX_NODES, "10")
    assert main(["copy", "-r", f"{registry.host}/{repo}:root", f"oci:{tmp_path / 'b'}:root", "-q"]) == 0


@pytest.mark.parametrize("depth", [MAX_GRAPH_DEPTH + 1])
def test_depth_bound_can_be_raised(registry, tmp_path, capsys, monkeypatch, depth):
    repo = new_repo("deeper")
    _graph(registry.host, repo, depth + 1, links=(1,))
    monkeypatch.setenv(ENV_MAX_DEPTH, str(depth))
    assert main(["copy", "-r", f"{registry.host}/{repo}:root", f"oci:{tmp_path / 'b'}:root", "-q"]) == 0
