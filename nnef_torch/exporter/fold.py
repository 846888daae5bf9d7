"""Inference batch norm folded into the convolution or linear layer before it (`export(..., fold_batch_norm=True)`).

A pass over the traced ATen graph (`torch.export`'s program, before any decomposition), so that the fold happens
wherever the two operations are adjacent in what the module computes, whatever its modules are (nn.BatchNorm1d/2d/3d
in eval mode, or F.batch_norm(..., training=False) on buffers): an `aten.conv1d/2d/3d` or `aten.linear` whose only
user is an `aten.batch_norm` with training False, and whose weight and bias are the module's own tensors (graph
inputs) that nothing else reads. With s = gamma / sqrt(running_var + eps) per output channel:

    weight' = weight * s (along axis 0)        bias' = (bias - running_mean) * s + beta

computed in float64 and stored in the weight's dtype, so the folded graph computes what the module computes within
float rounding. The batch norm's node is removed; the folded weight keeps the convolution's label, and the folded
bias takes the label of the convolution's bias, or when it has none the batch norm's `bias` (its `running_mean`
when not affine).

Under quantization-aware training the convolution's weight is `nnef_torch.fake_quantize(weight, a, b, ...)`
(`nnef_torch.quant.prepare` puts it there). The fake-quantized module computes s * Q(weight), which the folded graph
reproduces exactly: its weight is s * Q(weight) (the quantized values, scaled), quantized by the same quantizer with
its parameters scaled by s per output channel (zero_point_linear_quantize: scale * s, zero point unchanged;
min_max_linear_quantize and linear_quantize: min * s and max * s). Scaled values of the grid lie on the scaled
grid, so the consumer's quantization gives back the same codes. This needs s > 0 in every channel and per-channel
parameters (a per-tensor quantizer has one scale for channels that s scales differently; a per-tensor quantizer
folds only where s is the same in every channel): otherwise `ExportError` says which layer and why, rather than
write a graph that computes something else. logarithmic_quantize does not fold.

The module is never changed: the folded tensors are new tensors, set in the traced program's state dict.
"""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.problems import node_problem

_aten = torch.ops.aten
LAYERS = (_aten.conv1d.default, _aten.conv2d.default, _aten.conv3d.default, _aten.linear.default)
BATCH_NORM = _aten.batch_norm.default
# the quantizer parameters that scale with the weight, by op: (a, b) of nnef_torch.fake_quantize
_SCALED = {"zero_point_linear_quantize": (False, True), "min_max_linear_quantize": (True, True),
           "linear_quantize": (True, True)}


def fold_norms(program: torch.export.ExportedProgram) -> int:
    """Fold every inference batch norm of `program` (torch.export's own copy, changed in place) into the
    convolution or linear layer before it; the number folded. Raises ExportError listing every quantized layer
    whose fold the graph could not write exactly."""
    state = _State(program)
    problems: list[str] = []
    folded = 0
    for norm in list(program.graph.nodes):
        if norm.op != "call_function" or norm.target is not BATCH_NORM:
            continue
        plan = _plan(norm, state)
        if plan is None:
            continue
        try:
            _apply(plan, state)
        except _Refused as why:
            problems.append(node_problem(norm, f"after a fake-quantized weight, this batch norm cannot be folded "
                                               f"exactly: {why}"))
            continue
        folded += 1
    if problems:
        raise ExportError(f"fold_batch_norm: {len(problems)} batch norm(s) cannot be folded exactly into a "
                          "fake-quantized weight (export without fold_batch_norm, or see "
                          "nnef_torch.exporter.fold):", problems)
    if folded:
        program.graph.eliminate_dead_code()
        program.graph.lint()
    return folded


class _Refused(Exception):
    """A fold the graph cannot write exactly (quantized weights)."""


class _State:
    """The program's tensors by placeholder: which graph inputs hold a parameter, buffer or constant, and where."""

    def __init__(self, program: torch.export.ExportedProgram):
        self.program = program
        self.targets: dict[str, str] = {}
        for spec in program.graph_signature.input_specs:
            if spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and spec.target is not None:
                self.targets[spec.arg.name] = spec.target

    def own(self, node: Any) -> bool:
        """Whether `node` is a tensor of the module's that only one operation reads (so it may be replaced)."""
        return self.tensor(node) is not None and len(node.users) == 1

    def tensor(self, node: Any) -> torch.Tensor | None:
        if not isinstance(node, torch.fx.Node) or node.op != "placeholder" or node.name not in self.targets:
            return None
        target = self.targets[node.name]
        value = self.program.state_dict.get(target, self.program.constants.get(target))
        return value if isinstance(value, torch.Tensor) else None

    def set(self, node: torch.fx.Node, value: torch.Tensor) -> None:
        target = self.targets[node.name]
        old = self.tensor(node)
        value = value.to(old.dtype).detach()
        if isinstance(old, torch.nn.Parameter):
            value = torch.nn.Parameter(value, requires_grad=old.requires_grad)
        table = self.program.state_dict if target in self.program.state_dict else self.program.constants
        table[target] = value


class _Plan:
    def __init__(self, layer: torch.fx.Node, norm: torch.fx.Node, weight: torch.fx.Node,
                 quantizer: torch.fx.Node | None, bias: torch.fx.Node | None, bias_home: torch.fx.Node):
        self.layer, self.norm, self.weight, self.quantizer = layer, norm, weight, quantizer
        self.bias, self.bias_home = bias, bias_home


def _plan(norm: torch.fx.Node, state: _State) -> _Plan | None:
    """What folding `norm` into the layer before it changes, or None where it does not fold."""
    args = list(norm.args) + [None] * (9 - len(norm.args))
    layer, gamma, beta, mean, var, training = args[:6]
    if training or not isinstance(layer, torch.fx.Node) or layer.op != "call_function":
        return None
    if layer.target not in LAYERS or len(layer.users) != 1:
        return None
    if any(state.tensor(t) is None for t in (mean, var)) or any(t is not None and state.tensor(t) is None
                                                                for t in (gamma, beta)):
        return None
    weight = layer.args[1] if len(layer.args) > 1 else layer.kwargs.get("weight")
    bias = layer.args[2] if len(layer.args) > 2 else layer.kwargs.get("bias")
    if bias is not None and not state.own(bias):
        return None
    quantizer = None
    if isinstance(weight, torch.fx.Node) and str(weight.target) == "nnef_torch.fake_quantize.default":
        if len(weight.users) != 1:
            return None
        quantizer, weight = weight, weight.args[0]
    value = state.tensor(weight)
    if not state.own(weight) or not value.is_floating_point() or value.dim() < 2:
        return None
    channels = value.shape[0]
    if any(state.tensor(t).shape != (channels,) for t in (gamma, beta, mean, var) if t is not None):
        return None
    home = bias if bias is not None else next((t for t in (beta, mean) if t is not None and state.own(t)), None)
    if home is None:
        return None
    return _Plan(layer, norm, weight, quantizer, bias, home)


def _apply(plan: _Plan, state: _State) -> None:
    norm = plan.norm
    args = list(norm.args) + [None] * (9 - len(norm.args))
    gamma, beta, mean, var, eps = (args[1], args[2], args[3], args[4], args[7])
    eps = 1e-5 if eps is None else float(eps)
    weight = state.tensor(plan.weight).detach().double()
    channels = weight.shape[0]
    ones, zeros = torch.ones(channels, dtype=torch.float64), torch.zeros(channels, dtype=torch.float64)
    g = ones if gamma is None else state.tensor(gamma).detach().double()
    b = zeros if beta is None else state.tensor(beta).detach().double()
    s = g / torch.sqrt(state.tensor(var).detach().double() + eps)
    bias = zeros if plan.bias is None else state.tensor(plan.bias).detach().double()
    new_bias = (bias - state.tensor(mean).detach().double()) * s + b
    along = s.reshape((channels,) + (1,) * (weight.dim() - 1))
    if plan.quantizer is None:
        new_weight = weight * along
    else:
        new_weight = _quantized(plan, state, s, along)
    state.set(plan.weight, new_weight)
    state.set(plan.bias_home, new_bias)
    layer = plan.layer
    if plan.bias is None:
        layer_args = list(layer.args)
        if len(layer_args) > 2:
            layer_args[2] = plan.bias_home
        else:
            layer_args.append(plan.bias_home)
        layer.args = tuple(layer_args)
        layer.kwargs = {key: value for key, value in layer.kwargs.items() if key != "bias"}
    norm.replace_all_uses_with(layer)
    layer.graph.erase_node(norm)


def _quantized(plan: _Plan, state: _State, s: torch.Tensor, along: torch.Tensor) -> torch.Tensor:
    """The folded weight under fake quantization, s * Q(weight), with the quantizer's parameters scaled to match
    (set in the program); _Refused where the scaled quantizer would not give s * Q(weight) back."""
    quantizer = plan.quantizer
    _, a, b, op, bits, signed, symmetric = quantizer.args[:7]
    grad_scale = quantizer.args[7] if len(quantizer.args) > 7 else 1.0
    if op not in _SCALED:
        raise _Refused(f"{op} has no parameters that scale with the weight")
    if not bool((s > 0).all()):
        raise _Refused("a channel's gamma / sqrt(running_var + eps) is not positive, and a quantization grid "
                       "scaled by a negative number is a different grid")
    params = {}
    for node, scaled, name in ((a, _SCALED[op][0], "first"), (b, _SCALED[op][1], "second")):
        if not scaled:
            continue
        if not state.own(node):
            raise _Refused(f"its {name} parameter is computed ({getattr(node, 'name', node)}), not a tensor of "
                           "its own")
        value = state.tensor(node).detach().double()
        if value.dim() == 0 or value.numel() == 1:
            if not torch.allclose(s, s[0].expand_as(s), rtol=1e-7, atol=0.0):
                raise _Refused("the quantizer is per-tensor but the batch norm scales each channel differently; "
                               "quantize the weight per channel (nnef_torch.quant QuantScheme(per_channel=True))")
            params[node] = value * s[0]
        elif value.shape == s.shape:
            params[node] = value * s
        else:
            raise _Refused(f"its parameter has shape {list(value.shape)}, not one per output channel ({len(s)})")
    weight = state.tensor(plan.weight).detach()
    values = {n: state.tensor(n).detach() for n in (a, b) if isinstance(n, torch.fx.Node)}
    wide = torch.float64 if weight.dtype == torch.float64 else torch.float32

    def quantize(w: torch.Tensor, table: dict[Any, torch.Tensor]) -> torch.Tensor:
        first, second = (table.get(n, n) if isinstance(n, torch.fx.Node) else n for n in (a, b))
        first, second = (torch.as_tensor(t).to(wide) if torch.as_tensor(t).is_floating_point() else
                         torch.as_tensor(t) for t in (first, second))
        return torch.ops.nnef_torch.fake_quantize(w.to(wide), first, second, op, bits, signed, symmetric,
                                                  grad_scale).double()

    new_weight = quantize(weight, values) * along
    scaled = {n: v.to(values[n].dtype) for n, v in params.items()}
    again = quantize(new_weight.to(weight.dtype), {**values, **scaled})
    tolerance = 1e-5 * float(new_weight.abs().max()) if new_weight.numel() else 0.0
    if not torch.allclose(again, new_weight, rtol=1e-5, atol=tolerance):
        raise _Refused("the scaled quantizer does not reproduce the scaled quantized weight (its range clips it)")
    for node, value in scaled.items():
        state.set(node, value)
    return new_weight


__all__ = ["fold_norms"]
