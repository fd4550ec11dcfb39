"""Model cards checked as the Hub checks them (issue 75): ``POST /api/validate-yaml``, which
huggingface_hub's ``ModelCard.validate``, ``metadata_update`` and a ``create_commit`` of a
README.md ask, refuses an unknown license, a malformed metadata block and a malformed
model-index, and warns on a card without metadata; the model page says the same of a card.
huggingface_hub's own expectations (tests/test_repocard.py, test_hf_api.py), through serve over the
real registry."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, ModelCard, metadata_update
from serving import Served, point_hub_at, serving

from ocibridge.cli import main
from ocibridge.hubserver.cards import LICENSES, read_card
from ocibridge.hubserver.repo.publishing import Publishing
from tests.modelgen import make_bert_model

#: huggingface_hub's own LFS upload passes bytes as data= to httpx, which warns (not ours)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

REPO = "acme/carded"
GOOD = """---
license: mit
tags:
- text-classification
model-index:
- name: carded
  results:
  - task:
      type: text-classification
    dataset:
      type: glue
      name: GLUE
      config: sst2
    metrics:
    - type: accuracy
      value: 0.9
---

# Carded
"""
#: huggingface_hub's INVALID_MODELCARD (tests/test_hf_api.py)
INVALID_MODEL_INDEX = "---\nmodel-index: foo\n---\n\nThis is a modelcard with an invalid metadata section.\n"


@pytest.fixture
def served(registry: Any, unique_repo: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """serve with a token file (a writer only: nobody reads without a token), huggingface_hub
    pointed at it (ModelCard.validate asks HF_ENDPOINT), uploads over LFS."""
    with serving([f"{registry.host}/{unique_repo}"], tokens=("writer write * ci-bot",), publish=Publishing()) as s:
        point_hub_at(monkeypatch, s.url, tmp_path / "hub")
        # the functions of the module (metadata_update's upload_file) use one HfApi made at import
        monkeypatch.setattr(huggingface_hub.hf_api.api, "endpoint", s.url)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        HfApi(endpoint=s.url, token="writer").create_repo(REPO)
        yield s


def test_model_card_validate_refuses_an_unknown_license_as_the_hub_does(served):
    """huggingface_hub's test_validate_repocard: a good card passes; ``license: asdf`` raises
    ``ValueError('- Error: "license" must be one of ...')``. ModelCard.validate sends no token:
    the check reads no repository, so a server with a token file answers it."""
    ModelCard(GOOD).validate()
    card = ModelCard(GOOD)
    card.data.license = "asdf"
    with pytest.raises(ValueError, match='- Error: "license" must be one of') as refused:
        card.validate()
    assert "apache-2.0, mit, openrail" in str(refused.value) and str(refused.value).endswith("other]")
    with pytest.raises(ValueError, match=re.escape('"license[1]" must be one of')):
        ModelCard("---\nlicense:\n- mit\n- asdf\n---\n").validate()
    ModelCard("---\nlicense:\n- mit\n- cc-by-4.0\n---\n").validate()  # a list of known ones


def test_metadata_update_with_an_unknown_license_fails_and_commits_nothing(served):
    api = HfApi(endpoint=served.url, token="writer")
    api.upload_file(path_or_fileobj=GOOD.encode(), path_in_repo="README.md", repo_id=REPO)
    before = api.model_info(REPO).sha
    with pytest.raises(ValueError, match='"license" must be one of'):
        metadata_update(REPO, {"license": "asdf"}, overwrite=True, token="writer")
    assert api.model_info(REPO).sha == before
    metadata_update(REPO, {"license": "apache-2.0"}, overwrite=True, token="writer")
    card = ModelCard.load(REPO, token="writer")
    assert card.data.license == "apache-2.0" and api.model_info(REPO).sha != before


def test_a_commit_of_a_malformed_card_fails_before_any_upload(served):
    """huggingface_hub's test_commit_modelcard_invalid_metadata: create_commit asks validate-yaml
    first and raises ``Invalid metadata in README.md``; so does a block YAML cannot parse, an
    empty block, and a model-index result without its metrics. Nothing is committed."""
    api = HfApi(endpoint=served.url, token="writer")
    api.upload_file(path_or_fileobj=b"kept", path_in_repo="keep.txt", repo_id=REPO)
    cards = {INVALID_MODEL_INDEX: '"model-index" must be an array',
             "---\nlicense: [mit\n---\n": "Invalid YAML in README.md: ",
             "---\n\n---\n# empty\n": "The YAML metadata of your README.md is invalid.",
             "---\n- a\n---\n": '"value" must be of type object',
             GOOD.replace("    metrics:\n    - type: accuracy\n      value: 0.9\n", ""):
                 '"model-index[0].results[0].metrics" is required',
             GOOD.replace("      name: GLUE\n", ""): '"model-index[0].results[0].dataset.name" is required',
             GOOD.replace("      config: sst2", "      config: 2"):
                 '"model-index[0].results[0].dataset.config" must be a string'}
    for card, why in cards.items():
        with pytest.raises(ValueError, match="Invalid metadata in README.md") as refused:
            api.create_commit(REPO, operations=[CommitOperationAdd("README.md", card.encode()),
                                                CommitOperationAdd("lfs.bin", b"content")], commit_message="bad")
        assert why in str(refused.value), (card, str(refused.value))
    assert api.list_repo_files(REPO) == [".gitattributes", "keep.txt"]


def test_a_card_without_metadata_is_committed_with_the_hubs_warning(served):
    api = HfApi(endpoint=served.url, token="writer")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api.upload_file(path_or_fileobj=b"# No metadata\n", path_in_repo="README.md", repo_id=REPO)
    said = [str(w.message) for w in caught if "validating metadata" in str(w.message)]
    assert said == ["Warnings while validating metadata in README.md:\n"
                    "- empty or missing yaml metadata in repo card"], said
    assert api.list_repo_files(REPO) == [".gitattributes", "README.md"]
    answer = httpx.post(f"{served.url}/api/validate-yaml", json={"content": "---\n{}\n---\n", "repoType": "model"})
    assert answer.status_code == 200 and answer.json()["warnings"][0]["message"].startswith("empty or missing")


def test_the_model_page_says_what_the_check_says_of_its_card(tmp_path, registry, unique_repo):
    """A card pushed outside serve (no check on the way): its page shows the Hub's words above it,
    and the metadata it could read."""
    prefix = f"{registry.host}/{unique_repo}"
    src = make_bert_model(tmp_path / "tiny")
    (src / "README.md").write_text("---\nlicense: asdf\nbase_model: google/bert-tiny\n---\n# Tiny\n")
    assert main(["push", str(src), f"{prefix}/acme/tiny:latest", "-q"]) == 0
    with serving([prefix]) as s:
        html = httpx.get(f"{s.url}/acme/tiny", timeout=30).text
    assert 'class="note card-problem">YAML Metadata Error: &#34;license&#34; must be one of [apache-2.0' in html
    assert re.search(r"<th scope=\"row\">base_model</th><td>google/bert-tiny</td>", html)


def test_the_license_list_and_the_card_reading():
    """The list is the Hub's (its documented identifiers, ``other`` last); the page and the check
    read one block the same way."""
    assert LICENSES[:3] == ("apache-2.0", "mit", "openrail") and LICENSES[-1] == "other" and len(set(LICENSES)) == 83
    read = read_card("---\nlicense: mit\n---\n# Body\n")
    assert read.front == {"license": "mit"} and read.body == "# Body\n" and not read.errors and not read.warnings
    assert read_card("# Body\n").warnings and read_card("# Body\n").body == "# Body\n"
    assert read_card("---\nmodel-index: foo\n---\n", repo_type="dataset").errors == ()  # a model card's field
