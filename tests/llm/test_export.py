"""`nnef_torch.llm.export`: transformers' own decoder code (random weights, no downloads) exported with a key-value
cache; greedy decoding in tract and in `nnef_torch.load` of the file equals `model.generate(do_sample=False)`
token for token, and prefill logits match transformers within 1e-4 at several (S, P)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ExportError
from nnef_torch.llm import export

transformers = pytest.importorskip("transformers", reason="the `transformers` package (test extra) is not installed")
tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")

SMALL = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=128)


def make(family: str) -> torch.nn.Module:
    torch.manual_seed({"llama": 0, "qwen2": 1, "gpt2": 2, "mistral": 3, "phi3": 4}[family])
    if family == "llama":  # grouped-query attention: 4 query heads read 2 cached ones
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **SMALL))
    elif family == "qwen2":  # biases on q, k and v
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(num_key_value_heads=2, **SMALL))
    elif family == "gpt2":  # learned positions, fused qkv, tied head
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=96,
                                                                     n_positions=64))
    elif family == "mistral":
        model = transformers.MistralForCausalLM(transformers.MistralConfig(num_key_value_heads=2, **SMALL))
    else:  # phi3: fused qkv, rotary over the whole head (an empty pass-through part)
        model = transformers.Phi3ForCausalLM(transformers.Phi3Config(num_key_value_heads=2, pad_token_id=0, **SMALL))
    return model.eval()


def greedy(step, layout, prompt: torch.Tensor, count: int) -> list[int]:
    """`count` tokens decoded greedily by `step(ids, caches) -> (logits, caches)`, from an empty cache."""
    ids, caches, tokens = prompt, layout.empty_cache(), []
    for _ in range(count):
        logits, caches = step(ids, caches)
        tokens.append(int(np.asarray(logits)[0, -1].argmax()))
        ids = torch.tensor([[tokens[-1]]])
    return tokens


def tract_step(path: Path):
    runnable = tract.nnef().with_tract_transformers().with_tract_extra().load(str(path)).into_runnable()

    def step(ids, caches):
        out = [o.to_numpy() for o in runnable.run([np.asarray(ids), *[np.asarray(c) for c in caches]])]
        return out[0], out[1:]
    return step


def module_step(module):
    def step(ids, caches):
        with torch.no_grad():
            out = module(torch.as_tensor(ids), *[torch.as_tensor(c) for c in caches])
        return out[0].numpy(), list(out[1:])
    return step


def expected_tokens(model, prompt: torch.Tensor, count: int) -> list[int]:
    out = model.generate(prompt, max_new_tokens=count, min_new_tokens=count, do_sample=False, pad_token_id=0)
    return out[0, prompt.shape[1]:].tolist()


FAMILIES = ["llama", pytest.param("qwen2", marks=pytest.mark.slow), pytest.param("gpt2", marks=pytest.mark.slow),
            pytest.param("mistral", marks=pytest.mark.slow), pytest.param("phi3", marks=pytest.mark.slow)]


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_in_tract_and_in_the_loaded_module_equals_generate(family: str, tmp_path: Path) -> None:
    model = make(family)
    layout = export(model, tmp_path / family)
    prompt = torch.randint(0, 96, (1, 7), generator=torch.Generator().manual_seed(7))
    expected = expected_tokens(model, prompt, 12)
    assert greedy(tract_step(tmp_path / family), layout, prompt, 12) == expected, "tract"
    assert greedy(module_step(nnef_torch.load(tmp_path / family)), layout, prompt, 12) == expected, "nnef_torch"


@pytest.mark.parametrize("family", ["llama", pytest.param("gpt2", marks=pytest.mark.slow)])
def test_logits_and_caches_match_transformers_at_several_lengths(family: str, tmp_path: Path) -> None:
    model = make(family)
    layout = export(model, tmp_path / family)
    step = tract_step(tmp_path / family)
    for s, p in [(1, 0), (9, 0), (1, 13), (4, 6), (16, 40)]:
        ids = torch.randint(0, 96, (1, p + s), generator=torch.Generator().manual_seed(s * 100 + p))
        with torch.no_grad():
            past = model(ids[:, :p], use_cache=True).past_key_values if p else None
            caches = [t for layer in past.layers for t in (layer.keys, layer.values)] if p else layout.empty_cache()
            reference = model(ids, use_cache=True)
        logits, new = step(ids[:, p:], caches)
        np.testing.assert_allclose(logits, reference.logits[:, p:].numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=f"logits at S={s}, P={p}")
        for got, layer in zip(new[::2], reference.past_key_values.layers):
            assert got.shape == (1, layout.kv_heads, p + s, layout.head_dim)
            np.testing.assert_allclose(got, layer.keys.numpy(), rtol=1e-4, atol=1e-5)


def test_the_file_declares_the_convention(tmp_path: Path) -> None:
    model = make("llama")
    layout = export(model, tmp_path / "llama")
    text = (tmp_path / "llama" / "graph.nnef").read_text()
    assert "extension tract_symbol S;" in text and "extension tract_symbol P;" in text
    assert "extension tract_assert P >= 0;" in text
    header = "( input_ids, cache_key_0, cache_value_0, cache_key_1, cache_value_1 ) -> ( logits, new_cache_key_0, " \
             "new_cache_value_0, new_cache_key_1, new_cache_value_1 )"
    assert header in text
    assert "input_ids = external<integer>(shape = [1, S])" in text
    assert f"cache_key_0 = external<scalar>(shape = [1, {layout.kv_heads}, P, {layout.head_dim}])" in text
    assert "label = 'model/layers/0/self_attn/q_proj/weight'" in text  # transformers' own state_dict names


def test_what_cannot_be_exported_is_named() -> None:
    with pytest.raises(ExportError, match="not a Hugging Face model"):
        export(torch.nn.Linear(2, 2), "unused")
    with pytest.raises(ExportError, match="weights='q8'"):
        export(make("llama"), "unused", weights="q8")
    with pytest.raises(ExportError, match="target='standard'"):
        export(make("llama"), "unused", target="standard")
    with pytest.raises(ExportError, match=r"model.float\(\)"):
        export(make("llama").half(), "unused")
    config = transformers.T5Config(d_model=32, d_ff=32, num_layers=1, num_heads=2, vocab_size=64, d_kv=16)
    with pytest.raises(ExportError, match="encoder-decoder"):
        export(transformers.T5ForConditionalGeneration(config), "unused")
