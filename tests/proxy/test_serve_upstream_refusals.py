"""serve as a proxy of an upstream Hub (issue 87): what it refuses (--upstream-deny, pickles, the
door's licenses and file patterns, bad flags) and how it fails (the upstream down, a fetch cut,
a file that fails its check). The upstream and the proxy: tests/upstream_proxy.py."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import ROOT, received_until_cut, serve_as_process, serve_over
from support.faultproxy import FaultProxy, corrupt, drop_response, server_error
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_denied_repository_and_a_pickle_file_are_refused_naming_the_rule(proxied: Proxied):
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    denied = httpx.get(f"{proxied.proxy}/api/models/secret/model", headers=headers)
    assert denied.status_code == 403
    assert "--upstream-deny secret/*" in denied.headers["x-error-message"]
    assert proxied.asked("secret") == []  # decided on the repo id: the upstream not asked
    pickled = httpx.get(f"{proxied.proxy}/api/models/acme/pickled/revision/main", headers=headers)
    assert pickled.status_code == 403
    assert "pytorch_model.bin" in pickled.headers["x-error-message"]
    assert "--upstream-allow-pickle" in pickled.headers["x-error-message"]
    asked = proxied.asked("acme/pickled")
    assert asked and all(p.startswith("/api/models/acme/pickled/revision/") for p in asked)  # metadata only
    assert proxied.tags("proxy/acme/pickled") == [] and proxied.tags("proxy/secret/model") == []
    audit = [json.loads(line) for line in (proxied.root / "audit.jsonl").read_text().splitlines()]
    refused = {e["repository"] for e in audit if e["action"] == "upstream_ingest" and e["outcome"] == "refused"}
    assert {"secret/model", "acme/pickled"} <= refused


def test_with_the_upstream_down_what_was_fetched_is_served_after_a_restart_and_a_miss_is_503(proxied: Proxied,
                                                                                              tmp_path: Path):
    proxied.api().model_info("acme/tiny")  # fetched, if no test before did
    proxied.landed("proxy/acme/tiny", proxied.main)
    down = FaultProxy(proxied.upstream)
    down.stop()  # nothing listens there now
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    args = [f"{proxied.registry.host}/proxy", "--plain-http", "--no-access-log", "--upstream", down.url,
            "--upstream-fresh", "0"]
    with serve_as_process(args, env, tmp_path / "serve.log") as again:
        api = HfApi(endpoint=again)
        assert api.model_info("acme/tiny").sha == proxied.main  # the mapping survived the restart
        got = huggingface_hub.hf_hub_download("acme/tiny", "config.json", revision=proxied.main, endpoint=again,
                                              cache_dir=tmp_path / "hub")
        assert Path(got).read_bytes() == (proxied.model / "config.json").read_bytes()
        started = (tmp_path / "serve.log").read_text()
        assert f"a proxy of {down.url} (with no token)" in started and "a branch never re-checked" in started
        miss = httpx.get(f"{again}/api/models/acme/never-fetched")
        assert miss.status_code == 503
        assert int(miss.headers["retry-after"]) > 0
        assert "upstream" in miss.headers["x-error-message"]


def test_the_upstream_flags_are_checked_before_serve_starts(tmp_path: Path):
    from ocibridge.api.serve import ServeOptions, create_app
    from ocibridge.errors import UsageError

    cases = (("127.0.0.1:1/x", ServeOptions(upstream_deny=("a/*",)), "go with --upstream URL"),
             (f"oci:{tmp_path / 'lay'}", ServeOptions(upstream="http://127.0.0.1:1"), "is not one"),
             ("127.0.0.1:1/x", ServeOptions(upstream="ftp://hub"), "--upstream 'ftp://hub'"),
             ("127.0.0.1:1/x", ServeOptions(upstream="http://h", upstream_token_file=str(tmp_path / "none")),
              "--upstream-token-file"),
             ("127.0.0.1:1/x", ServeOptions(upstream="http://h", upstream_fresh=-1), "--upstream-fresh"),
             # a password in the URL would be in every answer naming the upstream, and in the log
             ("127.0.0.1:1/x", ServeOptions(upstream="https://ops:s3cret@hub.internal"), "user or password"))
    for source, options, said in cases:
        with pytest.raises(UsageError, match=re.escape(said)) as refused:
            create_app(source, options=options)
        assert "s3cret" not in str(refused.value)


def test_a_fetch_cut_mid_file_cuts_its_reader_commits_nothing_and_the_next_request_resumes_the_file(
        proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/cut")
    weights = bytes(range(256)) * 8192  # 2 MiB: the engine reads 512 KiB at once
    sha = up.upload_file(path_or_fileobj=weights, path_in_repo="w.safetensors", repo_id="acme/cut").oid
    file = r"/acme/cut/resolve/.*/w\.safetensors"
    cut = proxied.counted.add("GET", file, drop_response(after=1_600_000))
    down = proxied.counted.add("GET", file, server_error(503), times=None)  # the engine's own retry fails too
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    with pytest.raises(httpx.HTTPError):  # the body ends short of its length: the client knows
        httpx.get(f"{proxied.proxy}/acme/cut/resolve/main/w.safetensors", headers=headers, timeout=120)
    assert cut.applied == 1 and down.applied >= 1
    assert proxied.ended("acme/cut", 1) == ["failed"]
    assert proxied.tags("proxy/acme/cut") == []  # nothing of the commit in the registry
    down.times = down.applied  # the upstream whole again
    got = huggingface_hub.hf_hub_download("acme/cut", "w.safetensors", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                          cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    resumed = proxied.counted.requests_matching("GET", file)[-1].headers.get("range", "")
    assert re.fullmatch(r"bytes=([1-9][0-9]*)-", resumed), resumed  # from what the cut fetch had received
    proxied.landed("proxy/acme/cut", sha)
    assert proxied.ended("acme/cut", 2) == ["failed", "landed"]


def test_a_file_that_fails_its_check_is_cut_for_its_reader_and_fetched_whole_again(proxied: Proxied,
                                                                                    tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/bad")
    weights = bytes(range(256)) * 300
    sha = up.upload_file(path_or_fileobj=weights, path_in_repo="w.safetensors", repo_id="acme/bad").oid
    file = r"/acme/bad/resolve/.*/w\.safetensors"
    proxied.counted.add("GET", file, corrupt(offset=1000))
    received = received_until_cut(f"{proxied.proxy}/acme/bad/resolve/main/w.safetensors", CLIENT_TOKEN)
    assert len(received) < len(weights)  # never the last byte of a file that did not check
    assert proxied.ended("acme/bad", 1) == ["failed"]
    assert proxied.tags("proxy/acme/bad") == []
    got = huggingface_hub.hf_hub_download("acme/bad", "w.safetensors", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                          cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    assert "range" not in proxied.counted.requests_matching("GET", file)[-1].headers  # whole again
    proxied.landed("proxy/acme/bad", sha)


def card(front: str) -> bytes:
    return f"---\n{front}\n---\n# a model\n".encode()


def test_the_door_refuses_by_license_by_file_pattern_and_a_gated_or_private_upstream_repository(
        proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    repos = {"door/apache": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x00" * 64},
             "door/mit": {"README.md": card("license: mit"), "w.safetensors": b"\x01" * 64},
             "door/own": {"README.md": card("license: other\nlicense_name: acme-1.0"), "w.safetensors": b"\x02" * 64},
             "door/bare": {"w.safetensors": b"\x03" * 64},
             "door/onnx": {"README.md": card("license: apache-2.0"), "onnx/model.onnx": b"\x04" * 64},
             "door/gated": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x05" * 64},
             "door/private": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x06" * 64}}
    for repo, files in repos.items():
        up.create_repo(repo, private=repo == "door/private")
        for path, data in files.items():
            up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo)
    up.update_repo_settings("door/gated", gated="auto")
    (tmp_path / "door").mkdir()
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-license", "apache-2.0", "--upstream-license", "ACME-1.0",
             "--upstream-refuse-files", "*.onnx", "--audit-log", str(tmp_path / "audit.jsonl")]
    with serve_over(proxied.registry, tmp_path / "door", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/door", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
        api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
        assert api.model_info("door/apache").cardData["license"] == "apache-2.0"
        assert api.model_info("door/own").sha  # license: other, its license_name allowed (case-insensitive)
        headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        said = {}
        for repo in ("door/mit", "door/bare", "door/onnx", "door/gated", "door/private"):
            answer = httpx.get(f"{proxy}/api/models/{repo}", headers=headers)
            said[repo] = (answer.status_code, answer.headers.get("x-error-message", ""))
        assert said["door/mit"][0] == 403 and "names mit: refused by --upstream-license" in said["door/mit"][1]
        assert said["door/bare"][0] == 403 and "names no license" in said["door/bare"][1]
        assert said["door/onnx"][0] == 403 and "onnx/model.onnx" in said["door/onnx"][1] \
            and "--upstream-refuse-files" in said["door/onnx"][1]
        assert said["door/gated"][0] == 403 and "gated (auto) at the upstream" in said["door/gated"][1]
        assert said["door/private"][0] == 404  # its existence not told
        with pytest.raises(huggingface_hub.errors.RepositoryNotFoundError):
            api.model_info("door/private")
        for repo in ("door/mit", "door/bare", "door/onnx", "door/gated", "door/private"):
            asked = proxied.asked(f"/{repo}/")
            assert asked and all(p.startswith(f"/api/models/{repo}/revision/") for p in asked), asked  # metadata only
            assert proxied.tags(f"door/{repo}") == []
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    refused = {e["repository"] for e in audit if e["action"] == "upstream_ingest" and e["outcome"] == "refused"}
    assert refused == {"door/mit", "door/bare", "door/onnx", "door/gated", "door/private"}


def test_a_branch_answered_from_its_last_head_while_the_upstream_is_down_says_it_is_stale(proxied: Proxied,
                                                                                         tmp_path: Path):
    (tmp_path / "stale").mkdir()
    door = FaultProxy(proxied.upstream)  # the upstream as this serve sees it: stopped below
    try:
        flags = ["--upstream", door.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
                 "--upstream-fresh", "1"]
        with serve_over(proxied.registry, tmp_path / "stale", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/stale", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
            fetched = httpx.get(f"{proxy}/api/models/acme/other", headers=headers, timeout=60)
            assert fetched.status_code == 200 and "warning" not in fetched.headers
            sha = fetched.json()["sha"]
            proxied.landed("stale/acme/other", sha)  # the fetch streams on after the first answer
            door.add("GET", ".*", drop_response(after=0), times=None)  # a connection kept alive: cut too
            door.stop()
            time.sleep(1.2)  # past --upstream-fresh: main's head is asked, and the upstream cannot answer
            for _ in range(2):  # the check that failed, then an answer within --upstream-fresh of it
                stale = httpx.get(f"{proxy}/api/models/acme/other", headers=headers, timeout=60)
                assert stale.status_code == 200 and stale.json()["sha"] == sha
                assert stale.headers["warning"].startswith('110 - "Response is Stale: acme/other@main'), \
                    stale.headers.get("warning")
            got = httpx.get(f"{proxy}/acme/other/resolve/main/config.json", headers=headers, timeout=60)
            assert got.content == b"{\"other\": 1}" and "Response is Stale" in got.headers["warning"]
            pinned = httpx.get(f"{proxy}/api/models/acme/other/revision/{sha}", headers=headers, timeout=60)
            assert pinned.status_code == 200 and "warning" not in pinned.headers  # a commit id is never stale
            miss = httpx.get(f"{proxy}/api/models/acme/never-here", headers=headers, timeout=60)
            assert miss.status_code == 503 and int(miss.headers["retry-after"]) > 0
    finally:
        door.stop()


def test_a_dataset_the_upstream_lacks_is_not_found(proxied: Proxied):
    """A dataset neither here nor at the upstream (acme/tiny is a model there) is not found, the
    upstream asked only its dataset_info, never for the model of its name; a model id the Hub
    reserves (``datasets/...``) is never asked for."""
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    for path in ("/api/datasets/acme/tiny", "/api/datasets/acme/tiny/revision/main",
                 "/datasets/acme/tiny/resolve/main/config.json", "/api/models/datasets/acme"):
        answer = httpx.get(f"{proxied.proxy}{path}", headers=headers)
        assert answer.status_code == 404 and answer.headers["x-error-code"] == "RepoNotFound", path
    asked = proxied.asked("datasets")
    assert asked and set(asked) == {"/api/datasets/acme/tiny/revision/main"}
    assert proxied.tags("proxy/datasets/acme/tiny") == []
