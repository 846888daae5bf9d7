"""`nnef_torch.llm.export`: a Hugging Face decoder-only model as one NNEF file for tract that runs every step of
generation, with symbolic S (new tokens) and P (cached positions)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from nnef_torch.errors import ExportError
from nnef_torch.exporter.export import export as export_module
from nnef_torch.llm.cache_io import CacheLayout, DecoderWithCache, cache_layout
from nnef_torch.llm.weights import conv1d_as_linear, store, without_fake_quantization

WEIGHTS = ("f32", "f16", "q4_0")
TARGETS = ("tract",)
GQA_SWITCH = "TRANSFORMERS_SDPA_FORCE_GQA"
EXAMPLE_S, EXAMPLE_P = 3, 5  # the trace's lengths: distinct, and above 1 (torch.export specializes 0 and 1)


def export(model: nn.Module, path: str | os.PathLike, *, target: str = "tract", weights: str = "f32",
           progress: bool | None = None) -> CacheLayout:
    """Write `model` (a transformers *ForCausalLM, float32) to `path` (a folder or a .tgz) for tract, with the
    cache I/O convention of `nnef_torch.llm` (inputs `input_ids`, `cache_key_i`, `cache_value_i`; outputs
    `logits`, `new_cache_key_i`, `new_cache_value_i`). Returns the cache layout (layers, KV heads, head size).

    weights: how the variables are stored; the graph computes in float32 whichever is chosen.
    - 'f32': as they are;
    - 'f16': every float variable as float16 (half the size);
    - 'q4_0': each linear layer's weight in tract's Q4_0 blocks (32 values, one float16 scale: 4.5 bits per
      weight), the rest as float32. A weight under 4-bit quantization-aware training
      (`nnef_torch.quant.prepare_q4_0`) is written with its trained codes and scales; any other by min-max
      calibration (each block's value of largest magnitude is code -8). GPT-2's Conv1D layers are written as
      linear layers reading the transposed weight. A weight whose input width is not a multiple of 32, or shared
      with an embedding, stays float32.
    """
    if target not in TARGETS:
        raise ExportError(f"target={target!r}: language models are exported for {', '.join(TARGETS)} (its "
                          "attention over a growing cache needs tract's symbols)")
    if weights not in WEIGHTS:
        raise ExportError(f"weights={weights!r}: expected one of {', '.join(map(repr, WEIGHTS))}")
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if dtypes - {torch.float32}:
        raise ExportError(f"the model's parameters are {', '.join(sorted(map(str, dtypes)))}: export computes in "
                          "float32; call model.float() first (weights='f16' or 'q4_0' store them smaller)")
    model, trained = without_fake_quantization(model)
    linear = conv1d_as_linear(model) if weights == "q4_0" else contextlib.nullcontext()
    with _evaluating(model), _grouped_query_attention(), linear:
        layout = cache_layout(model)
        wrapper = DecoderWithCache(model, layout)
        longest = layout.max_positions
        if longest <= EXAMPLE_S + EXAMPLE_P:
            raise ExportError(f"the model allows {longest} positions; exporting with a cache needs more than "
                              f"{EXAMPLE_S + EXAMPLE_P}")
        s, p = Dim("S", min=1, max=longest), Dim("P", min=0, max=longest - 1)
        example = (torch.zeros(1, EXAMPLE_S, dtype=torch.long), *layout.empty_cache(EXAMPLE_P))
        dynamic: Any = ({1: s}, tuple({2: p} for _ in range(2 * layout.layers)))
        exported = export_module(wrapper, example, dynamic_shapes=dynamic, target=target,
                                 input_names=layout.input_names(), output_names=layout.output_names(),
                                 progress=progress)
        exported = store(exported, wrapper, weights, trained)  # while GPT-2's Conv1D layers are linear ones
    exported.save(path, progress=progress)
    return layout


@contextlib.contextmanager
def _grouped_query_attention() -> Iterator[None]:
    """transformers' SDPA attention called with `enable_gqa` rather than key-value heads repeated (its own switch),
    so that the export reads each cached head once (`exporter/rules/nn.py`, grouped attention)."""
    before = os.environ.get(GQA_SWITCH)
    os.environ[GQA_SWITCH] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[GQA_SWITCH]
        else:
            os.environ[GQA_SWITCH] = before


@contextlib.contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """`model` in eval mode (no dropout) while it is traced, its own mode afterwards."""
    modes = {module: module.training for module in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for module, mode in modes.items():
            module.training = mode
