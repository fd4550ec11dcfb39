"""serve as a proxy of an upstream Hub: what an upstream may not slip past the door's rules. An
upstream ref named ``latest`` (serve's own tag for main) never repoints main; a file the upstream's
model_info leaves out but its tree lists is decided by the same rules (the fetch's listing is read
again); a pickle-bearing file is refused by its content whatever its name, and nothing of its
commit is tagged. The upstream and the proxy: tests/upstream_proxy.py."""

from __future__ import annotations

import io
import json
import pickle
import time
import zipfile
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from support.faultproxy import FaultProxy, RecordedRequest, Reroute, Serve, Status
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
HEADERS = {"Authorization": f"Bearer {CLIENT_TOKEN}"}


def _serve_log(proxied: Proxied) -> str:
    return (proxied.root / "proxy" / "serve.log").read_text(errors="replace")


def test_an_upstream_ref_named_latest_never_repoints_main(proxied: Proxied, tmp_path: Path):
    # the upstream (a serve itself) keeps its own "latest": its branch "later" is answered as "latest"
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    heads = {}
    for repo in ("refs/latest-first", "refs/main-first"):
        up.create_repo(repo)
        main = up.upload_file(path_or_fileobj=b'{"head": "main"}', path_in_repo="config.json", repo_id=repo).oid
        up.create_branch(repo, branch="later", revision=main)
        heads[repo] = up.upload_file(path_or_fileobj=b'{"head": "latest"}', path_in_repo="config.json",
                                     repo_id=repo, revision="later").oid
        proxied.counted.add("GET", rf"^/api/models/{repo}/revision/latest$",
                            Reroute(f"/api/models/{repo}/revision/later"), times=None)
    api = proxied.api()
    # the upstream's latest asked first (a miss): fetched, read by its commit, main not moved
    assert api.model_info("refs/latest-first", revision="latest").sha == heads["refs/latest-first"]
    got = api.hf_hub_download("refs/latest-first", "config.json", revision="latest", cache_dir=tmp_path / "a")
    assert Path(got).read_bytes() == b'{"head": "latest"}'
    proxied.landed("proxy/refs/latest-first", heads["refs/latest-first"])
    assert "latest" not in proxied.tags("proxy/refs/latest-first")
    # main fetched (first for the other): the upstream's main, and so it stays after latest is asked
    api.model_info("refs/main-first")
    api.model_info("refs/main-first", revision="latest")
    for repo in ("refs/latest-first", "refs/main-first"):
        main = up.model_info(repo).sha
        assert api.model_info(repo).sha == main
        proxied.named_main(f"proxy/{repo}", main)
        api.model_info(repo, revision="latest")
        assert api.model_info(repo).sha == main
        got = api.hf_hub_download(repo, "config.json", cache_dir=tmp_path / repo)
        assert Path(got).read_bytes() == b'{"head": "main"}'
    assert "refs/latest-first: its ref 'latest'" in _serve_log(proxied)


def _published(proxied: Proxied, repo: str, files: dict[str, bytes]) -> str:
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo)
    commit = ""
    for path, data in files.items():
        commit = up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo).oid
    return commit


def _without_sibling(upstream: str, left_out: str) -> Serve:
    """The upstream's model_info with one file left out of its siblings (its tree still lists it)."""
    def answer(proxy: FaultProxy, rec: RecordedRequest, body: bytes) -> Status:
        said = httpx.get(f"{upstream}{rec.path}", headers={"Authorization": rec.headers.get("authorization", "")})
        info = said.json()
        info["siblings"] = [s for s in info.get("siblings", []) if s.get("rfilename") != left_out]
        return Status(said.status_code, None, json.dumps(info).encode(),
                      (("Content-Type", "application/json"),))
    return Serve(answer)


def _refused_and_nothing_tagged(proxied: Proxied, repo: str, tmp_path: Path) -> None:
    httpx.get(f"{proxied.proxy}/api/models/{repo}/revision/main", headers=HEADERS)  # starts the fetch
    assert proxied.ended(repo, 1) == ["refused"]
    with pytest.raises(huggingface_hub.errors.HfHubHTTPError) as refused:
        proxied.api().hf_hub_download(repo, "config.json", cache_dir=tmp_path / repo)
    assert refused.value.response.status_code == 403
    assert "--upstream-allow-pickle" in refused.value.response.headers["x-error-message"]
    time.sleep(0.5)
    assert [t for t in proxied.tags(f"proxy/{repo}") if t != "ocibridge-refs"] == []
    assert set(proxied.outcomes(repo)) == {"refused"}  # asked again: refused again, never landed
    # and serve's own Hub cache keeps none of what the door refused (nothing to resume)
    folder = proxied.root / "proxy" / "cache" / "upstream-hub" / ("models--" + repo.replace("/", "--"))
    assert not folder.exists(), sorted(str(p) for p in folder.rglob("*"))


def test_a_file_the_upstreams_model_info_leaves_out_meets_the_rules_on_the_listing_fetched(proxied: Proxied,
                                                                                        tmp_path: Path):
    _published(proxied, "rules/hidden", {"config.json": b"{}", "extra/model.pkl": b"\x80\x04K\x01."})
    proxied.counted.add("GET", r"^/api/models/rules/hidden/revision/", _without_sibling(proxied.upstream,
                                                                                        "extra/model.pkl"),
                        times=None)
    _refused_and_nothing_tagged(proxied, "rules/hidden", tmp_path)
    audit = [json.loads(line) for line in (proxied.root / "audit.jsonl").read_text().splitlines()]
    [line] = [e for e in audit if e.get("repository") == "rules/hidden" and e["action"] == "upstream_ingest"]
    assert "extra/model.pkl" in line["reason"]


def _npy(descr: str, payload: bytes) -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}".encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


def _zip(*entries: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name in entries:
            z.writestr(name, pickle.dumps({"w": 1}, protocol=2) if name.endswith(".pkl") else b"\x00" * 64)
    return out.getvalue()


@pytest.mark.parametrize(("repo", "path", "data"), [
    ("rules/pickled-name", "weights.dat", pickle.dumps({"w": [1, 2]}, protocol=4)),
    ("rules/torch-zip", "model.weights", _zip("archive/version", "archive/data/0", "archive/data.pkl")),
    ("rules/npy-objects", "arrays.npy", _npy("|O", pickle.dumps([object], protocol=3))),
    ("rules/joblib", "model.joblib", b"joblib's own bytes"),
    ("rules/pickle", "model.pickle", b"(lp0\n."),
    ("rules/pth-tar", "checkpoint.pth.tar", b"\x00" * 32),
])
def test_a_pickle_bearing_file_is_refused_by_its_content_or_name_and_nothing_of_it_is_tagged(
        proxied: Proxied, tmp_path: Path, repo: str, path: str, data: bytes):
    _published(proxied, repo, {"config.json": b"{}", path: data})
    _refused_and_nothing_tagged(proxied, repo, tmp_path)


def test_arrays_of_numbers_and_zips_without_pickles_are_let_in(proxied: Proxied, tmp_path: Path):
    files = {"config.json": b"{}", "arrays.npy": _npy("<f4", b"\x00\x00\x80?"),
             "bundle.zip": _zip("a/version", "a/data/0")}
    commit = _published(proxied, "rules/plain", files)
    folder = Path(proxied.api().snapshot_download("rules/plain", cache_dir=tmp_path / "hub"))
    assert {p: (folder / p).read_bytes() for p in files} == files
    proxied.landed("proxy/rules/plain", commit)


def test_what_the_content_rule_calls_pickle_bearing_and_what_it_lets_through(tmp_path: Path):
    from ocibridge.hubserver.upstream.pickles import FilesDoor, pickled_file, pickled_head
    from ocibridge.hubserver.upstream.settings import UpstreamSettings

    for protocol in (2, 3, 4, 5):
        assert pickled_head(pickle.dumps([1], protocol=protocol)) == f"a pickle (protocol {protocol})"
    assert pickled_head(b"\x80\x01") is None and pickled_head(b"\x80\x06") is None  # no such protocol
    assert pickled_head(_npy("<f4", b"\x00" * 4)) is None
    assert pickled_head(_npy("|O", b"")) is not None
    assert pickled_head(_zip("archive/data.pkl")) is not None  # torch.save's first entry
    assert pickled_head(_zip("archive/version", "archive/data.pkl")) is None  # seen once whole:
    (tmp_path / "late.zip").write_bytes(_zip("archive/version", "archive/data.pkl"))
    assert pickled_file(tmp_path / "late.zip") == "a zip holding archive/data.pkl (a pickle)"
    (tmp_path / "plain.zip").write_bytes(_zip("a/version"))
    assert pickled_file(tmp_path / "plain.zip") is None
    # --upstream-allow-pickle: nothing read for pickles, the operator's own file globs still decided
    allowed = FilesDoor(UpstreamSettings("http://up", allow_pickle=True, refuse_files=("*.onnx",)))
    assert not allowed.sniffs
    allowed.listed("a/b", "0" * 40, ["model.pkl", "w.bin"])
    with pytest.raises(Exception, match=r"model.onnx refused by --upstream-refuse-files"):
        allowed.listed("a/b", "0" * 40, ["model.pkl", "onnx/model.onnx"])
    assert FilesDoor(UpstreamSettings("http://up")).sniffs
