"""``ocibridge serve`` (issue 40) against a real registry, with the real huggingface_hub and
transformers: every read the Hub's clients make, answered from OCI, verified."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path

import httpx
import httpx2
import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from serving import files_of, own_settings, point_hub_at, serving
from support.fixtures import new_repo

from ocibridge.cli import main
from tests.modelgen import make_bert_model


@pytest.fixture(scope="module")
def model(tmp_path_factory, registry):
    """acme/tiny under a prefix of its own of the registry, tagged latest and v1: pushed once for
    the module (the tests only read it, each through a serve of its own, with its own cache)."""
    root = tmp_path_factory.mktemp("serve-model")
    src = make_bert_model(root / "tiny", weights=4096)  # 1 MiB of weights: several chunks
    prefix = f"{registry.host}/{new_repo()}"
    ref = f"{prefix}/acme/tiny"
    said = io.StringIO()
    with own_settings(root), contextlib.redirect_stdout(said):
        assert main(["push", str(src), f"{ref}:latest", "-q"]) == 0
        assert main(["tag", f"{ref}:latest", "v1"]) == 0
        assert main(["resolve", f"{ref}:latest"]) == 0
    return src, prefix, said.getvalue().split()[-1]


@pytest.fixture
def hub(tmp_path) -> Path:
    return tmp_path / "hf-home" / "hub"


def test_snapshot_download_holds_the_models_exact_bytes_then_answers_from_the_hub_cache(model, hub, monkeypatch):
    src, prefix, digest = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        where = Path(snapshot_download("acme/tiny"))
        assert files_of(where) == files_of(src)
        assert where.name == digest.split(":")[1][:40]  # the commit: the manifest digest's first 40 hex
        blobs = {p.name for p in (hub / "models--acme--tiny" / "blobs").iterdir()}
        assert blobs == {hashlib.sha256(b).hexdigest() for b in files_of(src).values()}  # named by SHA-256
        # what was served is in the model cache, under the same names
        from ocibridge.cache.modelcache import ModelCache

        weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
        assert ModelCache().blobs.blob_path(f"sha256:{weights}").is_file()
        served.requests.clear()
        assert Path(snapshot_download("acme/tiny")) == where
        assert served.requests == [("GET", "/api/models/acme/tiny/revision/main")]  # one request


def test_allow_patterns_and_hf_hub_download(model, hub, monkeypatch):
    src, prefix, _ = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        where = Path(snapshot_download("acme/tiny", allow_patterns=["*.json"]))
        assert sorted(files_of(where)) == ["config.json", "tokenizer_config.json"]
        one = Path(hf_hub_download("acme/tiny", "extra/notes.md", revision="v1"))
        assert one.read_bytes() == (src / "extra" / "notes.md").read_bytes()


def test_model_info_files_and_tree(model, hub, monkeypatch):
    src, prefix, digest = model
    with serving([prefix], page=2) as served:  # pages of 2 entries: the client follows Link
        point_hub_at(monkeypatch, served.url, hub)
        api = HfApi()
        info = api.model_info("acme/tiny", files_metadata=True)
        assert info.id == "acme/tiny" and info.sha == digest.split(":")[1][:40]
        by_name = {s.rfilename: s for s in info.siblings}
        assert sorted(by_name) == sorted(files_of(src))
        weights = (src / "model.safetensors").read_bytes()
        assert by_name["model.safetensors"].size == len(weights)
        assert by_name["model.safetensors"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
        assert sorted(api.list_repo_files("acme/tiny")) == sorted(files_of(src))
        top = {e.path: type(e).__name__ for e in api.list_repo_tree("acme/tiny")}
        assert top == {"extra": "RepoFolder", "config.json": "RepoFile", "model.safetensors": "RepoFile",
                       "tokenizer_config.json": "RepoFile", "vocab.txt": "RepoFile"}
        assert [e.path for e in api.list_repo_tree("acme/tiny", "extra")] == ["extra/notes.md"]
        deep = [e.path for e in api.list_repo_tree("acme/tiny", recursive=True)]
        assert sorted(deep) == sorted([*files_of(src), "extra"])
        infos = api.get_paths_info("acme/tiny", ["config.json", "extra", "absent.txt"])
        assert [(type(i).__name__, i.path) for i in infos] == [("RepoFile", "config.json"), ("RepoFolder", "extra")]
        # revisions: a tag, the commit id, the digest
        for revision in ("v1", info.sha, digest):
            assert api.model_info("acme/tiny", revision=revision).sha == info.sha


def test_hf_file_system_ls_open_and_ranges(model, hub, monkeypatch):
    src, prefix, _ = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        fs = HfFileSystem(skip_instance_cache=True)
        names = {p.rsplit("/", 1)[-1] for p in fs.ls("acme/tiny", detail=False)}
        assert names == {"config.json", "extra", "model.safetensors", "tokenizer_config.json", "vocab.txt"}
        weights = (src / "model.safetensors").read_bytes()
        with fs.open("acme/tiny/model.safetensors", "rb", block_size=4096) as f:
            f.seek(100_000)
            assert f.read(10) == weights[100_000:100_010]
        with fs.open("acme/tiny/config.json", "rb") as f:
            assert f.read() == (src / "config.json").read_bytes()
        r = httpx.get(f"{served.url}/acme/tiny/resolve/main/model.safetensors", headers={"Range": "bytes=-16"})
        assert r.status_code == 206 and r.content == weights[-16:]
        assert r.headers["content-range"] == f"bytes {len(weights) - 16}-{len(weights) - 1}/{len(weights)}"
        r = httpx.get(f"{served.url}/acme/tiny/resolve/main/model.safetensors",
                      headers={"Range": f"bytes={len(weights)}-"})
        assert r.status_code == 416


def test_transformers_load_by_repo_id(model, hub, monkeypatch):
    from transformers import AutoConfig, AutoTokenizer

    _, prefix, _ = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        config = AutoConfig.from_pretrained("acme/tiny")
        assert config.model_type == "bert" and config.hidden_size == 32
        tokenizer = AutoTokenizer.from_pretrained("acme/tiny")
        assert tokenizer.convert_tokens_to_ids(["hello", "world"]) == [4, 5]


def test_not_found_answers_are_the_clients_own_errors(model, hub, monkeypatch):
    _, prefix, _ = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        api = HfApi()
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("acme/absent")
        with pytest.raises(RevisionNotFoundError):
            api.model_info("acme/tiny", revision="v9")
        with pytest.raises(RevisionNotFoundError):
            api.model_info("acme/tiny", revision="0" * 40)  # no tag's digest starts so
        with pytest.raises(EntryNotFoundError):
            hf_hub_download("acme/tiny", "absent.bin")
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download("acme/absent", "config.json")
        with pytest.raises(RevisionNotFoundError):
            hf_hub_download("acme/tiny", "config.json", revision="v9")


def test_a_tampered_blob_cuts_the_connection_and_nothing_is_committed(model, hub, monkeypatch, fault_proxy):
    from support import corrupt

    src, prefix, _ = model
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    fault_proxy.add("GET", f"/blobs/sha256:{weights}", corrupt(offset=500_000), times=100)
    monkeypatch.setattr("time.sleep", lambda s: None)  # the client's retries, without their pauses
    with serving([f"{fault_proxy.host}/{prefix.split('/', 1)[1]}"]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        with pytest.raises((HfHubHTTPError, httpx2.HTTPError)):  # the cut body, after its retries
            hf_hub_download("acme/tiny", "model.safetensors")
        folder = hub / "models--acme--tiny"
        assert not (folder / "blobs" / weights).exists()
        assert not any(p.name == "model.safetensors" for p in folder.rglob("*"))
        from ocibridge.cache.modelcache import ModelCache

        assert not ModelCache().blobs.blob_path(f"sha256:{weights}").exists()  # nor in the model cache
        # the other files are served as ever
        assert Path(hf_hub_download("acme/tiny", "config.json")).read_bytes() == (src / "config.json").read_bytes()


def test_a_tampered_layout_blob_cuts_the_connection_and_nothing_is_committed(tmp_path):
    """From a layout the blob is fetched on a thread of its own and followed (no request holds
    it): a blob whose bytes are not its digest's still never reaches a client whole, nor the
    model cache."""
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.stores.layout import LayoutStore

    src = make_bert_model(tmp_path / "tiny", weights=4096)
    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(src), f"oci:{tmp_path}/lay:acme/tiny:latest", "-q"]) == 0
    weights = hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    blob = tmp_path / "lay" / "blobs" / "sha256" / weights
    data = bytearray(blob.read_bytes())
    data[500_000] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    with serving([f"oci:{tmp_path}/lay"]) as served:
        got = b""
        url = f"{served.url}/acme/tiny/resolve/main/model.safetensors"
        with pytest.raises(httpx.HTTPError), httpx.stream("GET", url) as r:  # cut before the last byte
            for piece in r.iter_bytes():
                got += piece
        assert len(got) < len(data)
        assert not ModelCache().blobs.blob_path(f"sha256:{weights}").exists()
        config = httpx.get(f"{served.url}/acme/tiny/resolve/main/config.json")
        assert config.content == (src / "config.json").read_bytes()


def test_sources_layout_local_and_order(tmp_path, hub, monkeypatch, capsys):
    from ocibridge.stores.layout import LayoutStore

    monkeypatch.setenv("OCIBRIDGE_STORE", str(tmp_path / "store"))
    first = make_bert_model(tmp_path / "first")
    second = make_bert_model(tmp_path / "second")
    LayoutStore(tmp_path / "lay", create=True)
    assert main(["push", str(first), f"oci:{tmp_path}/lay:acme/tiny:latest", "-q"]) == 0
    assert main(["push", str(second), "acme/tiny:latest", "-q"]) == 0  # the local store
    assert main(["push", str(second), "solo:v2", "-q"]) == 0
    capsys.readouterr()
    with serving([f"oci:{tmp_path}/lay", "local"], default_tag="v2") as served:
        point_hub_at(monkeypatch, served.url, hub)
        # main is v2: only the local store has solo:v2; acme/tiny:v2 nowhere
        assert files_of(Path(snapshot_download("solo"))) == files_of(second)
        with pytest.raises(RevisionNotFoundError):
            HfApi().model_info("acme/tiny")
        assert files_of(Path(snapshot_download("acme/tiny", revision="latest"))) == files_of(first)  # layout first
        listed = {m.id for m in HfApi().list_models()}
        assert listed == {"acme/tiny", "solo"}
        assert [m.id for m in HfApi().list_models(author="acme")] == ["acme/tiny"]
        assert [m.id for m in HfApi().list_models(search="sol")] == ["solo"]


def test_registry_catalog_lists_models(model, hub, monkeypatch):
    _, prefix, _ = model
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        assert [m.id for m in HfApi().list_models()] == ["acme/tiny"]


def test_read_tokens(model, hub, monkeypatch):
    _, prefix, _ = model
    with serving([prefix], tokens=("s3cret",)) as served:
        point_hub_at(monkeypatch, served.url, hub)
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi(token=False).model_info("acme/tiny")
        assert refused.value.response.status_code == 401
        assert HfApi(token="s3cret").model_info("acme/tiny").id == "acme/tiny"
        assert httpx.get(f"{served.url}/healthz").status_code == 200  # probes need no token
        assert httpx.get(f"{served.url}/readyz").json() == {"status": "ready"}


def test_an_unsigned_model_is_refused_with_the_reason(model, hub, monkeypatch, tmp_path):
    from signing_keys import key_pair

    from ocibridge.signing.verify import VerifyPolicy

    _, prefix, _ = model
    _, pub = key_pair(tmp_path)
    with serving([prefix], verify=VerifyPolicy.from_files([str(pub)])) as served:
        point_hub_at(monkeypatch, served.url, hub)
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi().model_info("acme/tiny")
        assert refused.value.response.status_code == 403
        assert "refused" in refused.value.response.headers["x-error-message"]


def test_json_shapes_for_other_clients(model, hub):
    src, prefix, _ = model
    with serving([prefix]) as served:
        head = httpx.head(f"{served.url}/acme/tiny/resolve/main/config.json")
        sha = hashlib.sha256((src / "config.json").read_bytes()).hexdigest()
        assert head.status_code == 200
        assert head.headers["etag"] == head.headers["x-linked-etag"] == f'"{sha}"'
        size = str((src / "config.json").stat().st_size)
        assert head.headers["x-linked-size"] == head.headers["content-length"] == size
        assert head.headers["accept-ranges"] == "bytes" and len(head.headers["x-repo-commit"]) == 40
        missing = httpx.head(f"{served.url}/acme/tiny/resolve/main/absent.bin")
        assert missing.status_code == 404 and missing.headers["x-error-code"] == "EntryNotFound"
        assert missing.headers["x-repo-commit"] == head.headers["x-repo-commit"]
        info = httpx.get(f"{served.url}/api/models/acme/tiny").json()
        assert json.dumps(info)  # plain JSON
        assert {s["rfilename"] for s in info["siblings"]} == set(files_of(src))


@pytest.mark.parametrize("xet", [False, True], ids=["plain", "xet"])
def test_sixteen_clients_at_once_share_one_fetch_per_blob(tmp_path, monkeypatch, registry, unique_repo,
                                                           fault_proxy, xet):
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    models = {}
    for name in ("one", "two"):
        models[name] = make_bert_model(tmp_path / name, weights=8192)  # 2 MiB of weights each
        table = ["--chunks", "--chunk-threshold", "1M"] if xet else []  # over Xet from the first byte
        assert main(["push", str(models[name]), f"{registry.host}/{unique_repo}/acme/{name}:latest", "-q",
                     *table]) == 0
    with serving([f"{fault_proxy.host}/{unique_repo}"],  # every registry request counted
                 xet_min=1024 * 1024 if xet else None) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "unused", xet=xet)

        def client(i: int) -> tuple[str, Path]:
            name = ("one", "two")[i % 2]
            return name, Path(snapshot_download(f"acme/{name}", cache_dir=tmp_path / f"hub{i}"))

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(client, range(16)))
    for name, where in results:
        assert files_of(where) == files_of(models[name])
    gets = Counter(r.path for r in fault_proxy.requests_matching("GET", r"/blobs/sha256:"))
    files = {hashlib.sha256(b).hexdigest() for m in models.values() for b in files_of(m).values()}
    sent = {path.rsplit(":", 1)[1]: count for path, count in gets.items()}
    assert files <= set(sent)
    assert all(sent[f] == 1 for f in files), sent  # each file's blob came from the registry once
    xorbs = [p for _, p in served.requests if "/xorbs/" in p]
    assert bool(xorbs) == xet  # the weights went over Xet when offered, and only then


def test_serve_obeys_the_containers_policy_file_like_pull(model, hub, monkeypatch, tmp_path, capsys):
    """The policy file found ($OCIBRIDGE_POLICY here) or named (--policy): a repository it
    rejects is refused (403, the reason in X-Error-Message, which huggingface_hub raises with),
    nothing is written to the Hub cache; one it accepts is served."""
    from ocibridge.signing.containers_policy import UsePolicy

    src, prefix, _ = model
    host, _, path = prefix.partition("/")
    reject_repo = tmp_path / "reject-repo.json"
    reject_repo.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {
        "docker": {f"{prefix}/acme/tiny": [{"type": "reject"}]}}}))
    accept = tmp_path / "accept.json"
    accept.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {
        "docker": {f"{prefix}/acme/other": [{"type": "reject"}]}}}))  # another repository's scope
    monkeypatch.setenv("OCIBRIDGE_POLICY", str(reject_repo))
    with serving([prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub)
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi().model_info("acme/tiny")
        assert refused.value.response.status_code == 403
        assert "rejects it" in refused.value.response.headers["x-error-message"]
        assert "rejects it" in str(refused.value)  # what the user of the client reads
        # every client call raises the refusal as the Hub's own "there, but not for you" (gated)
        for call in (lambda: snapshot_download("acme/tiny"),
                     lambda: hf_hub_download("acme/tiny", "config.json", revision="v1")):  # a tag: the repo's scope
            with pytest.raises(GatedRepoError) as gated:
                call()
            assert gated.value.response.status_code == 403 and "rejects it" in str(gated.value)
        assert not hub.exists() or not any(hub.rglob("config.json"))
    with serving([prefix], verify=UsePolicy(file=str(accept))) as served:  # --policy: the file named wins
        point_hub_at(monkeypatch, served.url, hub)
        where = Path(snapshot_download("acme/tiny"))
        assert files_of(where) == files_of(src)
    # the command line: --policy is read at start, a broken one is one error line
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    capsys.readouterr()
    assert main(["serve", prefix, "--policy", str(broken), "--listen", "127.0.0.1:1"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1 and "broken.json" in err, err


def test_serve_policy_scopes_a_layout_source(tmp_path, hub, monkeypatch):
    """An oci:DIR source is looked up in the policy's oci transport, by its directory."""
    from ocibridge.signing.containers_policy import UsePolicy

    src = make_bert_model(tmp_path / "tiny", weights=16)
    from ocibridge.stores.layout import LayoutStore

    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    assert main(["push", str(src), f"oci:{layout}:acme/tiny:latest", "-q"]) == 0
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {
        "oci": {str(layout): [{"type": "reject"}]}}}))
    with serving([f"oci:{layout}"], verify=UsePolicy(file=str(policy))) as served:
        point_hub_at(monkeypatch, served.url, hub)
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi().model_info("acme/tiny")
        assert refused.value.response.status_code == 403
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
    with serving([f"oci:{layout}"], verify=UsePolicy(file=str(policy))) as served:
        point_hub_at(monkeypatch, served.url, hub)
        assert HfApi().model_info("acme/tiny").id == "acme/tiny"


def test_a_cold_file_is_sent_while_it_arrives_and_its_clients_share_one_fetch(tmp_path, registry, unique_repo,
                                                                               fault_proxy):
    """The registry paced at 1 MiB/s (4 MiB of weights): serve's first bytes reach the client
    while the registry is still sending, not after the whole blob is in the model cache; a
    second client joining midway gets the same verified bytes, from that one fetch."""
    from concurrent.futures import ThreadPoolExecutor

    from support import throttle

    src = make_bert_model(tmp_path / "tiny", weights=16384)  # 4 MiB of weights
    assert main(["push", str(src), f"{registry.host}/{unique_repo}/acme/tiny:latest", "-q"]) == 0
    data = (src / "model.safetensors").read_bytes()
    weights = hashlib.sha256(data).hexdigest()
    fault_proxy.add("GET", f"/blobs/sha256:{weights}", throttle(1 << 20), times=None)
    with serving([f"{fault_proxy.host}/{unique_repo}"]) as served:
        url = f"{served.url}/acme/tiny/resolve/main/model.safetensors"

        def whole() -> bytes:
            return httpx.get(url, timeout=60).content

        with httpx.stream("GET", url, timeout=60) as r, ThreadPoolExecutor(1) as pool:
            pieces = r.iter_raw()
            first = next(pieces)
            assert first and data.startswith(first)
            assert served.blobs.fetched == 0  # the registry has not finished sending
            other = pool.submit(whole)  # joins the fetch in progress
            body = first + b"".join(pieces)
            assert body == data
            assert other.result() == data
    gets = [r for r in fault_proxy.requests_matching("GET", rf"/blobs/sha256:{weights}")]
    assert len(gets) == 1 and served.blobs.fetched == 1
