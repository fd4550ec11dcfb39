"""A repository ``create_repo`` made is in the registry at once (issue 74, before issue 55's
cache markers): its first commit, the Hub's ``.gitattributes``, is written before the answer, so
a serve started again on an empty cache, or any other replica, knows it, and the first upload
after the restart lands on it."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from serving import point_hub_at
from support.publishing import serve_process, tag_digest

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")


def test_a_created_repository_is_in_the_registry_at_once_and_survives_a_restart(tmp_path, registry, unique_repo,
                                                                               monkeypatch):
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/later:latest"
    with serve_process(tmp_path, prefix) as url:
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/later")
        first = api.model_info("acme/later").sha
    assert tag_digest(ref) is not None and tag_digest(ref).split(":")[1][:40] == first  # type: ignore[union-attr]
    (tmp_path / "ocibridge-cache").rename(tmp_path / "old-cache")  # nothing of the first serve's is kept
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        api = HfApi(endpoint=url, token="writer-token")
        with pytest.raises(HfHubHTTPError) as exists:
            api.create_repo("acme/later")
        assert exists.value.response.status_code == 409
        done = api.upload_file(path_or_fileobj=b"# later\n", path_in_repo="README.md", repo_id="acme/later")
        assert api.model_info("acme/later").sha == done.oid
        assert [s.rfilename for s in api.model_info("acme/later").siblings or []] == [".gitattributes", "README.md"]
        assert [c.commit_id for c in api.list_repo_commits("acme/later")][1] == first
    assert not Path(tmp_path / "ocibridge-cache" / "serve" / "created").exists()  # no marker is made any more
