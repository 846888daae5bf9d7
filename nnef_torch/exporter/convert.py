"""traced ATen graph -> IR graph: every node goes through its export rule in the op table.

The graph signature of the exported program says what each placeholder and output is, and maps one to one onto NNEF:
user inputs -> `external`, parameters and buffers -> `variable` (labelled by their state_dict names with '/'),
constants -> literals, `constant` or variables, buffer mutations -> `update`. Every node without an exact NNEF form
is collected first, and all are reported together in one `ExportError`, each at the user's source line.

Fake quantization (`torch.ops.nnef_torch.fake_quantize`) becomes graph.quant entries (exporter/quantization.py); its
parameters are folded to numbers by evaluating their nodes on the program's state (`_State.fold`). A weight made by
`torch.nn.utils.parametrize` (state name `conv.parametrizations.weight.original`) is labelled `conv/weight`.

NNEF arithmetic is defined on scalars only, so integer buffer arithmetic (BatchNorm's `num_batches_tracked += 1` in
training mode) is written with `cast` around a scalar `add`; consumers without `cast` (tract) cannot run such graphs.
"""
from __future__ import annotations

import operator
import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.export.graph_signature import InputKind, InputSpec, OutputKind

from nnef_torch.errors import ExportError
from nnef_torch.exporter.emitter import Emitter, Unmappable
from nnef_torch.exporter.naming import Documents, ModuleNames
from nnef_torch.exporter.problems import Problem, node_problem
from nnef_torch.exporter.quantization import QuantExport  # (registers the fake quantization rule)
from nnef_torch.exporter.symbolic import SYMBOLIC_RULES, TRACT_OPERANDS, TRACT_RULES, Symbols, SymValue, refusal
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.ops.registry import export_rules

# nodes that only check or annotate (shapes, dtypes, ranges, profiling) and compute nothing
_IGNORED = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten._assert_async.default",
            "aten._assert_async.msg", "aten._functional_assert_async.msg", "aten._functional_assert_scalar.default",
            "aten.sym_constrain_range.default", "aten.sym_constrain_range_for_size.default",
            "aten._functional_sym_constrain_range.default", "aten._functional_sym_constrain_range_for_size.default",
            "aten._record_function_enter_new.default", "aten._record_function_exit._RecordFunction",
            "profiler._record_function_enter_new.default", "profiler._record_function_exit._RecordFunction"}

_RANDOM = ("draws random numbers, and NNEF graphs are deterministic: pass the noise as an input, or export the "
           "module in eval mode if it only applies while training")
# why an operation without an export rule has none, where a general answer helps
_NO_RULE_HINTS = {
    "aten.native_dropout.default": "dropout in training mode (p > 0) draws a random mask on every call, and NNEF "
                                   "graphs are deterministic: call module.eval() before exporting (dropout is then "
                                   "the identity)",
    "aten.bernoulli.default": _RANDOM, "aten.bernoulli.p": _RANDOM, "aten.rand.default": _RANDOM,
    "aten.rand_like.default": _RANDOM, "aten.randn.default": _RANDOM, "aten.randn_like.default": _RANDOM,
    "aten.randint.default": _RANDOM, "aten.randint.low": _RANDOM, "aten.randint_like.default": _RANDOM,
    "aten.normal.Tensor_float": _RANDOM, "aten.uniform.default": _RANDOM, "aten.multinomial.default": _RANDOM,
    "aten.randperm.default": _RANDOM,
}

# element types with an NNEF counterpart (scalar, integer, logical); others (complex, quantized, float8) have none
_NNEF_DTYPES = {getattr(torch, name) for name in (
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "bool") if hasattr(torch, name)}


class _Failed:
    """The value of a node that could not be exported (its problem is reported); nodes using it are skipped."""

    def __repr__(self) -> str:
        return "<failed>"


FAILED = _Failed()
SUBGRAPH = object()  # the value of a get_attr node: a subgraph that a higher-order op such as torch.cond runs


def label(name: str) -> str:
    """A state_dict name as an NNEF variable label: `layer1.0.conv1.weight` -> `layer1/0/conv1/weight`."""
    return name.replace(".", "/")


def graph_name(module: torch.nn.Module) -> str:
    name = re.sub(r"\W", "_", type(module).__name__) or "G"
    return name if name[0].isalpha() or name[0] == "_" else "G_" + name


def to_ir(program: torch.export.ExportedProgram, name: str, quantization: QuantExport | None = None,
          symbols: Symbols | None = None, target: str = "standard", module: torch.nn.Module | None = None
          ) -> tuple[Graph, Emitter]:
    """The IR graph of `program`; raises `ExportError` listing every problem found. `quantization` says how fake
    quantization is written (graph.quant entries by default); `symbols`, the symbolic extents of a trace with
    `dynamic_shapes` (the graph is built at the example extents, its attributes relative to them); `target`
    'tract' writes tract's operations where standard NNEF has none, and extents as expressions of the symbols;
    `module`, the module traced: the documents of the imported modules in it name their tensors (naming.py)."""
    signature = program.graph_signature
    inputs = {spec.arg.name: spec for spec in signature.input_specs if hasattr(spec.arg, "name")}
    nodes = list(program.graph.nodes)
    documents = Documents.of(module)
    emit = Emitter(reserved=[node.name for node in nodes] + sorted(documents.names if documents else ()),
                   target=target)
    emit.symbols = symbols
    emit.document_tensor = documents.tensor if documents is not None else None
    state = _State(program, documents)
    emit.fold = state.fold
    emit.quant_options = quantization
    seen: set[str] = set()  # tensors already the value of a node: a second node with the same value aliases it
    table = export_rules()
    env: dict[str, Any] = {}
    problems: list[Problem] = []
    internal: list[Exception] = []  # errors in our own rules: reported as problems, the first chained as the cause
    outputs: list[Ref] = []
    names = ModuleNames(documents)  # after their document tensor or module (exporter/naming.py)
    for node in nodes:
        emit.begin(None)
        if node.op == "placeholder":
            env[node.name] = _placeholder(emit, state, node, inputs.get(node.name), problems)
        elif node.op == "call_function":
            env[node.name] = _call(emit, table, node, env, problems, internal, names)
        elif node.op == "output":
            renamed = names.apply(emit)
            if symbols is not None:
                symbols.origins.update(names.origins)
            env = {key: renamed.get(value.name, value) if isinstance(value, Ref) else value
                   for key, value in env.items()}
            outputs = _outputs(emit, state, node, env, problems)
        else:  # get_attr / call_module: the subgraph of a higher-order op (torch.cond, ...), reported where used
            env[node.name] = SUBGRAPH
        value = env.get(node.name)
        if isinstance(value, Ref):
            (emit.shared if value.name in seen else seen).add(value.name)
    if problems:
        error = ExportError(f"{name} cannot be exported as NNEF ({len(problems)} problem(s)):", problems)
        raise error from (internal[0] if internal else None)
    try:
        return emit.graph(name, outputs), emit
    except Exception as error:  # an invariant of our own broke: still an ExportError, with the cause chained
        raise ExportError(f"{name} cannot be exported as NNEF: internal error {type(error).__name__}: {error} "
                          "(a bug in nnef_torch)") from error


class _State:
    """The parameters, buffers and constants of the traced module, by the names the graph signature uses.

    A tensor reachable under several names (a tied weight: an embedding shared with the output projection) is one
    variable, labelled by its first name."""

    def __init__(self, program: torch.export.ExportedProgram, documents: Documents | None = None):
        self.values: dict[str, torch.Tensor] = {**program.constants, **program.state_dict}
        first: dict[int, str] = {}
        for target, value in list(program.state_dict.items()) + list(program.constants.items()):
            if isinstance(value, torch.Tensor):
                first.setdefault(id(value), target)
        names = _parametrized_names(self.values)
        self.labels = {target: label(names.get(first.get(id(value), target), first.get(id(value), target)))
                       for target, value in self.values.items()}
        # an imported module's variables and inputs keep its document's labels and names
        self.labels = documents.labels(self.labels) if documents is not None else self.labels
        self.variable_names = documents.variable_names(self.labels) if documents is not None else {}
        self.input_names = documents.inputs if documents is not None else {}
        self.refs: dict[str, Ref] = {}  # label -> the variable written for it
        self.output_specs = program.graph_signature.output_specs
        self.inputs = {spec.arg.name: spec for spec in program.graph_signature.input_specs
                       if hasattr(spec.arg, "name")}
        self._folded: dict[str, torch.Tensor] = {}

    def fold(self, node: torch.fx.Node) -> torch.Tensor:
        """The value of `node` computed from the parameters, buffers and constants; Unmappable when it depends on
        a graph input."""
        if node.name in self._folded:
            return self._folded[node.name]
        if node.op == "placeholder":
            spec = self.inputs.get(node.name)
            if spec is None or spec.kind == InputKind.USER_INPUT:
                raise Unmappable(f"it is computed from the graph input '{node.name}', and NNEF quantization "
                                 "parameters are fixed numbers")
            value = self.values.get(spec.target)
            if not isinstance(value, torch.Tensor):
                raise Unmappable(f"'{node.name}' ({spec.kind.name.lower()}) is not a tensor of the module's state")
        elif node.op == "call_function" and callable(node.target):
            args = torch.fx.node.map_arg(node.args, self.fold)
            kwargs = torch.fx.node.map_arg(node.kwargs, self.fold)
            with torch.no_grad():
                value = node.target(*args, **kwargs)
        else:
            raise Unmappable(f"'{node.name}' ({node.op}) cannot be evaluated ahead of time")
        if isinstance(value, torch.Tensor):
            value = value.detach()
        self._folded[node.name] = value
        return value


_PARAMETRIZED = re.compile(r"^(?:(.*)\.)?parametrizations\.([^.]+)\.original$")


def _parametrized_names(values: dict[str, Any]) -> dict[str, str]:
    """`conv.parametrizations.weight.original` (torch.nn.utils.parametrize) -> `conv.weight`, where that name is
    free: no other state entry has it and no other parametrized tensor becomes it."""
    found: dict[str, str] = {}
    for target in values:
        match = _PARAMETRIZED.match(target)
        if match:
            found[target] = f"{match.group(1)}.{match.group(2)}" if match.group(1) else match.group(2)
    counts: dict[str, int] = {}
    for name in found.values():
        counts[name] = counts.get(name, 0) + 1
    return {target: name for target, name in found.items() if counts[name] == 1 and name not in values}


def _placeholder(emit: Emitter, state: _State, node: torch.fx.Node, spec: InputSpec | None,
                 problems: list[Problem]) -> Any:
    value = node.meta.get("val")
    if spec is None:
        problems.append(node_problem(node, "a graph input the exported program's signature does not list"))
        return FAILED
    where = f"input '{node.name}'"
    if spec.kind == InputKind.USER_INPUT:
        symbolic = emit.symbols.shape(node) if emit.symbols else None
        if symbolic is not None and not _static(symbolic):
            value = torch.empty([d if isinstance(d, int) else emit.symbols.value(d, emit.symbols.examples)
                                 for d in symbolic], dtype=value.dtype, device="meta")
        if not isinstance(value, torch.Tensor):
            shown = repr(value) if isinstance(value, (int, float, bool, str, type(None))) else type(value).__name__
            problems.append(Problem(f"{where} is {shown}, not a tensor: NNEF graph inputs are tensors. Pass only "
                                    "tensors in example_inputs and bind other arguments in a wrapper module (or "
                                    "functools.partial of forward), or pass them as tensors"))
            return FAILED
        if not _static(value.shape) or 0 in value.shape:
            problems.append(Problem(f"{where} has shape {list(value.shape)}; NNEF graph inputs have static, "
                                    "positive extents"))
            return FAILED
        if _bad_dtype(value, where, problems):
            return FAILED
        return emit.external(state.input_names.get(node.name, node.name), value)
    if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
        tensor = state.values.get(spec.target)
        if not isinstance(tensor, torch.Tensor):
            problems.append(Problem(f"{where} ({spec.target}) is a {type(tensor).__name__}, not a tensor"))
            return FAILED
        if _bad_dtype(tensor, f"{spec.kind.name.lower()} '{spec.target}'", problems):
            return FAILED
        key = state.labels[spec.target]
        if spec.kind == InputKind.CONSTANT_TENSOR:
            try:
                return emit.constant(tensor, label("constants." + spec.target))
            except Unmappable as why:
                problems.append(Problem(f"constant '{spec.target}': {why}"))
                return FAILED
        if key not in state.refs:
            state.refs[key] = emit.variable(key, tensor.detach(), state.variable_names.get(key))
        return state.refs[key]
    problems.append(Problem(f"{where} of kind {spec.kind.name} has no NNEF form"))
    return FAILED


def _call(emit: Emitter, table: dict[str, Callable[..., Any]], node: torch.fx.Node, env: dict[str, Any],
          problems: list[Problem], internal: list[Exception], names: ModuleNames) -> Any:
    target = "getitem" if node.target is operator.getitem else str(node.target)
    if target in _IGNORED:
        return None
    used = [env[n.name] for n in node.all_input_nodes]
    if any(value is FAILED for value in used):
        return FAILED  # an input already failed; that failure is reported
    if any(value is SUBGRAPH for value in used):
        problems.append(node_problem(node, "control flow over tensor values (torch.cond, while_loop, ...) has no "
                                           "NNEF form: NNEF graphs are straight-line code; compute both branches "
                                           "and choose with torch.where"))
        return FAILED
    symbols = emit.symbols
    if symbols and isinstance(symbols.shapes.get(node.name), SymValue):  # an integer computed from extents
        value = symbols.shapes[node.name]
        return value.example if value.expr.is_number else value
    if any(value is None for value in used):  # a data operation on the result of a check: nothing to compute from
        problems.append(node_problem(node, "uses the result of an operation without data"))
        return FAILED
    args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
    operands = emit.target == "tract" and target in TRACT_OPERANDS
    if symbols and target not in SYMBOLIC_RULES and not operands and not (emit.target == "tract"
                                                                         and target in TRACT_RULES):
        read = _symbolic_arguments(args, kwargs)
        if read is not None:
            problems.append(node_problem(node, refusal(symbols, read, "it", emit.target)))
            return FAILED
    value = node.meta.get("val")
    shapes = symbols.shapes.get(node.name) if symbols else None
    for index, item in enumerate(value if isinstance(value, (tuple, list)) else (value,)):
        if symbols and isinstance(shapes, list) and _symbolic_known(symbols, shapes, index, value):
            continue  # extents of the inputs' symbols: written relative to them
        if isinstance(item, torch.Tensor) and not _static(item.shape):
            problems.append(node_problem(node, f"its result shape {list(item.shape)} depends on tensor values "
                                               "(e.g. nonzero or boolean masking), and NNEF graphs have static "
                                               "shapes: use shape-preserving ops such as torch.where"))
            return FAILED
        if isinstance(item, torch.Tensor) and item.dtype not in _NNEF_DTYPES:
            problems.append(node_problem(node, f"its result has element type {item.dtype}, which NNEF has no "
                                               "type for (scalar, integer and logical only)"))
            return FAILED
    rule = _getitem if target == "getitem" else table.get(target)
    if rule is None:
        problems.append(node_problem(node, _NO_RULE_HINTS.get(target, "no export rule for this operation")))
        return FAILED
    emit.begin(node)
    try:
        if operands:  # an extent read as a number, as a tensor tract computes from its symbols
            args = tuple(emit.extent_tensor(a) if isinstance(a, SymValue) else a for a in args)
        result = rule(emit, *args, **kwargs)
    except Unmappable as why:
        problems.append(node_problem(node, str(why)))
        return FAILED
    except Exception as error:  # a bug in a rule: reported with the others, never a bare traceback
        internal.append(error)
        problems.append(node_problem(node, f"the export rule failed with {type(error).__name__}: {error} "
                                           "(a bug in nnef_torch)"))
        return FAILED
    return names.claim(emit, node, result, node.name)


def _getitem(emit: Emitter, values: Any, index: int) -> Any:
    """One result of a multi-result operation (the rule returned a tuple or list of them)."""
    return values[index]


def _outputs(emit: Emitter, state: _State, node: torch.fx.Node, env: dict[str, Any],
             problems: list[Problem]) -> list[Ref]:
    values = node.args[0]
    outputs: list[Ref] = []
    emit.begin(None)
    declared = {op.outputs["output"].name for op in emit.operations if op.name in ("external", "variable")}
    dropped: list[str] = []  # buffers the module assigns, which the tract target does not write
    for spec, value in zip(state.output_specs, values):
        ref = env.get(value.name) if isinstance(value, torch.fx.Node) else value
        if ref is FAILED:
            continue  # already reported
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            if emit.target == "tract":  # tract has no `update` (no state kept between runs): the outputs only
                dropped.append(spec.target)
                continue
            variable = state.refs.get(state.labels.get(spec.target, label(spec.target)))
            if variable is None or not isinstance(ref, Ref):
                problems.append(Problem(f"buffer '{spec.target}' is assigned a {type(ref).__name__}, not a tensor"))
                continue
            emit.update(variable, ref)
        elif spec.kind == OutputKind.USER_OUTPUT:
            if not isinstance(ref, Ref):
                problems.append(Problem(f"output {len(outputs)} is {ref!r}, not a tensor: NNEF graph outputs are "
                                        "tensors; return only tensors from forward"))
                continue
            if ref in outputs or ref.name in declared:
                ref = emit.op("copy", ref, out_name=f"output{len(outputs)}")
            outputs.append(ref)
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            problems.append(Problem(f"forward changes its input '{spec.target}' in place, and NNEF graph inputs are "
                                    "read-only: work on a copy (`x = x + 1` instead of `x.add_(1)`)"))
        else:
            problems.append(Problem(f"output {spec.arg} of kind {spec.kind.name} has no NNEF form"))
    if dropped:
        warnings.warn(f"target='tract' leaves out the updates of {len(dropped)} buffer(s) ({', '.join(dropped[:3])}"
                      f"{', ...' if len(dropped) > 3 else ''}): tract keeps no state between runs, so the graph "
                      "computes the module's outputs only. Call module.eval() before exporting to write the "
                      "inference graph", stacklevel=2)
    return outputs


def _static(shape: Iterable[Any]) -> bool:
    return all(isinstance(extent, int) for extent in shape)


def _symbolic_arguments(args: Any, kwargs: Any) -> SymValue | None:
    """The first extent read as a number among a rule's arguments."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, SymValue):
            return value
        if isinstance(value, (list, tuple)):
            found = _symbolic_arguments(value, {})
            if found is not None:
                return found
    return None


def _symbolic_known(symbols: Symbols, shapes: list[Any], index: int, value: Any) -> bool:
    """Whether result `index` has a shape over the inputs' symbols only (no data-dependent size)."""
    shape = shapes[index] if isinstance(value, (tuple, list)) else shapes
    if not isinstance(shape, list) or any(isinstance(d, list) for d in shape):
        return False
    item = value[index] if isinstance(value, (tuple, list)) else value
    return isinstance(item, torch.Tensor) and item.dtype in _NNEF_DTYPES and symbols.known(shape)


def _bad_dtype(value: torch.Tensor, where: str, problems: list[Problem]) -> bool:
    if value.dtype in _NNEF_DTYPES:
        return False
    problems.append(Problem(f"{where} has element type {value.dtype}, which NNEF has no type for (scalar, "
                            "integer and logical only)"))
    return True
