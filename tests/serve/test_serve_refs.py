"""serve and tags (issue 53, item 5): ``list_repo_refs`` as the Hub answers it, dates from the
artifact (not the request's time), and ``/readyz`` not ready when every read is refused."""

from __future__ import annotations

import time

import httpx
from huggingface_hub import HfApi
from serving import serving

from ocibridge.cli import main
from tests.modelgen import make_bert_model

CREATED = "2024-05-01T12:34:56Z"


def test_list_repo_refs_names_main_and_every_tag_with_its_commit(tmp_path, registry, unique_repo, capsys):
    """main is the default tag, every other tag is a tag (no refs record: none is a branch),
    each with the commit serve answers for it."""
    src = make_bert_model(tmp_path / "tiny")
    ref = f"{registry.host}/{unique_repo}/acme/tiny"
    assert main(["push", str(src), f"{ref}:latest", "-q"]) == 0
    assert main(["tag", f"{ref}:latest", "v1"]) == 0
    (src / "extra" / "notes.md").write_text("changed\n")
    assert main(["push", str(src), f"{ref}:v2", "-q"]) == 0
    capsys.readouterr()
    with serving([f"{registry.host}/{unique_repo}"]) as served:
        api = HfApi(endpoint=served.url, token=False)
        refs = api.list_repo_refs("acme/tiny")
        commits = {t: api.model_info("acme/tiny", revision=t).sha for t in ("latest", "v1", "v2")}
        assert [(b.name, b.ref, b.target_commit) for b in refs.branches] == [
            ("main", "refs/heads/main", commits["latest"])]
        assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [  # latest is main's: no tag
            ("v1", "refs/tags/v1", commits["v1"]), ("v2", "refs/tags/v2", commits["v2"])]
        assert refs.converts == [] and commits["v2"] != commits["v1"]
        # a commit listed is a revision serve takes
        assert api.model_info("acme/tiny", revision=commits["v2"]).sha == commits["v2"]
        missing = httpx.get(f"{served.url}/api/models/acme/none/refs")
        assert missing.status_code == 404 and missing.headers["x-error-code"] == "RepoNotFound"
    with serving([f"{registry.host}/{unique_repo}"], default_tag="v9") as served:
        refs = HfApi(endpoint=served.url, token=False).list_repo_refs("acme/tiny")
        assert refs.branches == [] and len(refs.tags) == 3  # no default tag: no main branch


def test_dates_come_from_the_artifact_not_the_request(tmp_path):
    """lastModified and createdAt: the config's createdAt; else the manifest's created
    annotation; else left out (unknown), never the time of the request."""
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(tmp_path / "lay", create=True)
    lay = f"oci:{tmp_path}/lay"
    assert main(["push", str(make_bert_model(tmp_path / "a")), f"{lay}:acme/dated:latest", "-q",
                 "--created", CREATED]) == 0
    assert main(["push", str(make_bert_model(tmp_path / "b")), f"{lay}:acme/annotated:latest", "-q",
                 "--annotation", "org.opencontainers.image.created=2023-01-02T03:04:05.678Z"]) == 0
    assert main(["push", str(make_bert_model(tmp_path / "c")), f"{lay}:acme/undated:latest", "-q"]) == 0
    with serving([lay]) as served:
        api = HfApi(endpoint=served.url, token=False)
        first = httpx.get(f"{served.url}/api/models/acme/dated").json()
        time.sleep(1.1)
        second = httpx.get(f"{served.url}/api/models/acme/dated").json()
        assert first["lastModified"] == second["lastModified"] == "2024-05-01T12:34:56.000Z"
        assert first["createdAt"] == second["createdAt"] == "2024-05-01T12:34:56.000Z"
        info = api.model_info("acme/dated")
        assert info.created_at is not None and info.created_at.isoformat() == "2024-05-01T12:34:56+00:00"
        assert api.model_info("acme/annotated").last_modified.isoformat() == "2023-01-02T03:04:05.678000+00:00"
        undated = httpx.get(f"{served.url}/api/models/acme/undated").json()
        time.sleep(1.1)
        assert httpx.get(f"{served.url}/api/models/acme/undated").json().get("lastModified") == undated.get(
            "lastModified")


def test_readyz_is_not_ready_when_the_registry_refuses_every_read(auth_registry):
    """A registry that answers 401 to every read serves nothing: /readyz says so (503), naming
    the missing credentials; with them, ready."""
    with serving([f"{auth_registry.host}/models"]) as served:
        answer = httpx.get(f"{served.url}/readyz")
        assert answer.status_code == 503, answer.text
        assert "no credentials were sent" in answer.json()["problems"][0]
        assert httpx.get(f"{served.url}/healthz").status_code == 200
