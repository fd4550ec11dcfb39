"""A ref deleted or moved through serve stays deleted for every command (issue 90): serve moves
the registry tag of a deleted branch or tag (and every tag of a deleted or moved repository) to
its tombstone manifest, which names no file. ``pull``, ``path``, ``mount`` and ``cat`` of such a
tag refuse with one line (naming where a moved repository went) instead of "0 files", and
``tags`` leaves tombstoned tags out unless ``--all``. Real serve (a process) over a registry of
this module's own, real huggingface_hub writes, the CLI as a user runs it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from mounting import mount_env, run
from serving import own_registry_and_serve

from ocibridge.cli import main
from ocibridge.hubserver.repo.tombstone import DIGEST
from ocibridge.lazymount.mounttable import is_mounted
from ocibridge.stores.tombstones import TOMBSTONE_DIGEST

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
DELETED = "was deleted through serve (delete_branch, delete_tag or delete_repo)"


@dataclass
class Deleted:
    host: str  # the registry, host:port
    repo: str  # alice/kept: branch dev and tag v1 deleted, main kept
    old: str  # alice/oldname: moved to alice/renamed


@pytest.fixture(scope="module")
def deleted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deleted]:
    root = tmp_path_factory.mktemp("deletedrefs")
    with own_registry_and_serve(root, "alice-token user=alice write=alice/\n",
                                lambda host: [host, "--plain-http"]) as (url, registry):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
            api = HfApi(endpoint=url, token="alice-token")
            repo = api.create_repo("alice/kept").repo_id
            api.upload_file(repo_id=repo, path_in_repo="a.txt", path_or_fileobj=b"a")
            api.create_branch(repo, branch="dev")
            api.create_tag(repo, tag="v1")
            api.delete_branch(repo, branch="dev")
            api.delete_tag(repo, tag="v1")
            old = api.create_repo("alice/oldname").repo_id
            api.upload_file(repo_id=old, path_in_repo="b.txt", path_or_fileobj=b"b")
            api.move_repo(from_id=old, to_id="alice/renamed")
        yield Deleted(registry.host, repo, old)


def test_the_cli_knows_serves_tombstone_without_importing_serve():
    assert TOMBSTONE_DIGEST == DIGEST


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_pull_and_path_of_a_deleted_branch_or_tag_refuse_saying_so(deleted, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    for tag in ("dev", "v1"):
        ref = f"{deleted.host}/{deleted.repo}:{tag}"
        assert main(["pull", ref, str(tmp_path / tag), "--plain-http"]) == 1
        assert one_error(capsys) == f"ocibridge: error: {ref} {DELETED}"
        assert not (tmp_path / tag).exists() or not any((tmp_path / tag).iterdir())
        assert main(["path", ref, "--plain-http"]) == 1
        assert one_error(capsys) == f"ocibridge: error: {ref} {DELETED}"
    assert main(["pull", f"{deleted.host}/{deleted.repo}:latest", str(tmp_path / "main"), "--plain-http"]) == 0
    assert (tmp_path / "main" / "a.txt").read_bytes() == b"a"  # the kept branch still pulls
    typo = f"{deleted.host}/{deleted.repo}:de"
    assert main(["pull", typo, str(tmp_path / "typo"), "--plain-http"]) == 1
    assert one_error(capsys).endswith("its tags: latest")  # no deleted tag offered as the nearest


def test_a_moved_repository_names_where_it_went(deleted, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    ref = f"{deleted.host}/{deleted.old}:latest"
    assert main(["pull", ref, str(tmp_path / "out"), "--plain-http"]) == 1
    assert one_error(capsys) == f"ocibridge: error: {ref} {DELETED}; the repository moved to alice/renamed"
    assert main(["cat", ref, "b.txt", "--plain-http"]) == 1
    assert one_error(capsys).endswith("; the repository moved to alice/renamed")
    assert main(["inspect", ref, "--plain-http"]) == 1
    assert one_error(capsys).endswith("; the repository moved to alice/renamed")


def test_mount_of_a_deleted_tag_refuses_and_mounts_nothing(deleted, tmp_path):
    where = tmp_path / "mnt"
    where.mkdir()
    ref = f"{deleted.host}/{deleted.repo}:dev"
    env = mount_env(tmp_path / "env")
    done = run(["mount", ref, str(where), "--plain-http"], env, check=False)
    mounted = is_mounted(where)
    if mounted:  # (what it must not do: undone, then failed below)
        run(["umount", str(where)], env)
    assert done.returncode == 1 and not mounted
    assert done.stderr.strip().splitlines()[-1] == f"ocibridge: error: {ref} {DELETED}", done.stderr


def test_tags_leaves_deleted_tags_out_unless_all(deleted, capsys):
    repo = f"{deleted.host}/{deleted.repo}"
    assert main(["tags", repo, "--plain-http"]) == 0
    assert capsys.readouterr().out.split() == ["latest"]
    assert main(["tags", repo, "--plain-http", "--all"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"latest", "dev", "v1"} <= set(listed)
