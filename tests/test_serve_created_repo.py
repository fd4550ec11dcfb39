"""A repository made by ``create_repo`` and not yet committed to survives a serve restart (issue
55): serve writes nothing to the registry until the first commit (a repository holds exactly the
files its commits sent: no ``.gitattributes`` of serve's own), and keeps the repository as a marker
in its cache, not in memory, so the upload after the restart finds it."""

from __future__ import annotations

import os
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from serving import point_hub_at
from test_serve_publish import serve_process, tag_digest

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")


def test_a_created_repository_survives_a_restart_until_its_first_commit(tmp_path, registry, unique_repo,
                                                                        monkeypatch):
    prefix = f"{registry.host}/{unique_repo}"
    ref = f"{prefix}/acme/later:latest"
    with serve_process(tmp_path, prefix) as url:
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/later")
    assert tag_digest(ref) is None  # nothing written to the registry yet
    with serve_process(tmp_path, prefix) as url:  # the same cache, a new process
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        api = HfApi(endpoint=url, token="writer-token")
        with pytest.raises(HfHubHTTPError) as exists:
            api.create_repo("acme/later")
        assert exists.value.response.status_code == 409
        done = api.upload_file(path_or_fileobj=b"# later\n", path_in_repo="README.md", repo_id="acme/later")
        assert api.model_info("acme/later").sha == done.oid
        assert [s.rfilename for s in api.model_info("acme/later").siblings or []] == ["README.md"]
    assert tag_digest(ref) is not None
    assert not any((Path(os.environ["OCIBRIDGE_CACHE"]) / "serve" / "created").iterdir())
