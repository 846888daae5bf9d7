"""The I/O convention of an exported language model: a Hugging Face decoder wrapped so that its key-value cache
comes in and goes out as plain tensors, one key and one value per layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from nnef_torch.errors import ExportError


@dataclass(frozen=True)
class CacheLayout:
    """What the convention needs to know of a model: its layers, the cache's heads and head size, its vocabulary
    and the longest sequence its positions allow (S + P)."""

    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int

    def input_names(self) -> list[str]:
        return ["input_ids"] + [f"cache_{kind}_{i}" for i in range(self.layers) for kind in ("key", "value")]

    def output_names(self) -> list[str]:
        return ["logits"] + [f"new_cache_{kind}_{i}" for i in range(self.layers) for kind in ("key", "value")]

    def empty_cache(self, length: int = 0, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
        """The caches of P = `length` positions (zeros), in input order."""
        return [torch.zeros(1, self.kv_heads, length, self.head_dim, dtype=dtype) for _ in range(2 * self.layers)]


def cache_layout(model: nn.Module) -> CacheLayout:
    """The layout of `model`'s cache, read off one forward pass of one token (so that every family's own cache
    code decides it), and the vocabulary and position limit from its config."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "generate"):
        raise ExportError(f"{type(model).__name__} is not a Hugging Face model that generates text: pass a "
                          "transformers *ForCausalLM model (decoder-only)")
    if getattr(config, "is_encoder_decoder", False):
        raise ExportError(f"{type(model).__name__} is an encoder-decoder model; only decoder-only language models "
                          "(Llama, Qwen2, GPT-2, Mistral, Phi-3, SmolLM, ...) are exported with a cache")
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True)
    cache = getattr(out, "past_key_values", None)
    layers = list(getattr(cache, "layers", []) or [])
    if not layers or not all(getattr(layer, "keys", None) is not None for layer in layers):
        raise ExportError(f"{type(model).__name__} returned no key-value cache from a forward with use_cache=True")
    shape = tuple(layers[0].keys.shape)
    positions = next((getattr(text, name) for name in ("max_position_embeddings", "n_positions", "n_ctx")
                      if isinstance(getattr(text, name, None), int)), 4096)
    return CacheLayout(len(layers), shape[1], shape[3], int(out.logits.shape[-1]), positions)


class DecoderWithCache(nn.Module):
    """`model` called as the convention says: `forward(input_ids, *caches)` -> (logits, *new caches). The model's
    children are this module's children, so that its parameters keep their own state_dict names (the NNEF labels:
    `model/layers/0/self_attn/q_proj/weight`)."""

    def __init__(self, model: nn.Module, layout: CacheLayout):
        super().__init__()
        if model._parameters or model._buffers:
            raise ExportError(f"{type(model).__name__} holds tensors of its own outside its layers")
        for name, child in model.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "decoder", model)  # not a child: its tensors are already this module's
        self.layout = layout

    def forward(self, input_ids: torch.Tensor, *caches: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache()
        for i in range(self.layout.layers):
            cache.update(caches[2 * i], caches[2 * i + 1], i)
        out = self.decoder(input_ids=input_ids, past_key_values=cache, use_cache=True)
        results: list[Any] = [out.logits]
        for layer in out.past_key_values.layers:
            results += [layer.keys, layer.values]
        return tuple(results)
