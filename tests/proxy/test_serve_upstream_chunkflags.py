"""serve's ``--upstream-chunk-threshold``, ``--upstream-chunk-hash`` and ``--upstream-no-chunks``:
push's chunk flags for the artifact a commit fetched from the upstream is built into (default:
push's, as before), checked as push checks its flags. Against the real processes of
tests/upstream_proxy.py: one more serve over the same registry and upstream."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi
from serving import serve_over
from upstream_proxy import CLIENT_TOKEN, Proxied, lfs_only, manifest_of  # noqa: F401 - autouse: over LFS

from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ARTIFACT_TYPE, parse_table
from ocibridge.cli import main
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.stores.registry import open_repository

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def fetched_manifest(proxied: Proxied, proxy: str, prefix: str, repo_id: str) -> tuple[str, dict]:
    """(commit, the manifest the proxy at ``proxy`` stored under ``prefix``) of ``repo_id``'s main."""
    sha = HfApi(endpoint=proxy, token=CLIENT_TOKEN).model_info(repo_id).sha
    proxied.landed(f"{prefix}/{repo_id}", sha)
    return sha, manifest_of(proxied.registry.url, f"{prefix}/{repo_id}", f"ocibridge-upstream-{sha}")


def test_an_upstream_chunk_threshold_gives_a_small_file_its_table(proxied: Proxied, tmp_path):
    """acme/other's 4 KiB weights: no table by default (the session's proxy), one by SHA-256 with
    ``--upstream-chunk-threshold 2K --upstream-chunk-hash sha256``, its referrer attached."""
    _, plain = fetched_manifest(proxied, proxied.proxy, "proxy", "acme/other")
    assert ANNOTATION_DIGEST not in plain["annotations"]

    (tmp_path / "chunky").mkdir()
    flags = ["--upstream", proxied.upstream, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-chunk-threshold", "2K", "--upstream-chunk-hash", "sha256"]
    with serve_over(proxied.registry, tmp_path / "chunky", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/chunky", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
        sha, manifest = fetched_manifest(proxied, proxy, "chunky", "acme/other")
    (weights,) = [x for x in manifest["layers"] if x["annotations"]["org.opencontainers.image.title"]
                  == "w.safetensors"]
    table_digest = manifest["annotations"][ANNOTATION_DIGEST]
    with open_repository(host=proxied.registry.host, repository="chunky/acme/other", plain_http=True) as store:
        subject = store.resolve(f"ocibridge-upstream-{sha}")
        (referrer,) = store.referrers(subject, ARTIFACT_TYPE)
        held = parse_manifest_bytes(store.fetch_bytes(referrer), referrer.mediaType)
        (table_layer,) = [x for x in held.layers if x.digest == table_digest]
        table = parse_table(store.fetch_bytes(table_layer))
    assert table.algorithm == "sha256" and list(table.layers) == [weights["digest"]]
    # the same files as the default proxy's, only the table differs
    assert manifest["layers"] == plain["layers"]


@pytest.mark.parametrize("flags, said", [
    (["--upstream", "http://127.0.0.1:9", "--upstream-no-chunks", "--upstream-chunk-threshold", "1M"],
     "--upstream-chunk-threshold says which files get a chunk table: leave it out with --upstream-no-chunks"),
    (["--upstream", "http://127.0.0.1:9", "--upstream-no-chunks", "--upstream-chunk-hash", "sha256"],
     "--upstream-chunk-hash says how a chunk table is hashed: leave it out with --upstream-no-chunks"),
    (["--upstream", "http://127.0.0.1:9", "--upstream-chunk-threshold", "1Q"],
     "--upstream-chunk-threshold: '1Q' is not a byte count"),
    (["--upstream-chunk-threshold", "1M"], "the --upstream-* flags go with --upstream URL"),
], ids=["no-and-threshold", "no-and-hash", "not-a-size", "without-upstream"])
def test_upstream_chunk_flag_mistakes_are_one_line(capsys, flags, said):
    assert main(["serve", "registry.example/hub", "--listen", "127.0.0.1:0", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_k8s_serve_hands_the_chunk_flags_to_its_pods():
    from ocibridge.api.k8s_types import K8sServeOptions

    options = K8sServeOptions(upstream_chunk_threshold=2048, upstream_chunk_hash="sha256")
    assert options.upstream_policy_flags() == ("--upstream-chunk-threshold", "2048", "--upstream-chunk-hash", "sha256")
    assert K8sServeOptions(upstream_no_chunks=True).upstream_policy_flags() == ("--upstream-no-chunks",)
