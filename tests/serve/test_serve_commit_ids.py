"""Issue 61, history and refs that live in the registry, and commit ids everywhere: every commit
serve writes keeps resolving by the id it was given, on a restarted serve and on another serve
with its own empty cache, survives the registry's ``garbage-collect --delete-untagged``, and is
what ``ocibridge pull|path|inspect|diff REG/org/name@<id>`` take; branches are told from tags.

One registry of this module's own (the garbage collection stops it), serve and the CLI run as
processes, the real huggingface_hub as the client. The commits are made once (``history``) and
each test reads them.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import RevisionNotFoundError
from mounting import Mount, mount_env
from serving import files_of, serve_as_process
from support.registry import RegistryProcess, garbage_collect, registry_binary

from ocibridge.hubserver.repo.initial import GITATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]
TOKENS = "reader-token\nwriter-token write * ci-bot\n"
READER = "reader-token"
REPO = "acme/m"


def safetensors(**tensors: list[float]) -> bytes:
    """A safetensors file of F32 vectors (what ``ocibridge diff`` names tensors from)."""
    header: dict[str, object] = {}
    body = b""
    for name, values in tensors.items():
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


@dataclass
class Commit:
    oid: str
    branch: str
    files: dict[str, bytes]  # what a download of the commit holds


@dataclass
class History:
    registry: RegistryProcess
    root: Path
    commits: list[Commit]
    outside: str  # the commit id of a manifest pushed outside serve, then committed on by serve
    initial: str = ""  # the first commit create_repo made (its .gitattributes)

    @property
    def prefix(self) -> str:
        return f"{self.registry.host}/models"


def env_with(cache: Path, **more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(cache), "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1", **more}


@contextlib.contextmanager
def serve_process(root: Path, prefix: str, cache: Path) -> Iterator[str]:
    """``ocibridge serve PREFIX`` as a process with its own ``$OCIBRIDGE_CACHE``; yields its URL."""
    (root / "tokens.txt").write_text(TOKENS)
    args = [prefix, "--no-access-log", "--token-file", str(root / "tokens.txt")]
    with serve_as_process(args, env_with(cache), root / f"serve-{cache.name}.log") as url:
        yield url


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``ocibridge`` command as a process (its own cache)."""
    return subprocess.run([sys.executable, "-m", "ocibridge", *args], env=env_with(root / "cli-cache"),
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """Five commits on two branches (main: c0, c1, c4; dev from c1: c2, c3), the tag v1 on c1,
    made through one serve process; and a model pushed outside serve that serve then commits on."""
    registry_binary()  # no registry binary: an error naming how to install it, never a skip
    root = tmp_path_factory.mktemp("commit-ids")
    registry = RegistryProcess(root / "registry")
    src = root / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    (src / "model.safetensors").write_bytes(safetensors(embed=[1.0, 2.0, 3.0, 4.0], head=[0.5, 0.5]))
    commits: list[Commit] = []
    made = History(registry, root, commits, "")
    try:
        with serve_process(root, f"{registry.host}/models", root / "cache-a") as url:
            api = HfApi(endpoint=url, token="writer-token")
            api.create_repo(REPO)
            made.initial = api.model_info(REPO).sha
            files = {".gitattributes": GITATTRIBUTES, **files_of(src)}  # the first commit's file stays
            oid = api.upload_folder(repo_id=REPO, folder_path=src, commit_message="c0").oid
            commits.append(Commit(oid, "main", dict(files)))
            changed = safetensors(embed=[1.0, 2.0, 3.0, 4.0], head=[0.25, 0.75])
            files["model.safetensors"] = changed
            oid = api.upload_file(path_or_fileobj=changed, path_in_repo="model.safetensors", repo_id=REPO,
                                  commit_message="c1: a new head").oid
            commits.append(Commit(oid, "main", dict(files)))
            api.create_branch(REPO, branch="dev", revision=oid)
            api.create_tag(REPO, tag="v1", revision=oid)
            on_dev = dict(files)
            for n in (2, 3):
                on_dev[f"dev-{n}.txt"] = f"dev {n}\n".encode()
                oid = api.upload_file(path_or_fileobj=on_dev[f"dev-{n}.txt"], path_in_repo=f"dev-{n}.txt",
                                      repo_id=REPO, revision="dev", commit_message=f"c{n}").oid
                commits.append(Commit(oid, "dev", dict(on_dev)))
            files["README.md"] = b"# m\n"
            oid = api.upload_file(path_or_fileobj=files["README.md"], path_in_repo="README.md", repo_id=REPO,
                                  commit_message="c4").oid
            commits.append(Commit(oid, "main", dict(files)))

            # a model pushed outside serve (no commit tag), then committed on through serve
            pushed = cli(root, "push", str(src), f"{registry.host}/models/acme/old:latest", "-q", "--json")
            assert pushed.returncode == 0, pushed.stderr
            outside = api.model_info("acme/old").sha
            api.upload_file(path_or_fileobj=b"on top\n", path_in_repo="top.txt", repo_id="acme/old")
            # and one pushed outside serve that serve never committed on: no commit tag at all
            plain = cli(root, "push", str(src), f"{registry.host}/models/acme/plain:v3", "-q", "--json")
            assert plain.returncode == 0, plain.stderr
            # and a commit tag put by hand on a manifest whose digest it does not abbreviate
            # (by hand: ocibridge's own tag refuses an ocibridge-* name; the registry's API takes it)
            kind = "application/vnd.oci.image.manifest.v1+json"
            body = httpx.get(f"{registry.url}/v2/models/acme/plain/manifests/v3", headers={"Accept": kind})
            moved = httpx.put(f"{registry.url}/v2/models/acme/plain/manifests/ocibridge-commit-{'1' * 40}",
                              content=body.content, headers={"Content-Type": body.headers["content-type"]})
            assert moved.status_code == 201, moved.text
        made.outside = outside
        yield made
    finally:
        made.registry.stop()  # the one running (the garbage collection's test starts it again)


def test_every_commit_has_its_tag_and_tags_hides_them(history):
    """``ocibridge tags`` lists the branches and the Hub tag; ``--all`` also serve's own: one
    ``ocibridge-commit-<id>`` a commit (the one pushed outside serve tagged when serve committed
    on it) and ``ocibridge-refs``."""
    ref = f"{history.prefix}/{REPO}"
    shown = cli(history.root, "tags", ref)
    assert shown.returncode == 0, shown.stderr
    assert sorted(shown.stdout.split()) == ["dev", "latest", "v1"]
    every = cli(history.root, "tags", ref, "--all", "--json")
    assert every.returncode == 0, every.stderr
    assert sorted(json.loads(every.stdout)) == sorted(
        ["dev", "latest", "v1", "ocibridge-refs",
         *(f"ocibridge-commit-{c}" for c in [history.initial, *(c.oid for c in history.commits)])])
    old = json.loads(cli(history.root, "tags", f"{history.prefix}/acme/old", "--all", "--json").stdout)
    assert f"ocibridge-commit-{history.outside}" in old and len([t for t in old if "commit-" in t]) == 2


def test_list_repo_refs_tells_branches_from_tags_on_a_fresh_process(history):
    with serve_process(history.root, history.prefix, history.root / "cache-refs") as url:
        api = HfApi(endpoint=url, token=READER)
        refs = api.list_repo_refs(REPO)
        # pushed outside serve, no commit tag, never asked for by tag here: found among the tags
        plain = json.loads(cli(history.root, "inspect", f"{history.prefix}/acme/plain:v3", "--json").stdout)["digest"]
        assert api.model_info("acme/plain", revision=plain[7:47]).sha == plain[7:47]
        with pytest.raises(RevisionNotFoundError):  # its tag names another manifest: not this commit
            api.model_info("acme/plain", revision="1" * 40)
    heads = {c.branch: c.oid for c in history.commits}  # the last commit of each branch
    assert sorted((b.name, b.ref, b.target_commit) for b in refs.branches) == [
        ("dev", "refs/heads/dev", heads["dev"]), ("main", "refs/heads/main", heads["main"])]
    assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [("v1", "refs/tags/v1", history.commits[1].oid)]


def check_every_commit(url: str, history: History, hub: Path) -> None:
    """Every commit, by its id: model_info, list_repo_tree, snapshot_download and hf_hub_download
    byte for byte; list_repo_commits of each branch complete; the pages with the id."""
    api = HfApi(endpoint=url, token=READER)
    for commit in history.commits:
        assert api.model_info(REPO, revision=commit.oid).sha == commit.oid
        tree = {f.path for f in api.list_repo_tree(REPO, revision=commit.oid, recursive=True)}
        assert tree == set(commit.files)
        got = snapshot_download(REPO, revision=commit.oid, cache_dir=hub, endpoint=url, token=READER)
        assert files_of(Path(got)) == commit.files
        one = hf_hub_download(REPO, "model.safetensors", revision=commit.oid, cache_dir=hub / "one",
                              endpoint=url, token=READER)
        assert Path(one).read_bytes() == commit.files["model.safetensors"]
    main_ids = [c.oid for c in reversed(history.commits) if c.branch == "main"] + [history.initial]
    dev_ids = [c.oid for c in reversed(history.commits[:4])] + [history.initial]
    assert [c.commit_id for c in api.list_repo_commits(REPO)] == main_ids
    assert [c.commit_id for c in api.list_repo_commits(REPO, revision="dev")] == dev_ids
    first, second = history.commits[0].oid, history.commits[1].oid
    login = httpx.post(url + "/ocibridge/login", data={"token": READER, "next": "/"})
    jar = {"ocibridge_session": login.cookies["ocibridge_session"]}
    for page in (f"/{REPO}/tree/{second}", f"/{REPO}/blob/{second}/config.json", f"/{REPO}/commits/{second}",
                 f"/{REPO}/compare/{first}...{second}"):
        answer = httpx.get(url + page, cookies=jar)
        assert answer.status_code == 200 and second in answer.text, (page, answer.status_code)


def test_commit_ids_resolve_after_a_restart_and_on_another_process(history):
    """The first serve's cache, with a new process (a restart); then a process with its own
    empty cache: every id the first returned resolves, every commit downloads exactly."""
    with serve_process(history.root, history.prefix, history.root / "cache-a") as url:
        check_every_commit(url, history, history.root / "hub-restart")
    with serve_process(history.root, history.prefix, history.root / "cache-b") as url:
        check_every_commit(url, history, history.root / "hub-other")


def test_cli_takes_commit_ids(history):
    """pull, path, inspect and diff of ``REG/acme/m@<id>``, as processes; ``diff`` of two ids
    names the tensor that changed; a digest stays ``@sha256:``; an unknown id is one error line."""
    ref = f"{history.prefix}/{REPO}"
    first, second = history.commits[0], history.commits[1]
    diff = cli(history.root, "diff", f"{ref}@{first.oid}", f"{ref}@{second.oid}")
    assert diff.returncode == 0, diff.stderr
    assert "head" in diff.stdout and "embed" not in diff.stdout, diff.stdout
    pulled = cli(history.root, "pull", f"{ref}@{history.commits[3].oid}", str(history.root / "pulled"), "-q")
    assert pulled.returncode == 0, pulled.stderr
    assert files_of(history.root / "pulled") == history.commits[3].files
    path = cli(history.root, "path", f"{ref}@{first.oid}")
    assert path.returncode == 0, path.stderr
    assert files_of(Path(path.stdout.strip())) == first.files
    inspected = cli(history.root, "inspect", f"{ref}@{second.oid}", "--json")
    assert inspected.returncode == 0, inspected.stderr
    digest = json.loads(inspected.stdout)["digest"]
    assert digest.startswith(f"sha256:{second.oid}")
    assert cli(history.root, "inspect", f"{ref}@{digest}", "--json").returncode == 0
    # a manifest pushed outside serve has no commit tag: its id is found among the tags
    plain = f"{history.prefix}/acme/plain"
    untagged = json.loads(cli(history.root, "inspect", f"{plain}:v3", "--json").stdout)["digest"]
    found = cli(history.root, "inspect", f"{plain}@{untagged[7:47]}", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["digest"] == untagged, found.stderr
    assert f"ocibridge-commit-{untagged[7:47]}" not in cli(history.root, "tags", plain, "--all").stdout
    # a commit tag moved by hand onto another manifest (the fixture's) is not believed: one error line
    moved = cli(history.root, "inspect", f"{plain}@{'1' * 40}")
    assert moved.returncode != 0 and moved.stderr.count("\n") == 1 and "another manifest" in moved.stderr, moved.stderr
    unknown = cli(history.root, "inspect", f"{ref}@{'0' * 40}")
    assert unknown.returncode != 0 and unknown.stderr.count("\n") == 1, unknown.stderr
    assert "commit id" in unknown.stderr and "Traceback" not in unknown.stderr


def test_mount_takes_a_commit_id(history):
    """``ocibridge mount REG/acme/m@<id>`` (a process of its own) shows that commit's files, as
    pull of the same id writes them: an older commit of a branch whose head has moved on."""
    commit = history.commits[2]  # dev's first commit; dev's head is c3
    where = history.root / "mounted"
    with Mount(f"{history.prefix}/{REPO}@{commit.oid}", where, mount_env(history.root / "mount"),
               history.root / "mount.log"):
        assert files_of(where) == commit.files


def test_garbage_collection_keeps_every_commit(history):
    """Stop the registry, ``garbage-collect --delete-untagged`` its storage, start it again:
    every commit of both branches still downloads byte for byte through a fresh serve."""
    registry = history.registry
    said = garbage_collect(registry)
    assert "eligible for deletion" in said, said  # it collected something: the refs record's first version
    history.registry = RegistryProcess(registry.workdir)  # the same storage, a new port
    with serve_process(history.root, history.prefix, history.root / "cache-gc") as url:
        check_every_commit(url, history, history.root / "hub-gc")
