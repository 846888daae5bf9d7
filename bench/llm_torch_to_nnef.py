"""Export a Hugging Face decoder-only language model with torch_to_nnef's generic `TractNNEF` target, in the KV-cache
I/O convention of the tract_transformers fixtures (tests/formats/tract_transformers/make_fixtures.py). The LLM
benchmark uses torch_to_nnef_llm's own exporter instead, as its users run it.

Inputs: `input_ids` int64 [1, S], then for each layer i `cache_key_i`, `cache_value_i` [1, KV_HEADS, P, HEAD_DIM].
Outputs: `logits` [1, S, VOCAB], then each layer's updated caches [1, KV_HEADS, P + S, HEAD_DIM].
S and P are tract symbols (`dynamic_axes`). With `tract_transformers=True` attention is written as
`tract_transformers_sdpa` (and a `torch.nn.functional.rms_norm` as `tract_transformers_rms_norm`); with
`weights="q4_0"` the Linear weights are quantized by torch_to_nnef's own `quantize_weights_min_max_Q4_0`.

torch_to_nnef wants a tract binary, which it downloads; offline a stub script that prints the version stands in
(no IO check is run). torch_to_nnef is imported only when exporting.
"""
from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

import torch
from torch import nn

TRACT_VERSION = "0.23.8"
WEIGHTS = ("f32", "q4_0")


def model_dims(config) -> tuple[int, int, int]:
    """(layers, KV heads, head dim) of a transformers decoder config (GPT-2's names included)."""
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    heads = getattr(config, "num_attention_heads", None) or config.n_head
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    hidden = getattr(config, "hidden_size", None) or config.n_embd
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    return layers, kv_heads, head_dim


class KVCacheLM(nn.Module):
    """`hf_model` with flat tensors in and out: (input_ids, k0, v0, k1, v1, ...) -> (logits, k0', v0', ...)."""

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.model = hf_model
        self.layers = model_dims(hf_model.config)[0]

    def forward(self, input_ids: torch.Tensor, *caches: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            keys, values = caches[2 * i], caches[2 * i + 1]
            cache.update(keys[:, :, :0], values[:, :, :0], i)  # the layer set up empty, then holding the past:
            cache.layers[i].keys, cache.layers[i].values = keys, values  # no concat with a 1-D empty tensor
        out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True)
        result = [out.logits]
        for layer in out.past_key_values.layers[:self.layers]:
            result += [layer.keys, layer.values]
        return tuple(result)


def io_names(layers: int) -> tuple[list[str], list[str]]:
    caches = [f"cache_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    return ["input_ids", *caches], ["logits", *(f"{name}_out" for name in caches)]


def example_inputs(config, s: int = 3, p: int = 2, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded inputs at S = s, P = p."""
    layers, kv_heads, head_dim = model_dims(config)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, config.vocab_size, (1, s), generator=gen)
    return (ids, *(torch.randn(1, kv_heads, p, head_dim, generator=gen) for _ in range(2 * layers)))


ATTENTION = "sdpa_additive_mask"


def use_additive_mask_sdpa() -> str:
    """Register (once) and name a transformers attention that calls `F.scaled_dot_product_attention` (exported as
    `tract_transformers_sdpa`) with an additive float mask: tract adds the mask to the scores and refuses a
    boolean one ("Mask must be floating point"), while transformers' own "sdpa" builds a boolean mask."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(ATTENTION, sdpa_attention_forward)
    AttentionMaskInterface.register(ATTENTION, eager_mask)
    return ATTENTION


def _conv1d_as_linear(model: nn.Module) -> None:
    """GPT-2's `Conv1D` layers (x @ W + b, W [in, out]) as the `nn.Linear` they amount to: torch_to_nnef 0.24.12
    fails on the `addmm` they trace to with torch 2.13 (and Q4_0 quantizes Linear weights only)."""
    from transformers.pytorch_utils import Conv1D

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                linear = nn.Linear(child.weight.shape[0], child.weight.shape[1])
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    linear.bias.copy_(child.bias)
                setattr(parent, name, linear)


def _stub_tract(folder: Path) -> Path:
    path = folder / "tract"
    path.write_text(f"#!/bin/sh\necho tract {TRACT_VERSION}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def export_with_torch_to_nnef(hf_model: nn.Module, path: str | os.PathLike, *, weights: str = "f32",
                              tract_transformers: bool = True, example_s: int = 3, example_p: int = 2) -> Path:
    """Write `hf_model` (eval mode, not modified) as an NNEF folder at `path` and return it."""
    import copy

    from torch_to_nnef import TractNNEF, export_model_to_nnef

    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    model = copy.deepcopy(hf_model).eval()
    model.config._attn_implementation = use_additive_mask_sdpa()
    _conv1d_as_linear(model)
    if weights == "q4_0":
        from torch_to_nnef.compress import quantize_weights_min_max_Q4_0

        model = quantize_weights_min_max_Q4_0(model)
    wrapper = KVCacheLM(model).eval()
    inputs, outputs = io_names(wrapper.layers)
    dynamic = {"input_ids": {1: "S"}, **{name: {2: "P"} for name in inputs[1:]}}
    args = example_inputs(model.config, example_s, example_p)
    path = Path(path)
    base = path if path.name.endswith(".nnef") else path.with_name(path.name + ".nnef")
    with tempfile.TemporaryDirectory() as tmp:
        inference = TractNNEF(TRACT_VERSION, specific_tract_binary_path=_stub_tract(Path(tmp)), check_io=False,
                              dump_identity_properties=False, reify_sdpa_operator=tract_transformers,
                              dynamic_axes=dynamic)
        with torch.no_grad():
            export_model_to_nnef(wrapper, args, base, inference_target=inference, input_names=inputs,
                                 output_names=outputs, compression_level=None, log_level=logging.WARNING)
    if base != path:
        base.rename(path)
    return path


__all__ = ["KVCacheLM", "example_inputs", "export_with_torch_to_nnef", "io_names", "model_dims"]
