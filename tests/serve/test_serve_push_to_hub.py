"""transformers' ``push_to_hub`` through ``ocibridge serve`` (issue 55), as a user runs it:
``HF_ENDPOINT`` at serve and a write token, no torch. A config (``PretrainedConfig.push_to_hub``)
and a tokenizers-backed ``PreTrainedTokenizerFast`` are pushed, loaded back by repo id through
the same serve, and ``ocibridge pull`` of the branch's tag gives the files transformers wrote,
over Xet (hf_xet, huggingface_hub's default) and over LFS (``HF_HUB_DISABLE_XET=1``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from serving import files_of, published_files_of
from support.publishing import serve_process

from ocibridge.cli import main

#: what the user's program does: push a config and a tokenizer, load both back by repo id, and
#: save what it pushed (save_pretrained: the files push_to_hub uploads) for the comparison
PROGRAM = r"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoTokenizer, BertConfig, PreTrainedTokenizerFast

repo, token, saved, protocol = sys.argv[1:5]
if protocol == "xet":  # the files must go over Xet: the LFS batch API is not to be asked
    from huggingface_hub import _commit_api

    def no_lfs(*args, **kwargs):
        raise AssertionError("the LFS batch API was used: this run is of Xet uploads")

    _commit_api.post_lfs_batch_info = no_lfs
config = BertConfig(vocab_size=6, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64)
config.push_to_hub(repo, token=token, commit_message="the config")
vocab = {"[UNK]": 0, "[PAD]": 1, "hello": 2, "world": 3, "oci": 4, "models": 5}
backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
backend.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")
tokenizer.push_to_hub(repo, token=token, commit_message="the tokenizer")
config.save_pretrained(saved)
tokenizer.save_pretrained(saved)
loaded = AutoConfig.from_pretrained(repo, token=token)
back = AutoTokenizer.from_pretrained(repo, token=token)
from huggingface_hub import HfApi

info = HfApi(token=token).model_info(repo)  # what the Hub's model page and `hf models info` read
print(json.dumps({"hidden_size": loaded.hidden_size, "model_type": loaded.model_type,
                  "ids": back("hello oci models")["input_ids"], "tags": info.tags,
                  "library_name": info.library_name, "config": info.config}))
"""


@pytest.mark.parametrize("xet", [True, False], ids=["xet", "lfs"])
def test_transformers_push_to_hub_through_serve(tmp_path, registry, unique_repo, xet):
    prefix = f"{registry.host}/{unique_repo}"
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_TOKEN", None)
    if not xet:
        env["HF_HUB_DISABLE_XET"] = "1"
    with serve_process(tmp_path, prefix) as url:
        env["HF_ENDPOINT"] = url
        run = subprocess.run([sys.executable, "-c", PROGRAM, "acme/tok", "writer-token", str(tmp_path / "saved"),
                              "xet" if xet else "lfs"],
                             env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        log = (tmp_path / "serve.log").read_text()
    read = json.loads(run.stdout.strip().splitlines()[-1])
    assert (read["hidden_size"], read["model_type"], read["ids"]) == (32, "bert", [2, 4, 5]), read
    # model_info as the Hub derives it (issue 90, item 7): the config's model_type, among the tags
    assert read["config"] == {"model_type": "bert"} and "bert" in read["tags"], read
    assert "Traceback" not in log
    ref = f"{prefix}/acme/tok:latest"
    assert main(["pull", ref, str(tmp_path / "pulled"), "-q"]) == 0
    pulled = published_files_of(tmp_path / "pulled")  # the first commit's .gitattributes checked
    saved = files_of(tmp_path / "saved")
    assert {k: v for k, v in pulled.items() if k in saved} == saved  # transformers' files, byte for byte
    assert set(pulled) - set(saved) <= {"README.md"}  # and nothing else (a card is the client's)
    assert main(["validate", ref, "--strict"]) == 0
