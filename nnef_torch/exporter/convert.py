"""traced ATen graph -> IR graph: every node goes through its export rule in the op table.

The graph signature of the exported program says what each placeholder and output is, and maps one to one onto NNEF:
user inputs -> `external`, parameters and buffers -> `variable` (labelled by their state_dict names with '/'),
constants -> literals, `constant` or variables, buffer mutations -> `update`. Every node without an exact NNEF form
is collected first, and all are reported together in one `ExportError`.
"""
from __future__ import annotations

import operator
import re
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from nnef_torch.errors import ExportError
from nnef_torch.exporter import rules  # noqa: F401  (registers every export rule)
from nnef_torch.exporter.emitter import Emitter, Unmappable
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.ops.registry import export_rules

_IGNORED = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default"}


def label(name: str) -> str:
    """A state_dict name as an NNEF variable label: `layer1.0.conv1.weight` -> `layer1/0/conv1/weight`."""
    return name.replace(".", "/")


def graph_name(module: torch.nn.Module) -> str:
    name = re.sub(r"\W", "_", type(module).__name__) or "G"
    return name if name[0].isalpha() or name[0] == "_" else "G_" + name


def to_ir(program: torch.export.ExportedProgram, name: str) -> tuple[Graph, Emitter]:
    signature = program.graph_signature
    inputs = {spec.arg.name: spec for spec in signature.input_specs if hasattr(spec.arg, "name")}
    nodes = list(program.graph.nodes)
    emit = Emitter(reserved=[node.name for node in nodes])
    table = export_rules()
    env: dict[str, Any] = {}
    problems: list[str] = []
    for node in nodes:
        emit.begin(None)
        if node.op == "placeholder":
            env[node.name] = _placeholder(emit, program, node, inputs[node.name], problems)
        elif node.op == "call_function":
            env[node.name] = _call(emit, table, node, env, problems)
        elif node.op == "output":
            outputs = _outputs(emit, program, node, env, problems)
    if problems:
        raise ExportError(f"{len(problems)} operation(s) of {name} have no NNEF form:", problems)
    return emit.graph(name, outputs), emit


def _placeholder(emit: Emitter, program, node, spec, problems: list[str]) -> Any:
    value = node.meta.get("val")
    if spec.kind == InputKind.USER_INPUT:
        if not isinstance(value, torch.Tensor):
            if isinstance(value, (int, float, bool)):
                return value  # a Python number argument is baked in as the traced value
            problems.append(f"input '{node.name}' is a {type(value).__name__}; NNEF graph inputs are tensors")
            return None
        if not _static(value.shape):
            problems.append(f"input '{node.name}' has a symbolic shape {list(value.shape)}; export with fixed shapes")
            return None
        return emit.external(node.name, value)
    if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
        source = program.state_dict if spec.target in program.state_dict else program.constants
        return emit.variable(label(spec.target), source[spec.target].detach())
    if spec.kind == InputKind.CONSTANT_TENSOR:
        return emit.constant(program.constants[spec.target], label("constants." + spec.target))
    problems.append(f"input '{node.name}' of kind {spec.kind.name} has no NNEF form")
    return None


def _call(emit: Emitter, table, node, env: dict[str, Any], problems: list[str]) -> Any:
    target = "getitem" if node.target is operator.getitem else str(node.target)
    if target in _IGNORED:
        return None
    args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
    if target == "getitem":
        return args[0][args[1]] if args[0] is not None else None
    if _has_missing(args) or _has_missing(kwargs):
        return None  # an input already failed; that failure is reported
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor) and not _static(value.shape):
        problems.append(_problem(node, f"its result shape {list(value.shape)} depends on tensor values (e.g. "
                                       "nonzero or boolean masking); NNEF needs shapes known before running. Use "
                                       "shape-preserving ops such as torch.where"))
        return None
    rule = table.get(target)
    if rule is None:
        problems.append(_problem(node, "no export rule for this operation"))
        return None
    emit.begin(node)
    try:
        result = rule(emit, *args, **kwargs)
    except Unmappable as why:
        problems.append(_problem(node, str(why)))
        return None
    if isinstance(result, Ref) and result.name in emit.created:
        result = emit.rename(result, node.name)
    return result


def _outputs(emit: Emitter, program, node, env: dict[str, Any], problems: list[str]) -> list[Ref]:
    values = node.args[0]
    signature = program.graph_signature
    outputs: list[Ref] = []
    variables = {variable.label: Ref(variable.name) for variable in emit.variables}
    emit.begin(None)
    declared = {op.outputs["output"].name for op in emit.operations if op.name in ("external", "variable")}
    for spec, value in zip(signature.output_specs, values):
        ref = env.get(value.name) if isinstance(value, torch.fx.Node) else value
        if ref is None and isinstance(value, torch.fx.Node):
            continue  # already reported
        if spec.kind == OutputKind.BUFFER_MUTATION:
            emit.update(variables[label(spec.target)], ref)
        elif spec.kind == OutputKind.USER_OUTPUT:
            if not isinstance(ref, Ref):
                problems.append(f"output {len(outputs)} is a {type(ref).__name__}, not a tensor")
                continue
            if ref in outputs or ref.name in declared:
                ref = emit.op("copy", ref, out_name=f"output{len(outputs)}")
            outputs.append(ref)
        else:
            problems.append(f"output {spec.arg} of kind {spec.kind.name} has no NNEF form")
    return outputs


def _static(shape) -> bool:
    return all(isinstance(extent, int) for extent in shape)


def _has_missing(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, (list, tuple)):
        return any(item is None or _has_missing(item) for item in value if not isinstance(item, (int, float)))
    return False


def _problem(node, reason: str) -> str:
    return f"{node.target} ({node.name}): {reason}{_source(node)}"


def _source(node) -> str:
    """The user's line that produced `node`, from the stack trace torch.export records."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    if not frames:
        return ""
    file, line, function, code = frames[-1]
    return f"\n      at {file}:{line} in {function}: {code.strip()}"
