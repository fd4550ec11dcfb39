"""Mirror jobs from a Hub endpoint (issue 45): ``source = "hf://ORG/NAME"``.

The Hub is ``ocibridge serve`` over registry A (tests/serving.py), read through the real
huggingface_hub client, sometimes behind a fault proxy; the target is registry B. Each test
checks the target through the registry: tags, annotations, and digests equal to ``push hf:`` of
the same Hub cache snapshot.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from serving import point_hub_at, serving
from support.cli_run import digest_of
from support.faultproxy import FaultProxy, drop_response, server_error
from support.mirror_jobs import mirror_job

from ocibridge.cli import main
from ocibridge.cli.mirror import mirror_command
from ocibridge.errors import OcibridgeError
from ocibridge.mirror import load_job, run_job
from ocibridge.mirror.hub import select_revisions, tag_names
from ocibridge.mirror.jobsections import RevisionFilter
from ocibridge.oci.models import parse_manifest_bytes
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.registry import open_repository
from tests.modelgen import make_bert_model

SOURCE = "org.opencontainers.image.source"
REVISION = "org.opencontainers.image.revision"


class Hub:
    """acme/tiny on registry A, under a prefix ``serve`` answers for: revisions are its tags
    (``main`` is ``latest``), commits the first 40 hex of the manifests' digests."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], registry, unique_repo: str):
        self.tmp, self.capsys = tmp_path, capsys
        self.prefix = f"{registry.host}/{unique_repo}"
        self.repo = f"{self.prefix}/acme/tiny"

    def push(self, name: str, *tags: str) -> str:
        """A new model (its weights differ by ``name``; the rest is shared) as ``tags``; its commit."""
        src = make_bert_model(self.tmp / "models" / name, weights=2048)  # 512 KiB of weights
        assert main(["push", str(src), f"{self.repo}:{tags[0]}", "-q"]) == 0
        for tag in tags[1:]:
            assert main(["tag", f"{self.repo}:{tags[0]}", tag]) == 0
        return digest_of(self.capsys, f"{self.repo}:{tags[0]}").split(":")[1][:40]


@pytest.fixture
def hub_repo(tmp_path, capsys, registry, unique_repo) -> Hub:
    return Hub(tmp_path, capsys, registry, unique_repo)


@pytest.fixture
def hub_cache(tmp_path) -> Path:
    return tmp_path / "hf-home" / "hub"


def sync_job(path: Path, endpoint: str, target: str, allow: list[str]) -> Path:
    """A job of one ``[[sync]]`` of hf://acme/tiny into ``target``, the revisions ``allow`` names."""
    return mirror_job(path, {"source": "hf://acme/tiny", "target": target, "revisions": {"allow": allow}},
                      defaults={"endpoint": endpoint})


def mirror_provenance(capsys: pytest.CaptureFixture[str], ref: str, out: Path) -> dict:
    """The build definition of the mirror's provenance attached to ``ref``, pulled into ``out``
    beside its files."""
    capsys.readouterr()
    assert main(["pull", ref, str(out), "--with-attestations", "--json", "-q"]) == 0
    (name,) = [w for w in json.loads(capsys.readouterr().out)["attestations"] if "slsaprovenance" in w]
    definition: dict = json.loads((out / name).read_text())["predicate"]["buildDefinition"]
    assert definition["buildType"] == "https://ocibridge.dev/slsa/mirror/v1"
    return definition


def target_tags(host_repo: str) -> list[str]:
    return sorted(open_repository(parse_registry_reference(host_repo)).tags())


def annotations(ref: str) -> dict[str, str]:
    parsed = parse_registry_reference(ref)
    store = open_repository(parsed)
    desc = store.resolve(parsed.reference)
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    return dict(manifest.annotations or {})


def test_two_revisions_then_only_the_new_one_moves(tmp_path, capsys, hub_repo, hub_cache, registry2, unique_repo,
                                                   monkeypatch):
    v1 = hub_repo.push("tiny-a", "v1")
    main_1 = hub_repo.push("tiny-b", "latest")
    target = f"{registry2.host}/{unique_repo}/mirror/tiny"
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        job_path = sync_job(tmp_path / "job.toml", served.url, target, ["main", "v1"])
        # the dry run says what will move, and writes nothing
        capsys.readouterr()
        assert mirror_command(str(job_path), dry_run=True) == 0
        said = capsys.readouterr().out
        assert f"would copy hf://acme/tiny@main ({main_1}) -> {target}:main-{main_1[:12]}" in said
        assert f"hf://acme/tiny@v1 ({v1}) -> {target}:v1-{v1[:12]}" in said
        assert "file(s) to download" in said and "dry run: 2 to copy" in said
        assert target_tags(target) == []

        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
        assert len(summary.with_status("copied")) == 2
        assert target_tags(target) == sorted(["main", f"main-{main_1[:12]}", "v1", f"v1-{v1[:12]}"])
        for tag, commit in ((f"main-{main_1[:12]}", main_1), ("main", main_1), (f"v1-{v1[:12]}", v1), ("v1", v1)):
            said_ = annotations(f"{target}:{tag}")
            assert said_[SOURCE] == "https://huggingface.co/acme/tiny" and said_[REVISION] == commit

        # the same digest as push hf:ORG/NAME@COMMIT of the snapshot in the Hub cache
        for tag, commit in ((f"main-{main_1[:12]}", main_1), (f"v1-{v1[:12]}", v1)):
            check = f"{registry2.host}/{unique_repo}/check:{commit[:12]}"
            assert main(["push", f"hf:acme/tiny@{commit}", check, "-q"]) == 0
            assert digest_of(capsys, check) == digest_of(capsys, f"{target}:{tag}")

        # a new commit on main: only it moves (v1 and the old main are skipped without a download)
        main_2 = hub_repo.push("tiny-c", "latest")
        served.requests.clear()
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
        copied = summary.with_status("copied")
        assert [a.target for a in copied] == [f"{target}:main-{main_2[:12]}"]
        assert [a.source for a in summary.with_status("skipped")] == [f"hf://acme/tiny@v1 ({v1})"]
        downloads = {path for method, path in served.requests if method == "GET" and "/resolve/" in path}
        assert downloads and all(f"/resolve/{main_2}/" in p for p in downloads)
        assert "model.safetensors" in " ".join(downloads)
        # the weights, extra/notes.md (it names its model) and the config: the rest is shared with main_1
        assert copied[0].blobs_copied == 3  # of 6
        assert digest_of(capsys, f"{target}:main") == digest_of(capsys, f"{target}:main-{main_2[:12]}")
        assert f"main-{main_1[:12]}" in target_tags(target)  # the old commit stays pinned

        # a third run moves nothing at all
        summary = run_job(load_job(job_path))
        assert [a.status for a in summary.artifacts] == ["skipped", "skipped"], summary.format_text()


def test_a_cut_download_resumes_and_a_run_after_a_failure_finishes(tmp_path, capsys, hub_repo, hub_cache, registry2,
                                                                   unique_repo, monkeypatch):
    from huggingface_hub import constants

    # huggingface_hub writes what it received in pieces of DOWNLOAD_CHUNK_SIZE (10 MiB) and resumes a
    # cut transfer from there: pieces of 32 KiB let a 512 KiB file resume
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 32 * 1024)
    commit = hub_repo.push("tiny-r", "latest")
    weights = r"/resolve/[0-9a-f]{40}/model\.safetensors"
    target = f"{registry2.host}/{unique_repo}/mirror/cut"
    with serving([hub_repo.prefix]) as served, FaultProxy(served.url) as proxy:
        point_hub_at(monkeypatch, proxy.url, hub_cache)
        job_path = mirror_job(tmp_path / "job.toml",
                              {"source": "hf://acme/tiny", "target": target, "endpoint": proxy.url})
        proxy.add("GET", weights, drop_response(after=100_000), times=1)
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
        gets = proxy.requests_matching("GET", weights)
        assert [g.action for g in gets] == ["drop_response", None]
        assert gets[0].range is None and gets[1].range is not None  # resumed, not started over
        assert 0 < int(gets[1].range.split("=")[1].split("-")[0]) <= 100_000
        assert annotations(f"{target}:main-{commit[:12]}")[REVISION] == commit

    # the weights refused: the revision fails, says why, tags nothing; a later run fetches only them
    target2 = f"{registry2.host}/{unique_repo}/mirror/cut2"
    commit2 = hub_repo.push("tiny-s", "latest")
    with serving([hub_repo.prefix]) as served, FaultProxy(served.url) as proxy:
        point_hub_at(monkeypatch, proxy.url, hub_cache)
        job_path = mirror_job(tmp_path / "job2.toml",
                              {"source": "hf://acme/tiny", "target": target2, "endpoint": proxy.url})
        proxy.add("GET", weights, server_error(500), times=None)
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 1
        assert "run the job again to resume it" in summary.failed[0].reason
        assert target_tags(target2) == []  # nothing half-done is tagged
        proxy.clear()
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
        fetched = [r.path.rsplit("/", 1)[-1] for r in proxy.requests_matching("GET", "/resolve/")]
        assert fetched == ["model.safetensors"]  # the files finished before are in the Hub cache
        assert annotations(f"{target2}:main")[REVISION] == commit2


def test_a_revision_filter_is_obeyed(tmp_path, capsys, hub_repo, hub_cache, registry2, unique_repo, monkeypatch):
    v1 = hub_repo.push("tiny-f1", "v1")
    v2 = hub_repo.push("tiny-f2", "v2", "latest")
    target = f"{registry2.host}/{unique_repo}/mirror/filtered"
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        job_path = mirror_job(tmp_path / "job.toml",
                              {"source": "hf://acme/tiny", "target": target,
                               "revisions": {"allow": ["v1", "v2", v1], "deny": ["v2"]},
                               "include": ["*.json", "*.safetensors"]},
                              defaults={"endpoint": served.url})
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
        assert target_tags(target) == sorted([f"commit-{v1[:12]}", "v1", f"v1-{v1[:12]}"])
        assert digest_of(capsys, f"{target}:v1") == digest_of(capsys, f"{target}:commit-{v1[:12]}")
        assert v2 not in json.dumps(summary.as_dict())
        # include: only those files were read (and downloaded)
        parsed = parse_registry_reference(f"{target}:v1")
        store = open_repository(parsed)
        desc = store.resolve("v1")
        layers = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType).layers
        paths = sorted(layer.annotations[next(k for k in layer.annotations if k.endswith(".filepath"))]
                       for layer in layers)
        assert paths == ["config.json", "model.safetensors", "tokenizer_config.json"]

        # one revision named in the source; a glob over the refs serve lists (list_repo_refs)
        one = mirror_job(tmp_path / "one.toml",
                         {"source": "hf://acme/tiny@v2", "target": f"{target}-one", "endpoint": served.url})
        summary = run_job(load_job(one))
        assert summary.exit_code == 0, summary.format_text()
        assert target_tags(f"{target}-one") == sorted(["v2", f"v2-{v2[:12]}"])
        globbed = mirror_job(tmp_path / "glob.toml",
                             {"source": "hf://acme/tiny", "target": f"{target}-glob", "endpoint": served.url,
                              "revisions": {"allow": ["v*"]}})
        summary = run_job(load_job(globbed))
        assert summary.exit_code == 0, summary.format_text()
        assert {"v1", "v2"} <= set(target_tags(f"{target}-glob"))


def test_shards_together_do_the_whole_job(tmp_path, capsys, hub_repo, hub_cache, registry2, unique_repo,
                                          monkeypatch):
    from ocibridge.mirror.shard import parse_shard

    commits = {tag: hub_repo.push(f"tiny-{tag}", tag) for tag in ("v1", "v2", "v3")}
    target = f"{registry2.host}/{unique_repo}/mirror/sharded"
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        job = mirror_job(tmp_path / "job.toml",
                         {"source": "hf://acme/tiny", "target": target, "endpoint": served.url,
                          "revisions": {"allow": ["v1", "v2", "v3"]}})
        copied = []
        for i in range(2):
            summary = run_job(load_job(job), shard=parse_shard(f"{i}/2"))
            assert summary.exit_code == 0, summary.format_text()
            copied += [a.target for a in summary.with_status("copied")]
        assert sorted(copied) == sorted(f"{target}:{t}-{c[:12]}" for t, c in commits.items())


def test_revision_names_and_tags():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert tag_names("main", commit) == ("main-0123456789ab", "main")
    assert tag_names("refs/pr/1", commit) == ("refs-pr-1-0123456789ab", "refs-pr-1")
    assert tag_names(".hidden", commit) == ("_hidden-0123456789ab", "_hidden")
    assert tag_names(commit, commit) == ("commit-0123456789ab", None)
    long = tag_names("x" * 300, commit)[0]
    assert len(long) == 128
    listed = {"main": commit, "dev": commit, "v1.0": commit, "v1.1-rc": commit}
    assert select_revisions(listed, RevisionFilter()) == ["main"]
    assert select_revisions(listed, RevisionFilter(allow=["v*"], deny=["*-rc"])) == ["v1.0"]
    assert select_revisions(listed, RevisionFilter(allow=["re:v1\\.[0-9]+", commit])) == [commit, "v1.0"]
    assert select_revisions(None, RevisionFilter(allow=["main", "v1"])) == ["main", "v1"]
    with pytest.raises(OcibridgeError, match="lists no branches"):
        select_revisions(None, RevisionFilter(allow=["v*"]))


def test_job_keys_for_hub_sources_are_checked(tmp_path, monkeypatch):
    from ocibridge.mirror import parse_job

    def entry(**keys: object) -> dict[str, object]:
        return {"sync": [{"source": "hf://acme/tiny", "target": "registry.example/m", **keys}]}

    with pytest.raises(OcibridgeError, match="tags: .*not for hf:// sources"):
        parse_job(entry(tags={"allow": ["v1"]}))
    with pytest.raises(OcibridgeError, match="convert: .*not for hf:// sources"):
        parse_job(entry(convert="cncf"))
    with pytest.raises(OcibridgeError, match="revisions: .*only for hf:// sources"):
        parse_job({"sync": [{"source": "registry.example/a", "target": "registry.example/b",
                             "revisions": {"allow": ["main"]}}]})
    with pytest.raises(OcibridgeError, match="only one of token_env, token_file"):
        parse_job(entry(token_env="T", token_file="t"))
    with pytest.raises(OcibridgeError, match="an http:// or https:// URL"):
        parse_job(entry(endpoint="hub.example"))
    with pytest.raises(OcibridgeError, match="mirror source only"):
        parse_job({"sync": [{"source": "registry.example/a", "target": "hf://acme/tiny"}]})

    # the endpoint and token: the entry's, the job's defaults, then the environment
    job = parse_job({"defaults": {"endpoint": "https://hub.example/", "token_env": "HUB_T"},
                     "sync": [{"source": "hf://acme/tiny", "target": "registry.example/m"},
                              {"source": "hf://acme/tiny", "target": "registry.example/n",
                               "endpoint": "http://other:8080", "token_file": "tok"}]}, tmp_path)
    (tmp_path / "tok").write_text("from-file\n")
    monkeypatch.setenv("HUB_T", "from-env")
    assert job.hub_endpoint(job.sync[0]) == "https://hub.example"
    assert job.hub_token(job.sync[0]) == "from-env"
    assert job.hub_endpoint(job.sync[1]) == "http://other:8080"
    assert job.hub_token(job.sync[1]) == "from-file"
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example")
    bare = parse_job(entry())
    assert bare.hub_endpoint(bare.sync[0]) == "https://mirror.example" and bare.hub_token(bare.sync[0]) is None


def test_without_huggingface_hub_the_error_names_the_extra(monkeypatch):
    import sys

    from ocibridge.kinds.hf.commitdownload import hub

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    with pytest.raises(OcibridgeError, match=r"pip install 'ocibridge\[hub\]'"):
        hub()


def test_a_hub_job_as_a_kubernetes_job(tmp_path, capsys):
    import yaml
    from kubernetes.client import ApiClient

    job = tmp_path / "hub.toml"
    job.write_text('[defaults]\nendpoint = "https://huggingface.co"\ntoken_env = "HF_TOKEN"\n\n'
                   '[[sync]]\nsource = "hf://acme/tiny"\ntarget = "registry.internal/hub/acme/tiny"\n')
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "2"]) == 2
    assert "pass --env-secret" in capsys.readouterr().err  # the token comes from a Secret
    assert main(["mirror", str(job), "--emit", "k8s-job", "--shards", "2", "--env-secret", "hf-token"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    pod = docs[-1]["spec"]["template"]["spec"]
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    assert {"name": "HOME", "value": "/tmp"} in pod["containers"][0]["env"]  # the Hub cache: /tmp/.cache/…
    assert ApiClient().deserialize(json.dumps(docs[-1]), "V1Job", "application/json").spec.completions == 2
    relative = tmp_path / "file.toml"
    relative.write_text('[[sync]]\nsource = "hf://acme/tiny"\ntarget = "registry.internal/m"\ntoken_file = "tok"\n')
    assert main(["mirror", str(relative), "--emit", "k8s-job", "--shards", "1"]) == 1
    assert "token_file = 'tok': relative to the job file" in capsys.readouterr().err


def test_the_provenance_of_a_hub_mirror_names_the_hub_repository_and_commit(tmp_path, capsys, hub_repo, hub_cache,
                                                                             registry2, unique_repo, monkeypatch):
    """provenance = true on a Hub source: the statement attached to the mirrored manifest has
    the mirror's build type and records the Hub repository at its commit and every file by
    SHA-256 (what was read: there is no source manifest); pulled beside the files with
    --with-attestations."""
    main_1 = hub_repo.push("tiny-a", "latest")
    target = f"{registry2.host}/{unique_repo}/mirror/tiny"
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        job_path = mirror_job(tmp_path / "job.toml",
                              {"source": "hf://acme/tiny", "target": target, "revisions": {"allow": ["main"]}},
                              defaults={"endpoint": served.url, "provenance": True})
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
    out = tmp_path / "out"
    deps = mirror_provenance(capsys, f"{target}:main", out)["resolvedDependencies"]
    assert {"uri": "https://huggingface.co/acme/tiny", "digest": {"gitCommit": main_1}, "name": "hub"} in deps
    weights = (out / "model.safetensors").read_bytes()
    assert any(d.get("name") == "model.safetensors" and d["digest"] == {"sha256": hashlib.sha256(weights).hexdigest()}
               for d in deps)


def test_a_branch_and_a_tag_of_one_name_are_both_mirrored_neither_over_the_other(tmp_path, capsys, hub_repo,
                                                                                  hub_cache, registry2, unique_repo,
                                                                                  monkeypatch):
    """The Hub keeps refs/heads/x and refs/tags/x apart (so does serve): the mirror listed both
    under x and the tag's commit took the target's tag x. The branch keeps x; the tag is the
    revision refs/tags/x, mirrored as refs-tags-x."""
    from huggingface_hub import HfApi

    hub_repo.push("tiny-t0", "latest")
    target = f"{registry2.host}/{unique_repo}/mirror/both"
    with serving([hub_repo.prefix], tokens=("w write",), publish=_publishing()) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        monkeypatch.setenv("MIRROR_HUB_TOKEN", "w")
        api = HfApi(endpoint=served.url, token="w")
        api.create_tag("acme/tiny", tag="v1")  # at main's commit
        api.create_branch("acme/tiny", branch="v1")
        branch = api.upload_file(path_or_fileobj=b"only on the branch\n", path_in_repo="branch.txt",
                                 repo_id="acme/tiny", revision="v1").oid
        tag = next(t.target_commit for t in api.list_repo_refs("acme/tiny").tags if t.name == "v1")
        assert branch != tag
        job_path = mirror_job(tmp_path / "job.toml",
                              {"source": "hf://acme/tiny", "target": target, "endpoint": served.url,
                               "token_env": "MIRROR_HUB_TOKEN", "revisions": {"allow": ["v1", "refs/tags/*"]}})
        summary = run_job(load_job(job_path))
        assert summary.exit_code == 0, summary.format_text()
    assert target_tags(target) == sorted(["v1", f"v1-{branch[:12]}", "refs-tags-v1", f"refs-tags-v1-{tag[:12]}"])
    assert annotations(f"{target}:v1")[REVISION] == branch
    assert annotations(f"{target}:refs-tags-v1")[REVISION] == tag


def _publishing():
    from ocibridge.hubserver.repo.publishing import Publishing

    return Publishing()


def test_a_large_revision_is_mirrored_as_push_stores_it_with_its_chunk_table(tmp_path, capsys, hub_repo, hub_cache,
                                                                             registry2, unique_repo, monkeypatch):
    """A file from push's chunk threshold: ``push hf:ORG/NAME@COMMIT`` binds a chunk table and
    attaches its referrer; the mirror copied the manifest without them (another digest than
    the push its docs promise). Now the same manifest, and the table's referrer beside it."""
    from ocibridge.chunks.chunktable import ARTIFACT_TYPE, PUSH_THRESHOLD

    src = make_bert_model(tmp_path / "models" / "big", weights=PUSH_THRESHOLD // 256 + 1)  # 64 MiB + 272 bytes
    assert main(["push", str(src), f"{hub_repo.repo}:latest", "-q"]) == 0
    commit = digest_of(capsys, f"{hub_repo.repo}:latest").split(":")[1][:40]
    target = f"{registry2.host}/{unique_repo}/mirror/big"
    with serving([hub_repo.prefix]) as served:
        point_hub_at(monkeypatch, served.url, hub_cache)
        summary = run_job(load_job(sync_job(tmp_path / "job.toml", served.url, target, ["main"])))
    assert summary.exit_code == 0, summary.format_text()
    check = f"{registry2.host}/{unique_repo}/check:v1"
    capsys.readouterr()
    assert main(["push", f"hf:acme/tiny@{commit}", check, "--json", "-q"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    mirrored = f"{target}:main-{commit[:12]}"
    assert digest_of(capsys, mirrored) == pushed["digest"] == digest_of(capsys, f"{target}:main")
    assert [a.referrers for a in summary.with_status("copied")] == [1]
    store = open_repository(parse_registry_reference(mirrored))
    desc = store.resolve(f"main-{commit[:12]}")
    assert [r.digest for r in store.referrers(desc, ARTIFACT_TYPE)] == [pushed["chunks"]["referrer"]]
