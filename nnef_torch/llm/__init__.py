"""Decoder-only language models (Hugging Face `transformers`) exported for tract with a key-value cache.

`export(model, path, *, target="tract", weights="f32" | "f16" | "q4_0")` writes one NNEF file that runs every step
of generation: the prompt with an empty cache (P = 0), then one token at a time with the caches it returned.

The I/O convention (`cache_io.py`), which runners can rely on:
- inputs, in order: `input_ids` (int64 [1, S]), then for each layer i `cache_key_i` and `cache_value_i`
  ([1, KV_HEADS, P, HEAD_DIM]);
- outputs, in order: `logits` ([1, S, VOCAB]), then for each layer i `new_cache_key_i` and `new_cache_value_i`
  ([1, KV_HEADS, P + S, HEAD_DIM]).
S (new tokens) and P (cached positions) are tract symbols.
"""
from __future__ import annotations

from nnef_torch.llm.cache_io import CacheLayout, DecoderWithCache, cache_layout
from nnef_torch.llm.export import WEIGHTS, export

__all__ = ["WEIGHTS", "CacheLayout", "DecoderWithCache", "cache_layout", "export"]
