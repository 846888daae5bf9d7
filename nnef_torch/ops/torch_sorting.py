"""Torch implementations of the exporter's `stable_sort` and `stable_topk` fragments, so that the importer runs
them as torch's sort rather than their bodies' pairwise ranking. Both are stable (equal items keep their input
order), as the bodies are; `positions` is only the bodies' tie-breaker."""
from __future__ import annotations

import torch

from nnef_torch.ops.registry import torch_op


@torch_op('stable_sort')
def sort(input: torch.Tensor, positions: torch.Tensor, *, axis: int,
         descending: bool) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.sort(input, dim=axis, descending=bool(descending), stable=True)
    return values, indices


@torch_op('stable_topk')
def topk(input: torch.Tensor, positions: torch.Tensor, *, axis: int, k: int,
         largest: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # torch.topk orders ties as it likes; the first k of a stable sort is what the fragment's body computes
    values, indices = torch.sort(input, dim=axis, descending=bool(largest), stable=True)
    return values.narrow(axis, 0, int(k)), indices.narrow(axis, 0, int(k))
