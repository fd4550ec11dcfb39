"""serve's own ``--scan quarantine`` holds for what its proxy brings in: with ``--upstream`` and no
``--upstream-scan``, a model fetched from the upstream is scanned by its content before it is
served, as a pushed commit is. A flagged one (a Keras Lambda layer, a torch pickle renamed
``model.safetensors``; ``--upstream-allow-pickle`` lets pickles past the name rule, not past the
scan) is never served, naming the file, the finding and the flag; a clean one lands with its report
signed by serve's key and reads as before. Against the real processes of tests/upstream_proxy.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import serve_over
from signing_keys import key_pair
from support.attacks import attack_tree
from upstream_proxy import CLIENT_TOKEN, UP_TOKEN, Proxied, lfs_only  # noqa: F401 - autouse: over LFS

from ocibridge.scanning.stored import stored_reports
from ocibridge.signing.keys import load_public_key
from ocibridge.stores.registry import open_repository

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ATTACKS = {path: data for path, data in attack_tree().items() if path in ("model.keras", "model.safetensors")}
PREFIX = "quarantining"


@pytest.fixture(scope="module")
def quarantining(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """(the proxy with --scan quarantine and no --upstream-scan, the upstream repositories' namespace,
    its public key), each attack published upstream as NS/a<n>."""
    namespace = f"q{uuid.uuid4().hex[:8]}"
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    for n, (path, data) in enumerate(ATTACKS.items()):
        up.create_repo(f"{namespace}/a{n}")
        up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id=f"{namespace}/a{n}")
        up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=f"{namespace}/a{n}")
    root = tmp_path_factory.mktemp("quarantineproxy")
    key, public = key_pair(root / "keys")
    flags = ["--upstream", proxied.upstream, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-allow-pickle", "--scan", "quarantine", "--sign-key", str(key)]
    with serve_over(proxied.registry, root, f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/{PREFIX}", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
        yield proxy, namespace, public


@pytest.mark.parametrize("n", range(len(ATTACKS)), ids=list(ATTACKS))
def test_a_flagged_upstream_model_is_never_served(proxied: Proxied, quarantining, n: int, tmp_path: Path):
    proxy, namespace, _ = quarantining
    repo, path = f"{namespace}/a{n}", list(ATTACKS)[n]
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as refused:
        huggingface_hub.hf_hub_download(repo, path, endpoint=proxy, token=CLIENT_TOKEN, cache_dir=tmp_path)
    assert refused.value.response.status_code == 403
    said = refused.value.response.headers["x-error-message"]
    assert path in said and "[scanner: ocibridge-scan" in said and "--scan quarantine" in said, said
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as again:  # nor later, by any route
        huggingface_hub.hf_hub_download(repo, "config.json", endpoint=proxy, token=CLIENT_TOKEN,
                                        cache_dir=tmp_path / "again")
    assert again.value.response.status_code == 403
    assert [t for t in proxied.tags(f"{PREFIX}/{repo}") if t != "ocibridge-refs"] == []


def test_a_clean_upstream_model_lands_with_its_signed_report_and_is_served(proxied: Proxied, quarantining,
                                                                           tmp_path: Path):
    proxy, _, public = quarantining
    got = HfApi(endpoint=proxy, token=CLIENT_TOKEN).hf_hub_download("acme/tiny", "model.safetensors",
                                                                    revision=proxied.main, cache_dir=tmp_path)
    assert Path(got).read_bytes() == (proxied.model / "model.safetensors").read_bytes()
    proxied.landed(f"{PREFIX}/acme/tiny", proxied.main)
    with open_repository(host=proxied.registry.host, repository=f"{PREFIX}/acme/tiny", plain_http=True) as store:
        subject = store.resolve(f"ocibridge-upstream-{proxied.main}")
        (found,) = stored_reports(store, subject, [("serve", load_public_key(public))])
    assert found.report.verdict == "clean" and found.report.subject == subject.digest
