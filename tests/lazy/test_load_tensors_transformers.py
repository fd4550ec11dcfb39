"""A transformers model built from the registry alone (issue 89): its config read with
``ocibridge.cat``, its weights with ``load_tensors(framework="torch")``, given to transformers'
own loader as a state dict; it computes the same logits, and generates the same tokens, as
``from_pretrained`` of the directory ``ocibridge pull`` wrote. A tiny Llama (2 layers, hidden
64), made here, with its embeddings tied (lm_head not in the file) and untied, float32 and bf16."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from support.fixtures import new_repo

import ocibridge


def tiny_llama(tied: bool, dtype: torch.dtype) -> transformers.PreTrainedModel:
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=tied)
    torch.manual_seed(89)
    return transformers.LlamaForCausalLM(config).to(dtype)


@pytest.mark.parametrize(("tied", "dtype", "device"), [(False, torch.float32, None), (True, torch.bfloat16, "cpu")])
def test_a_model_built_from_the_registry_computes_what_from_pretrained_does(registry, tmp_path, tied, dtype, device):
    src, pulled = tmp_path / "src", tmp_path / "pulled"
    tiny_llama(tied, dtype).save_pretrained(src)
    ref = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1").reference
    ocibridge.pull(ref, str(pulled))
    want = transformers.AutoModelForCausalLM.from_pretrained(pulled).eval()

    config = transformers.AutoConfig.for_model(**json.loads(ocibridge.cat(ref, "config.json")))
    weights = ocibridge.load_tensors(ref, framework="torch", device=device)
    assert ("lm_head.weight" in weights) is not tied and {t.dtype for t in weights.values()} == {dtype}
    model = getattr(transformers, config.architectures[0]).from_pretrained(None, config=config, state_dict=weights)
    model.eval()

    ids = torch.tensor([[1, 5, 9, 17, 33, 65, 127]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, want(ids).logits)
        made = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        assert torch.equal(made, want.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False))
    assert made.shape == (1, ids.shape[1] + 8)
