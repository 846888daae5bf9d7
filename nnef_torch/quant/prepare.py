"""`prepare(module, config)`: put fake quantizers with observers into a PyTorch model; `calibrate` sets their ranges.

Where quantizers go (all of them `FakeQuantize` modules, each with its observer attached):
- weights: the `weight` Parameter (2-d or more: matrices and filters; norm-layer scales stay float) of every
  selected layer, through `torch.nn.utils.parametrize` (state name `<layer>.parametrizations.weight.original`,
  quantizer `<layer>.parametrizations.weight.0`), per channel along axis 0 by default;
- activations: the output of every selected layer, by a forward hook calling `<layer>.output_quantizer`;
- inputs: each positional tensor input of the model, by a forward pre-hook calling `input_quantizers[i]` on the
  root (on its first leaf when the root is an nn.Sequential, which would run extra children as layers).

Selected layers: modules of the `layers` types (default: convolutions, transposed convolutions, linear) and of the
`activation_layers` types (default: nn.ReLU, nn.ReLU6, nn.Hardtanh), narrowed to the `names` globs when given
(fnmatch on module paths), minus the `exclude` globs. Functional calls (F.relu) are not modules and stay float.

After `prepare` every quantizer observes and quantizes: the weight ranges are set from the weights, an activation
range from the first batch on (as torch.ao's QAT preparation does). `calibrate` replaces these by ranges observed
over calibration batches with fake quantization off, then fixes them (observing off, fake quantization on).
A state dict carries the ranges and the observers' statistics, not these switches: after loading one into a freshly
prepared model, turn observation off with `set_observing(model, False)`.
"""
from __future__ import annotations

import copy
import dataclasses
import fnmatch
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from nnef_torch.quant.functional import LEARNABLE, OPS
from nnef_torch.quant.modules import FakeQuantize
from nnef_torch.quant.observers import NAMES, make_observer

WEIGHTED = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Linear)
ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.Hardtanh)
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)  # no forward of their own to hook


@dataclass
class QuantScheme:
    """How one kind of tensor is quantized: the NNEF op and its flags, the observer, and LSQ learning."""

    bits: int = 8
    signed: bool = False
    symmetric: bool = False
    per_channel: bool = False
    op: str = "zero_point_linear_quantize"
    observer: str = "minmax"
    momentum: float = 0.1  # moving_average
    percentile: float = 99.99  # percentile
    learnable: bool = False
    grad_scale: float | str = "auto"  # multiplies the gradients of learned scales/ranges ("auto": LSQ's choice)

    def validate(self, what: str) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 32:
            raise ValueError(f"{what}: bits must be an integer in 1..32, not {self.bits!r}")
        if self.signed and self.bits < 2:
            raise ValueError(f"{what}: signed quantization needs at least 2 bits, not {self.bits}")
        if self.op not in OPS:
            raise ValueError(f"{what}: unknown quantization op {self.op!r}; expected one of {', '.join(OPS)}")
        if self.op == "linear_quantize" and (self.signed or self.symmetric):
            raise ValueError(f"{what}: linear_quantize is unsigned and asymmetric (signed={self.signed}, "
                             f"symmetric={self.symmetric}); use min_max_linear_quantize")
        if self.observer not in NAMES:
            raise ValueError(f"{what}: unknown observer {self.observer!r}; expected one of {', '.join(NAMES)}")
        if not 0.0 < float(self.momentum) <= 1.0:
            raise ValueError(f"{what}: momentum must be in (0, 1], not {self.momentum}")
        if not 50.0 < float(self.percentile) <= 100.0:
            raise ValueError(f"{what}: percentile must be in (50, 100], not {self.percentile}")
        if self.learnable and not LEARNABLE[self.op]:
            raise ValueError(f"{what}: {self.op} has no learnable parameters")
        if self.grad_scale != "auto" and not (isinstance(self.grad_scale, (int, float)) and self.grad_scale > 0):
            raise ValueError(f"{what}: grad_scale must be 'auto' or a positive number, not {self.grad_scale!r}")

    def observer_module(self) -> nn.Module:
        options = {"moving_average": {"momentum": self.momentum},
                   "percentile": {"percentile": self.percentile}}.get(self.observer, {})
        return make_observer(self.observer, self.per_channel, **options)

    def quantizer(self, channels: int | None = None) -> FakeQuantize:
        """A FakeQuantize of this scheme with its observer (per channel: `channels` along axis 0)."""
        return FakeQuantize(self.op, bits=self.bits, signed=self.signed, symmetric=self.symmetric,
                            channels=channels if self.per_channel else None, learnable=self.learnable,
                            grad_scale=self.grad_scale if self.learnable else 1.0, observer=self.observer_module())


def default_weights() -> QuantScheme:
    return QuantScheme(bits=8, signed=True, symmetric=True, per_channel=True)


def default_activations() -> QuantScheme:
    return QuantScheme(bits=8, signed=False, symmetric=False, per_channel=False)


_SHARED = ("bits", "op", "observer", "momentum", "percentile", "learnable", "grad_scale")


@dataclass
class QuantConfig:
    """Where to put fake quantization and how.

    weights / activations: a QuantScheme, a dict of fields that update the default scheme, or None (no
    quantization of that kind). inputs: True (every positional input named by forward's signature), a count of
    leading positional inputs, or False; inputs use the activations scheme (its default when activations is None).
    layers: module types that are quantized (None: any type, `names` must then say which); activation_layers:
    activation module types whose outputs are quantized; names / exclude: fnmatch globs on module paths.
    bits, op, observer, momentum, percentile, learnable, grad_scale: when given, set for weights and activations
    alike (QuantConfig(bits=4) quantizes everything to 4 bits).
    """

    weights: QuantScheme | dict | None = field(default_factory=default_weights)
    activations: QuantScheme | dict | None = field(default_factory=default_activations)
    inputs: bool | int = True
    layers: tuple | None = WEIGHTED
    activation_layers: tuple = ACTIVATIONS
    names: tuple = ()
    exclude: tuple = ()
    bits: int | None = None
    op: str | None = None
    observer: str | None = None
    momentum: float | None = None
    percentile: float | None = None
    learnable: bool | None = None
    grad_scale: float | str | None = None

    def __post_init__(self):
        shared = {key: getattr(self, key) for key in _SHARED if getattr(self, key) is not None}
        self.weights = _scheme(self.weights, default_weights, shared, "weights")
        self.activations = _scheme(self.activations, default_activations, shared, "activations")
        if self.activations is not None and self.activations.per_channel:
            raise ValueError("activations are quantized per tensor: their axis 0 is the batch, not channels")
        if not isinstance(self.inputs, int) or self.inputs < 0:  # bool is an int
            raise ValueError(f"inputs must be True, False or a count of positional inputs, not {self.inputs!r}")
        self._inputs = (None if self.inputs is False or self.inputs == 0 else self.activations
                        or _scheme({}, default_activations, shared, "inputs"))
        self.names, self.exclude = _globs(self.names, "names"), _globs(self.exclude, "exclude")
        self.layers = None if self.layers is None else _types(self.layers, "layers")
        self.activation_layers = _types(self.activation_layers, "activation_layers")
        if self.layers is None and not self.names:
            raise ValueError("layers=None selects modules by name only; give names (fnmatch globs)")

    @classmethod
    def coerce(cls, config: QuantConfig | dict | None) -> QuantConfig:
        """A QuantConfig from itself, a plain dict of its fields, or None (the defaults)."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, dict):
            return cls(**known_fields(cls, config, "QuantConfig"))
        raise TypeError(f"config must be a QuantConfig, a dict or None, not {type(config).__name__}")

    def input_scheme(self) -> QuantScheme | None:
        """How the inputs are quantized (None: they are not)."""
        return self._inputs


def known_fields(cls: type, values: Mapping[str, Any], what: str, error: type[Exception] = ValueError,
                 prefix: str = "") -> dict:
    """`values` as keyword arguments of the dataclass `cls`; `error` names any key that is not one of its fields."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise error(f"{prefix}unknown {what} fields {unknown}; expected some of {sorted(known)}")
    return dict(values)


def _scheme(value: Any, default: Callable[[], QuantScheme], shared: dict, what: str) -> QuantScheme | None:
    if value is None or value is False:
        return None
    if isinstance(value, dict):
        value = dataclasses.replace(default(), **known_fields(QuantScheme, value, "QuantScheme", prefix=f"{what}: "))
    elif not isinstance(value, QuantScheme):
        raise ValueError(f"{what} must be a QuantScheme, a dict or None, not {type(value).__name__}")
    value = dataclasses.replace(value, **shared)
    value.validate(what)
    return value


def _globs(value: Any, what: str) -> tuple[str, ...]:
    value = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(glob, str) for glob in value):
        raise ValueError(f"{what} must be fnmatch globs (strings), not {value!r}")
    return value


def _types(value: Any, what: str) -> tuple[type, ...]:
    """Module types, given as classes or names of torch.nn classes ("Conv2d")."""
    value = (value,) if isinstance(value, (str, type)) else tuple(value)
    types = []
    for item in value:
        if isinstance(item, str):
            item = getattr(nn, item, None) if not item.startswith("_") else None
            if item is None:
                raise ValueError(f"{what}: {value[len(types)]!r} names no torch.nn module class")
        if not (isinstance(item, type) and issubclass(item, nn.Module)):
            raise ValueError(f"{what} must be nn.Module subclasses or their torch.nn names, not {item!r}")
        types.append(item)
    return tuple(types)


# --------------------------------------------------------------------------------------------- selection
def _matches(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def select(module: nn.Module, config: QuantConfig) -> list[tuple[str, nn.Module]]:
    """The (path, module) pairs that `config` quantizes, in module order; ValueError when a glob matches no
    module or nothing is selected."""
    named = list(module.named_modules())
    for what, globs in (("names", config.names), ("exclude", config.exclude)):
        for glob in globs:
            if not any(fnmatch.fnmatchcase(name, glob) for name, _ in named):
                paths = [name for name, _ in named if name][:12]
                raise ValueError(f"{what} glob {glob!r} matches no module; module paths are {paths}"
                                 + (" ..." if len(named) > 13 else ""))
    types = None if config.layers is None else config.layers + config.activation_layers
    chosen = [(name, child) for name, child in named
              if not isinstance(child, _CONTAINERS) and not isinstance(child, FakeQuantize)
              and (types is None or isinstance(child, types))
              and (not config.names or _matches(name, config.names)) and not _matches(name, config.exclude)]
    if not chosen:
        kinds = "any type" if types is None else ", ".join(t.__name__ for t in types)
        raise ValueError(f"nothing to quantize: no module of {kinds} matches names={list(config.names)} "
                         f"outside exclude={list(config.exclude)}")
    return chosen


# --------------------------------------------------------------------------------------------- hooks
def _quantize_output(layer: nn.Module, args: Any, output: Any) -> Any:
    if isinstance(output, torch.Tensor) and output.is_floating_point():
        return layer.output_quantizer(output)
    return output


def _quantize_inputs(holder: nn.Module, args: tuple) -> tuple:
    quantizers = holder.input_quantizers
    return tuple(quantizers[i](arg) if i < len(quantizers) and isinstance(arg, torch.Tensor)
                 and arg.is_floating_point() else arg for i, arg in enumerate(args))


def _input_count(module: nn.Module) -> int:
    parameters = inspect.signature(module.forward).parameters.values()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) or 1


def _input_holder(module: nn.Module) -> nn.Module:
    """The module whose pre-hook sees the model's inputs: the root, or the first leaf of a Sequential root."""
    while isinstance(module, nn.Sequential):
        if len(module) == 0:
            raise ValueError("cannot quantize the inputs of an empty nn.Sequential")
        module = module[0]
    if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
        raise ValueError(f"cannot hook the model's inputs on a {type(module).__name__}")
    return module


# --------------------------------------------------------------------------------------------- prepare
def prepare(module: nn.Module, config: QuantConfig | dict | None = None, *, inplace: bool = False) -> nn.Module:
    """A copy of `module` (the module itself with inplace=True) with fake quantizers for `config` (see the module
    docstring); `QuantConfig.coerce` accepts a plain dict. Returns the prepared module."""
    config = QuantConfig.coerce(config)
    if any(isinstance(child, FakeQuantize) for child in module.modules()):
        raise ValueError("the module already holds FakeQuantize modules; prepare a module once")
    select(module, config)  # validate before copying
    if not inplace:
        module = copy.deepcopy(module)
    added: list[FakeQuantize] = []
    weighted: list[nn.Module] = []
    for _, layer in select(module, config):
        weight = getattr(layer, "weight", None)
        if config.weights is not None and isinstance(weight, nn.Parameter) and weight.dim() >= 2:
            quantizer = config.weights.quantizer(channels=weight.shape[0])
            parametrize.register_parametrization(layer, "weight", quantizer)
            added.append(quantizer)
            weighted.append(layer)
        if config.activations is not None:
            layer.output_quantizer = config.activations.quantizer()
            layer.register_forward_hook(_quantize_output)
            added.append(layer.output_quantizer)
    scheme = config.input_scheme()
    if scheme is not None:
        holder = _input_holder(module)
        count = _input_count(holder) if config.inputs is True else int(config.inputs)
        holder.input_quantizers = nn.ModuleList(scheme.quantizer() for _ in range(count))
        holder.register_forward_pre_hook(_quantize_inputs)
        added.extend(holder.input_quantizers)
    device = next(iter(module.parameters()), torch.empty(0)).device
    for quantizer in added:
        quantizer.to(device)
        quantizer.observing = True
    with torch.no_grad():  # the weight ranges come from the weights themselves
        for layer in weighted:
            _ = layer.weight  # the parametrization observes it
    return module


# --------------------------------------------------------------------------------------------- helpers
def quantizers(module: nn.Module) -> dict[str, FakeQuantize]:
    """Every FakeQuantize inside `module`, by module path (weights: `<layer>.parametrizations.weight.0`)."""
    return {name: child for name, child in module.named_modules() if isinstance(child, FakeQuantize)}


def _chosen(module: nn.Module, names: Iterable[str] | str | None) -> dict[str, FakeQuantize]:
    found = quantizers(module)
    if names is None:
        return found
    globs = _globs(names, "names")
    for glob in globs:
        if not any(fnmatch.fnmatchcase(name, glob) for name in found):
            raise ValueError(f"quantizer glob {glob!r} matches none of {sorted(found)}")
    return {name: q for name, q in found.items() if _matches(name, globs)}


def set_enabled(module: nn.Module, enabled: bool, names: Iterable[str] | str | None = None) -> nn.Module:
    """Turn fake quantization on or off (off: the identity) for every quantizer, or those matching `names` globs."""
    for quantizer in _chosen(module, names).values():
        quantizer.enabled = bool(enabled)
    return module


def set_observing(module: nn.Module, observing: bool, names: Iterable[str] | str | None = None) -> nn.Module:
    """Turn range observation on or off for every quantizer, or those matching `names` globs."""
    for quantizer in _chosen(module, names).values():
        quantizer.observing = bool(observing)
    return module


def _run(module: nn.Module, batch: Any) -> None:
    if isinstance(batch, dict):
        module(**batch)
    elif isinstance(batch, (tuple, list)):
        module(*batch)
    else:
        module(batch)


def _observe_parametrized(module: nn.Module) -> None:
    """Observe each parametrized tensor (weights) once, then stop observing it: it does not change with the batch."""
    with torch.no_grad():
        for layer in module.modules():
            if not parametrize.is_parametrized(layer):
                continue
            for name, chain in layer.parametrizations.items():
                watching = [q for q in chain if isinstance(q, FakeQuantize) and q.observing and q.observer is not None]
                if watching:
                    _ = getattr(layer, name)
                    for quantizer in watching:
                        quantizer.observing = False


def calibrate(module: nn.Module, batches: Iterable[Any], *, max_batches: int | None = None,
              reset: bool = True) -> nn.Module:
    """Set every observed quantizer's range from `batches` (a tensor: module(x); a tuple or list: module(*batch);
    a dict: module(**batch)), run in eval mode under no_grad with fake quantization off; then observation is
    turned off and fake quantization on. Weights (parametrized tensors) are observed once, not once per batch.
    Observers are reset first unless reset=False. Quantizers without an observer keep their settings (and quantize
    during calibration). The training flags are restored."""
    if max_batches is not None and (isinstance(max_batches, bool) or int(max_batches) < 1):
        raise ValueError(f"max_batches must be a positive integer, not {max_batches!r}")
    observed = {name: q for name, q in quantizers(module).items() if q.observer is not None}
    if not observed:
        raise ValueError("no quantizer with an observer in this module; call nnef_torch.quant.prepare first")
    flags = {q: (q.enabled, q.observing) for q in observed.values()}
    training = {child: child.training for child in module.modules()}
    for quantizer in observed.values():
        if reset:
            quantizer.observer.reset()
        quantizer.enabled, quantizer.observing = False, True
    seen = 0
    try:
        _observe_parametrized(module)
        module.eval()
        with torch.no_grad():
            for batch in batches:
                if max_batches is not None and seen >= max_batches:
                    break
                _run(module, batch)
                seen += 1
    except BaseException:
        for quantizer, (enabled, observing) in flags.items():
            quantizer.enabled, quantizer.observing = enabled, observing
        raise
    finally:
        for child, mode in training.items():
            child.training = mode
    if seen == 0:
        for quantizer, (enabled, observing) in flags.items():
            quantizer.enabled, quantizer.observing = enabled, observing
        raise ValueError("calibrate got no batches")
    for quantizer in observed.values():
        quantizer.enabled, quantizer.observing = True, False
    missed = [name for name, q in observed.items() if not q.observer.observed]
    for quantizer in observed.values():
        if quantizer.observer.observed:
            quantizer.set_range(*quantizer.observer.range())
    if missed:
        warnings.warn(f"calibration batches never reached quantizers {missed}; their ranges are unchanged",
                      stacklevel=2)
    return module


__all__ = ["ACTIVATIONS", "QuantConfig", "QuantScheme", "WEIGHTED", "calibrate", "prepare", "quantizers", "select",
           "set_enabled", "set_observing"]
