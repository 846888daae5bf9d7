"""Q4_0 quantization-aware training of a model's layers: `prepare_q4_0`, `q4_0_codes`, `remove_q4_0`.

`prepare_q4_0` registers a `Q4_0FakeQuantize` (quant/groupwise.py) on the `weight` of every selected layer through
`torch.nn.utils.parametrize`: the float weight becomes `<layer>.parametrizations.weight.original`, the block scales
`<layer>.parametrizations.weight.0.scale`, and every read of `<layer>.weight` is the fake-quantized weight, which
torch.export traces as one `nnef_torch.q4_0_fake_quantize` node of those two Parameters. `q4_0_codes` gives the
(codes, float16 scales) to write for each weight; `remove_q4_0` leaves the dequantized weights as plain Parameters.
"""
from __future__ import annotations

import copy
import fnmatch
import warnings
from collections.abc import Iterable

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from nnef_torch.format.block_quant import BLOCK
from nnef_torch.quant.groupwise import GRAD_SCALE, Q4_0FakeQuantize, rows

INDIVISIBLE = ("skip", "raise")


def _globs(skip: str | Iterable[str]) -> tuple[str, ...]:
    return (skip,) if isinstance(skip, str) else tuple(skip)


def _chain(layer: nn.Module) -> nn.ModuleList:
    """The parametrizations of a parametrized layer's weight."""
    chain = layer.get_submodule("parametrizations.weight")
    assert isinstance(chain, nn.ModuleList)
    return chain


def _original(layer: nn.Module) -> torch.Tensor:
    """The float weight under a layer's weight parametrization."""
    original = _chain(layer).original
    assert isinstance(original, torch.Tensor)
    return original


def _weight(layer: nn.Module) -> torch.Tensor:
    weight = layer.weight
    assert isinstance(weight, torch.Tensor)
    return weight


def _selected(model: nn.Module, modules: tuple[type[nn.Module], ...],
              skip: tuple[str, ...]) -> list[tuple[str, nn.Module]]:
    chosen = []
    for name, layer in model.named_modules():
        if not isinstance(layer, modules) or any(fnmatch.fnmatchcase(name, glob) for glob in skip):
            continue
        if parametrize.is_parametrized(layer, "weight"):
            raise ValueError(f"{name or 'the model'}: its weight is already parametrized "
                             f"({type(_chain(layer)[0]).__name__}); prepare a layer once")
        if isinstance(getattr(layer, "weight", None), nn.Parameter):
            chosen.append((name, layer))
    return chosen


def prepare_q4_0(model: nn.Module, *, modules: type[nn.Module] | tuple[type[nn.Module], ...] = (nn.Linear,),
                 skip: str | Iterable[str] = (), learn_scale: bool = True, grad_scale: float = GRAD_SCALE,
                 indivisible: str = "skip", inplace: bool = False) -> nn.Module:
    """A copy of `model` (the model itself with inplace=True) whose layers of the `modules` types, minus the `skip`
    globs (fnmatch on module paths), train with Q4_0 fake-quantized weights, scales initialised by min-max.

    learn_scale: the block scales are Parameters learned by LSQ (else buffers: the weights alone learn, straight
    through). A weight whose rows ([OUT, K], K the product of the other axes) do not split into blocks of 32 is
    left in float with a warning naming it (`indivisible="skip"`), or refused (`"raise"`)."""
    if indivisible not in INDIVISIBLE:
        raise ValueError(f"indivisible must be one of {', '.join(INDIVISIBLE)}, not {indivisible!r}")
    types = modules if isinstance(modules, tuple) else (modules,)
    globs = _globs(skip)
    left: list[str] = []
    for name, layer in _selected(model, types, globs):  # validate before copying
        weight = _weight(layer)
        if weight.dim() < 2 or rows(weight.shape)[1] % BLOCK:
            left.append(f"{name or 'the model'}.weight {list(weight.shape)}")
    if left and indivisible == "raise":
        raise ValueError(f"Q4_0 needs weights whose rows (the product of all axes but the first) are a multiple of "
                         f"{BLOCK}: {', '.join(left)}")
    if left:
        warnings.warn(f"Q4_0 left {len(left)} weight(s) in float: their rows are not a multiple of {BLOCK} values: "
                      f"{', '.join(left)}", UserWarning, stacklevel=2)
    if not inplace:
        model = copy.deepcopy(model)
    for _, layer in _selected(model, types, globs):
        weight = _weight(layer)
        if weight.dim() < 2 or rows(weight.shape)[1] % BLOCK:
            continue
        quantizer = Q4_0FakeQuantize.from_weight(weight, learn_scale=learn_scale, grad_scale=grad_scale)
        parametrize.register_parametrization(layer, "weight", quantizer.to(weight.device))
    return model


def q4_0_layers(model: nn.Module) -> dict[str, tuple[nn.Module, Q4_0FakeQuantize]]:
    """weight name ('fc.weight') -> (its layer, its quantizer), for each weight `prepare_q4_0` quantizes."""
    found = {}
    for name, layer in model.named_modules():
        if not parametrize.is_parametrized(layer, "weight"):
            continue
        chain = _chain(layer)
        if any(isinstance(p, Q4_0FakeQuantize) for p in chain):
            if len(chain) != 1:
                raise ValueError(f"{name}.weight: Q4_0 fake quantization is chained with other parametrizations "
                                 f"({', '.join(type(p).__name__ for p in chain)}); expected it alone")
            quantizer = chain[0]
            assert isinstance(quantizer, Q4_0FakeQuantize)
            found[f"{name}.weight" if name else "weight"] = (layer, quantizer)
    return found


def q4_0_codes(model: nn.Module) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """weight name -> (int8 codes of the weight's shape, in [-8, 7]; float16 scales [OUT, K // 32]): the trained
    Q4_0 tensors (`format.block_quant.pack_q4_0` writes them). Decoded, they equal the fake-quantized weights."""
    return {name: quantizer.codes(_original(layer))
            for name, (layer, quantizer) in q4_0_layers(model).items()}


def remove_q4_0(model: nn.Module) -> nn.Module:
    """Remove the Q4_0 parametrizations in place, leaving each weight as a Parameter holding its dequantized value
    (what tract computes from the codes). Returns the model."""
    with torch.no_grad():
        for _, (layer, _) in q4_0_layers(model).items():
            value, trains = _weight(layer).detach().clone(), _original(layer).requires_grad
            # not parametrize.remove_parametrizations: it deletes the property from the layer's class, which a
            # deep copy of the model shares with the original
            layer.__class__ = type(layer).__bases__[0]
            del layer._modules["parametrizations"]
            layer.weight = nn.Parameter(value, requires_grad=trains)
    return model


__all__ = ["INDIVISIBLE", "prepare_q4_0", "q4_0_codes", "q4_0_layers", "remove_q4_0"]
