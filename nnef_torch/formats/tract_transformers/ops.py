"""tract_transformers ops: shape rules and differentiable torch implementations with tract's semantics, in the
tract_transformers op table (layered on tract_core's; a document without `extension tract_registry
tract_transformers;` does not see them). torch is imported by the implementations only."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from nnef_torch.errors import NNEFShapeError
from nnef_torch.ops.registry import shape_rule, torch_op

if TYPE_CHECKING:
    import torch

Shape = tuple[int, ...]
DIALECT = "tract_transformers"
FLOAT_TYPES = ("f16", "f32", "f64")  # datum_type / acc_datum_type tract's sdpa computes in


def _fits(shape: Shape, target: Shape) -> bool:
    """`shape` broadcasts to `target` as tract reads it: leading axes added, then each extent equal or 1."""
    if len(shape) > len(target):
        return False
    return all(have in (1, want) for have, want in zip(shape, target[len(target) - len(shape):]))


def _float_type(op: str, param: str, value: str) -> None:
    if value not in FLOAT_TYPES:
        raise NNEFShapeError(f"{op}: {param} = {value!r} must be one of {', '.join(map(repr, FLOAT_TYPES))}")


@shape_rule("tract_transformers_sdpa", dialect=DIALECT)
def sdpa_shape(q: Shape, k: Shape, v: Shape, mask: Shape = (), *, scale: float = 0.0, datum_type: str = "f32",
               acc_datum_type: str = "f32", is_causal: bool = False) -> Shape:
    """q [B, H, S, D], k [B, KH, P, D], v [B, KH, P, DV] (or without the head axis: rank 3); H a multiple of KH
    (grouped-query heads: query head h reads key head h // (H / KH)); the mask broadcasts to [B, H, S, P]."""
    op = "tract_transformers_sdpa"
    _float_type(op, "datum_type", datum_type)
    _float_type(op, "acc_datum_type", acc_datum_type)
    if len(q) not in (3, 4) or len(k) != len(q) or len(v) != len(q):
        raise NNEFShapeError(f"{op}: q, k and v must all have rank 4 ([B, heads, length, dim]) or all rank 3, "
                             f"found {list(q)}, {list(k)}, {list(v)}")
    rank = len(q)
    if rank == 3:
        q, k, v = (q[0], 1, *q[1:]), (k[0], 1, *k[1:]), (v[0], 1, *v[1:])
    if k[0] != q[0] or v[0] != q[0] or k[3] != q[3] or v[:3] != k[:3]:
        raise NNEFShapeError(f"{op}: q {list(q)}, k {list(k)}, v {list(v)} disagree (batch, key dim, or k and v "
                             "heads and length)")
    if k[1] == 0 or q[1] % k[1]:
        raise NNEFShapeError(f"{op}: the query heads ({q[1]}) must be a multiple of the key heads ({k[1]})")
    if is_causal and k[2] < q[2]:
        raise NNEFShapeError(f"{op}: is_causal needs at least as many keys ({k[2]}) as queries ({q[2]})")
    if not _fits(tuple(mask), (q[0], q[1], q[2], k[2])[4 - rank:]):
        raise NNEFShapeError(f"{op}: mask {list(mask)} must broadcast to the scores {[q[0], q[1], q[2], k[2]]}")
    return (q[0], q[1], q[2], v[3]) if rank == 4 else (q[0], q[2], v[3])


@torch_op("tract_transformers_sdpa", dialect=DIALECT)
def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | float = 0.0, *, scale: float = 0.0,
         datum_type: str = "f32", acc_datum_type: str = "f32", is_causal: bool = False) -> torch.Tensor:
    """softmax(q·kᵀ · scale + mask) · v, with tract's readings: scale 0 (absent) is 1/sqrt(D); the mask is
    additive; is_causal masks key j for query i where j > i + (keys - queries) (bottom-right aligned, so the
    queries are the last of the keys) and replaces any given mask, as tract's Sdpa does. Query head h reads key
    head h // (H / KH). Written without branching on tensors: fx traces it (rank 3 inputs have no head axis, which
    torch reads alike)."""
    import torch
    from torch.nn import functional as F

    queries, keys = q.shape[-2], k.shape[-2]
    scale_value = scale if scale != 0.0 else q.shape[-1] ** -0.5
    attn_mask: torch.Tensor | None = None
    if is_causal:  # True where a query may attend
        attn_mask = torch.ones((queries, keys), dtype=torch.bool, device=q.device).tril(keys - queries)
    elif not isinstance(mask, (int, float)):
        attn_mask = mask
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale_value, enable_gqa=True)


@shape_rule("tract_transformers_rms_norm", dialect=DIALECT)
def rms_norm_shape(input: Shape, *, axis: int, eps: float = 1e-6) -> Shape:
    if not 0 <= axis < len(input):
        raise NNEFShapeError(f"tract_transformers_rms_norm: axis {axis} is outside the input's axes (shape "
                             f"{list(input)}; tract reads no negative axis)")
    return tuple(input)


@torch_op("tract_transformers_rms_norm", dialect=DIALECT)
def rms_norm(input: torch.Tensor, *, axis: int, eps: float = 1e-6) -> torch.Tensor:
    """input / sqrt(mean(input², axis) + eps), without scale (torch_to_nnef multiplies by the weight after)."""
    import torch

    return input * torch.rsqrt(input.square().mean(dim=axis, keepdim=True) + eps)


@shape_rule("tract_transformers_silu", dialect=DIALECT)
def silu_shape(input: Shape) -> Shape:
    return tuple(input)


@torch_op("tract_transformers_silu", dialect=DIALECT)
def silu(input: torch.Tensor) -> torch.Tensor:
    from torch.nn import functional as F

    return F.silu(input)


@shape_rule("tract_transformers_gelu_approx", dialect=DIALECT)
def gelu_approx_shape(input: Shape, *, fast_impl: bool = False) -> Shape:
    return tuple(input)


@torch_op("tract_transformers_gelu_approx", dialect=DIALECT)
def gelu_approx(input: torch.Tensor, *, fast_impl: bool = False) -> torch.Tensor:
    """0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·xⁿ))), n = 3, or 2 with fast_impl (tract's fast variant)."""
    import torch

    power = input.square() if fast_impl else input * input.square()
    return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * power)))


@shape_rule("tract_transformers_apply_rope", dialect=DIALECT)
def apply_rope_shape(input: Shape, cos: Shape, sin: Shape) -> Shape:
    op = "tract_transformers_apply_rope"
    if not input or input[-1] % 2:
        raise NNEFShapeError(f"{op}: the input's last axis must have an even extent, found shape {list(input)}")
    if not (_fits(tuple(cos), tuple(input)) and _fits(tuple(sin), tuple(input))):
        raise NNEFShapeError(f"{op}: cos {list(cos)} and sin {list(sin)} must broadcast to the input "
                             f"{list(input)}")
    return tuple(input)


@torch_op("tract_transformers_apply_rope", dialect=DIALECT)
def apply_rope(input: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """input·cos + rotate_half(input)·sin, rotate_half(x) = [-x₂, x₁] for the halves x₁, x₂ of the last axis."""
    import torch

    first, second = input.chunk(2, dim=-1)
    return input * cos + torch.cat([-second, first], dim=-1) * sin


@shape_rule("tract_transformers_scaled_masked_softmax", dialect=DIALECT)
def scaled_masked_softmax_shape(input: Shape, mask: Shape, *, scale: float, post_softmax_mask: bool = False
                                ) -> Shape:
    op = "tract_transformers_scaled_masked_softmax"
    if scale == 0.0:
        raise NNEFShapeError(f"{op}: scale must not be 0")
    if post_softmax_mask:
        raise NNEFShapeError(f"{op}: post_softmax_mask applies to a boolean mask, which this reader does not read")
    if not _fits(tuple(mask), tuple(input)):
        raise NNEFShapeError(f"{op}: mask {list(mask)} must broadcast to the input {list(input)}")
    return tuple(input)


@torch_op("tract_transformers_scaled_masked_softmax", dialect=DIALECT)
def scaled_masked_softmax(input: torch.Tensor, mask: torch.Tensor, *, scale: float,
                          post_softmax_mask: bool = False) -> torch.Tensor:
    """softmax(input·scale + mask) over the last axis (an additive mask)."""
    return (input * scale + mask).softmax(dim=-1)


__all__ = ["apply_rope", "gelu_approx", "rms_norm", "scaled_masked_softmax", "sdpa", "silu"]
