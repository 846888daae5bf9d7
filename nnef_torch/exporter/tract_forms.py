"""Standard operations the exporter writes in another form for the tract target, where tract's NNEF registry
lacks them or reads them otherwise (sonos/tract, nnef/src/ops/nnef/deser.rs, checked against tract 0.23):

- `silu` and `selu`: tract has neither; written as `x * sigmoid(x)` and `lambda * elu_alpha(x)` (below).
- `elu` with `alpha` other than 1: tract computes alpha = 1 whatever `alpha` says; written as
  `select(x > 0, x, alpha * elu(x))`.
- `pad` with the `replicate` border: tract reads that border as `replicated` (its `pad_mode`), and refuses
  `replicate`; written with tract's name, which the tract_core reader reads back (`formats/tract_core/relaxed.py`).
- `nearest_downsample`: tract's definition of it reads `length_of`, which tract lacks; written as its NNEF
  definition, a `box` of size 1 strided by the factors.
- `deconv`: tract reads the filter as [out, in/groups, ...] and `output_shape` as the spatial extents; written
  with the filter transposed per group (operations tract folds) and the spatial extents.

`FORMS` maps an op name to its writer `form(e, write, *inputs, **attribs)`: `e` is the emitter, `write` writes the
op itself as the standard form (used when its attributes need no other form). The emitter consults the table for
the tract target only (`Emitter.op`); the standard target writes every op as it is.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nnef_torch.formats.tract_core.rewrite import tract_deconv_filter

if TYPE_CHECKING:  # the emitter imports this table
    from nnef_torch.exporter.emitter import Emitter

Form = Callable[..., Any]


def silu(e: Emitter, write: Callable[..., Any], x: Any) -> Any:
    return e.op("mul", x, e.op("sigmoid", x))


def elu(e: Emitter, write: Callable[..., Any], x: Any, *, alpha: float = 1.0) -> Any:
    if alpha == 1.0:
        return write(x, alpha=alpha)
    return e.op("select", e.op("gt", x, 0.0), x, e.op("mul", write(x), float(alpha)))


def selu(e: Emitter, write: Callable[..., Any], x: Any, *, alpha: float, lambda_: float) -> Any:
    return e.op("mul", e.op("elu", x, alpha=float(alpha)), float(lambda_))  # elu: its form above


def pad(e: Emitter, write: Callable[..., Any], x: Any, *, padding: list[tuple[int, int]], border: str = "constant",
        value: float = 0.0) -> Any:
    result = write(x, padding=padding, border=border, value=value)
    if border == "replicate":  # checked as the standard op, then renamed as tract reads it
        op = e.operations[-1]
        e.operations[-1] = dataclasses.replace(op, attribs={**op.attribs, "border": "replicated"})
    return result


def nearest_downsample(e: Emitter, write: Callable[..., Any], x: Any, *, factor: list[int]) -> Any:
    rank = e.rank(x)
    return e.op("box", x, size=[1] * rank, stride=[1, 1, *factor], padding=[(0, 0)] * rank)


def deconv(e: Emitter, write: Callable[..., Any], x: Any, filter: Any, bias: Any = 0.0, *, border: str = "constant",
           padding: list = (), stride: list = (), dilation: list = (), output_shape: list = (), groups: int = 1
           ) -> Any:
    """tract reads the filter as [out, in/groups, ...] (NNEF: [in, out/groups, ...]) and `output_shape` as the
    spatial extents, ignoring a whole shape (deser.rs `conv_like`): the filter transposed per group by operations
    tract folds when it loads, the op checked as the standard one and then given that filter, and the spatial
    extents where they differ from the default (output padding). relaxed.py reads it back."""
    shape = list(e.shape(filter))
    spatial = list(range(2, len(shape)))
    groups = groups or shape[0]  # NNEF's 0: one group per input channel
    turned = tract_deconv_filter(e, filter, groups)
    y = write(x, filter, bias, border=border, padding=padding, stride=stride, dilation=dilation,
              output_shape=output_shape, groups=groups)
    extents = [int(d) for d in e.shape(y)[2:]]
    default = [(n - 1) * s + (k - 1) * d + 1 - sum(p) for n, k, s, d, p in
               zip(e.shape(x)[2:], shape[2:], stride or [1] * len(spatial), dilation or [1] * len(spatial), padding)]
    op = e.operations[-1]
    e.operations[-1] = dataclasses.replace(op, inputs={**op.inputs, "filter": turned}, attribs={
        **op.attribs, "output_shape": [] if padding and default == extents else extents})
    return y


FORMS: dict[str, Form] = {"silu": silu, "elu": elu, "selu": selu, "pad": pad, "nearest_downsample": nearest_downsample,
                          "deconv": deconv}

__all__ = ["FORMS"]
