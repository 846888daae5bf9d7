"""IR graph -> fx graph: externals become placeholders, variables `get_attr`s, each operation the torch calls its
op function makes when traced, graph.quant entries a call of a `FakeQuantize` submodule (`fake_quant.<tensor>`; a
custom quantization fragment or a `custom_ops` override stays a function call), updates `write_state` calls at the end.

The generated `forward` is straight-line code over torch calls; op functions ran once, here, on proxies. Each node
made for an operation records the document tensor it computes in its meta (`DOCUMENT_TENSOR`: a result's own name,
the first result's for the op's other nodes), so that an export trace of the module keeps the document's names
(`nnef_torch.exporter.naming`).
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from nnef_torch.errors import NNEFError, NNEFOptionError, NNEFUnsupportedError
from nnef_torch.importer import state
from nnef_torch.importer.naming import label_paths
from nnef_torch.importer.simplify import fold_reshapes
from nnef_torch.importer.tracer import OpTracer, annotate
from nnef_torch.importer.weights import declared_dtype
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.ir.lower import python_name
from nnef_torch.ops import registry
from nnef_torch.quant.functional import OPS
from nnef_torch.quant.modules import FakeQuantize

_SPECIAL = ("external", "variable", "update")
QUANTIZERS = "fake_quant"  # the submodule holding one FakeQuantize per graph.quant entry
OP_MODULES = "op_modules"  # the submodule holding the operations implemented as modules (training mode, side effects)
DOCUMENT_TENSOR = "nnef_tensor"  # fx node meta: the name of the document tensor the node computes (or helps compute)


@dataclass(frozen=True)
class Slot:
    """Where the data of one variable (all variables sharing its label) lives in the module."""

    key: str  # the case-insensitive label key
    label: str  # the first spelling of the label
    path: str  # dotted attribute path = state_dict key
    nnef_type: str
    shape: tuple[int, ...]
    state: bool  # written by an `update`, or state by a front end's knowledge: a buffer rather than a Parameter
    updated: bool = False  # written by an `update`: read once per call as a copy of its old value


def plan_slots(graph: Graph, state: Collection[str] = (), names: Mapping[str, str] | None = None) -> dict[str, Slot]:
    """One slot per label key, in declaration order; variables written by `update`, and those whose labels are
    in `state` (what a front end knows to be state, such as moving statistics), are buffers. `names`: the name a
    front end's file gives a label's tensor, where the label could not hold it (its attribute path follows it)."""
    groups = graph.shared_variables()
    updated = {update.variable for update in graph.signature.updates}
    state_keys = {label.lower() for label in state}
    paths = label_paths((variables[0].label for variables in groups.values()), names)
    slots = {}
    for key, variables in groups.items():
        first = variables[0]
        is_updated = any(variable.name in updated for variable in variables)
        slots[key] = Slot(key, first.label, paths[first.label], first.dtype, first.shape,
                          is_updated or key in state_keys, is_updated)
    return slots


def implementations(custom_ops: Mapping[str, Callable[..., Any]] | None) -> Callable[..., Callable | None]:
    """`find(name, dialect=None)`: the implementation of op `name`, from `custom_ops` or from the op table of a
    graph read with `dialect` (`Graph.dialect`)."""
    custom = dict(custom_ops or {})

    def find(name: str, dialect: str | None = None) -> Callable | None:
        if name in custom:
            return custom[name]
        op = registry.entry(name, "torch", dialect=dialect)
        return (op.module or op.torch) if op is not None else None
    return find


def module_state(graph: Graph, custom_ops: Collection[str] = ()) -> set[str]:
    """Labels of the variables that operations implemented as submodules update in training (their `state`
    inputs): buffers of the module, not Parameters."""
    variables = {variable.name: variable for variable in graph.signature.variables}
    labels = set()
    for op in graph.operations:
        entry = registry.entry(op.name, "torch", dialect=graph.dialect)
        if entry is None or entry.module is None or op.name in custom_ops:
            continue
        for name in entry.state:
            value = op.inputs.get(name)
            if isinstance(value, Ref) and value.name in variables:
                labels.add(variables[value.name].label)
    return labels


def check_supported(graph: Graph, find: Callable[..., Callable | None]) -> None:
    """Scan before converting: one error naming every operation (and quantization op) without an implementation."""
    missing: list[tuple[str, Any]] = []
    for op in graph.operations:
        if op.name not in _SPECIAL and find(op.name, graph.dialect) is None:
            missing.append((op.name, op.location))
    for name, spec in graph.quantization.items():
        if find(spec.op, graph.dialect) is None:
            missing.append((f"{spec.op} (graph.quant entry of '{name}')", spec.location))
    if not missing:
        return
    lines = [f"  {name} at {_where(location)}" for name, location in missing]
    names = sorted({name.split(" ")[0] for name, _ in missing})
    raise NNEFUnsupportedError(f"{len(missing)} operation(s) have no body and no implementation "
                               f"({', '.join(names)}); pass custom_ops={{name: function}} to supply them:\n"
                               + "\n".join(lines), missing[0][1])


def _where(location: Any) -> str:
    if location is None:
        return "an unknown place"
    return ":".join(str(part) for part in (location.file or "<graph>", location.line, location.column)
                    if part is not None)


class GraphBuilder:
    def __init__(self, graph: Graph, root: torch.nn.Module, slots: Mapping[str, Slot],
                 find: Callable[[str], Callable | None], custom_ops: Mapping[str, Callable[..., Any]] | None,
                 float_dtype: torch.dtype | None):
        self.graph = graph
        self.root = root
        self.slots = slots
        self.find = find
        self.custom = set(custom_ops or {})
        self.float_dtype = float_dtype
        self.tracer = OpTracer(root)
        self.env: dict[str, Any] = {}
        self.variables = {variable.name: variable for variable in graph.signature.variables}
        self.state_reads: dict[str, fx.Proxy] = {}
        self.writes: list[tuple[str, Any]] = []
        self.special = {"external": self.external, "variable": self.variable, "update": self.update}
        self.quantizers: dict[str, str] = {}  # tensor name -> submodule path of its FakeQuantize
        self.owners: dict[str, torch.nn.Module] = {}  # module path -> the module holding variables there

    def build(self) -> fx.Graph:
        read = {ref.name for op in self.graph.operations for ref in op.input_refs()} | set(self.graph.outputs)
        externals = self.graph.signature.externals
        last_read = max((i for i, external in enumerate(externals) if external.name in read), default=-1)
        for index, external in enumerate(externals):
            dtype = declared_dtype(external.dtype, self.float_dtype)
            # an input nothing reads may be left out (NNEF graphs have at least one input; a model with none
            # declares one, as the LightNet front end does), where no input that is read follows it
            placeholder = self.tracer.placeholder(python_name(external.name), external.shape, dtype,
                                                  optional=external.name not in read and index > last_read)
            self.bind(external.name, placeholder)
        for op in self.graph.operations:
            handler = self.special.get(op.name)
            try:
                if handler is not None:
                    handler(op)
                else:
                    self.operation(op)
            except NNEFError as error:
                if error.location is None:
                    error.location = op.location
                raise
            except (TypeError, ValueError, IndexError, KeyError, RuntimeError, NotImplementedError) as error:
                raise NNEFUnsupportedError(f"cannot convert '{op.name}' to torch: {error}", op.location) from error
        for slot_path, value in self.writes:
            target = self.tracer.create_proxy("get_attr", slot_path, (), {})
            self.tracer.create_proxy("call_function", state.write_state, (target, value), {})
        outputs = tuple(self.env[name] for name in self.graph.outputs)
        result = outputs[0] if len(outputs) == 1 else outputs
        self.tracer.create_node("output", "output", (self.tracer.create_arg(result),), {})
        fx_graph = self.tracer.graph
        fx_graph.owning_module = self.root  # dead-code elimination asks it whether call_module nodes are pure
        fold_reshapes(fx_graph)
        fx_graph.eliminate_dead_code()  # which lints the graph first; erasing unused nodes keeps it sound
        return fx_graph

    # -- the three ops that are part of the signature --
    def external(self, op: Operation) -> None:
        pass  # placeholders were made first, in declaration order

    def variable(self, op: Operation) -> None:
        variable = self.variables[op.outputs["output"].name]
        slot = self.slots[variable.key]
        if slot.path in self.state_reads:
            self.bind(variable.name, self.state_reads[slot.path])
            return
        tensor = self.slot_tensor(slot)
        proxy = self.tracer.get_attr(slot.path, slot.shape, tensor.dtype, name=python_name(variable.name))
        if slot.updated:
            proxy = self.tracer.create_proxy("call_function", state.read_state, (proxy,), {},
                                             name=python_name(variable.name) + "_old")
            annotate(proxy, slot.shape, tensor.dtype)
            self.state_reads[slot.path] = proxy
        self.bind(variable.name, proxy)

    def slot_tensor(self, slot: Slot) -> torch.Tensor:
        """The Parameter (a slot that is not state) or buffer of `slot` on the root."""
        module_path, _, leaf = slot.path.rpartition(".")
        owner = self.owners.get(module_path)
        if owner is None:
            owner = self.owners[module_path] = self.root.get_submodule(module_path)
        tensor = owner._parameters.get(leaf) if not slot.state else None
        return tensor if tensor is not None else self.root.get_buffer(slot.path)

    def update(self, op: Operation) -> None:
        target = op.inputs["variable"].name
        value = self.value(op.inputs["value"])
        self.writes.append((self.slots[self.variables[target].key].path, value))
        self.env[op.outputs["result"].name] = value

    # -- every other operation --
    def operation(self, op: Operation) -> None:
        fn = self.find(op.name, self.graph.dialect)
        args = [self.value(value) for value in op.inputs.values()]
        kwargs = {python_name(key): value for key, value in op.attribs.items()}
        before = _last_node(self.tracer.graph)
        entry = registry.entry(op.name, "torch", dialect=self.graph.dialect)
        if op.name in self.custom:
            result = self._custom_call(fn, args, kwargs, op)
        elif entry is not None and entry.module is not None:
            result = self.tracer.create_proxy("call_module", self.submodule(OP_MODULES, op, entry.module(**kwargs)),
                                              tuple(args), {})
        else:
            if entry is not None and entry.typed:
                kwargs["dtype"] = declared_dtype(op.dtype or "scalar", self.float_dtype)
            result = fn(*args, **kwargs)
        fresh = _nodes_after(self.tracer.graph, before)
        results = list(op.outputs.values())
        first = results[0][0] if isinstance(results[0], list) and results[0] else results[0]
        for node in fresh:  # the op's helpers; `bind` marks each result's own node
            node.meta[DOCUMENT_TENSOR] = first.name if isinstance(first, Ref) else op.name
        values = [result] if len(results) == 1 else list(result)
        if len(values) != len(results):
            raise NNEFUnsupportedError(f"'{op.name}' returned {len(values)} results, expected {len(results)}",
                                       op.location)
        for ref, value in zip(results, values):
            if isinstance(ref, list):
                if len(value) != len(ref):
                    raise NNEFUnsupportedError(f"'{op.name}' returned {len(value)} tensors, expected {len(ref)}",
                                               op.location)
                for item_ref, item in zip(ref, value):
                    self.bind(item_ref.name, item, fresh)
            else:
                self.bind(ref.name, value, fresh)

    def _custom_call(self, fn: Callable, args: list, kwargs: dict, op: Operation) -> Any:
        """A user's implementation stays one opaque call in the generated code (it need not be traceable)."""
        proxy = self.tracer.create_proxy("call_function", fn, tuple(args), kwargs)
        results = list(op.outputs.values())
        if len(results) == 1 and not isinstance(results[0], list):
            return proxy
        if len(results) == 1:
            return [proxy[i] for i in range(len(results[0]))]
        return tuple(proxy[i] if not isinstance(ref, list) else [proxy[i][j] for j in range(len(ref))]
                     for i, ref in enumerate(results))

    # -- values --
    def value(self, value: Any) -> Any:
        if isinstance(value, Ref):
            return self.env[value.name]
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def bind(self, name: str, value: Any, fresh: set[fx.Node] = frozenset()) -> None:
        """Record tensor `name` (applying its graph.quant entry) with its static shape and dtype; a node made
        for it alone takes its name, so the generated code reads like the graph."""
        tensor = self.graph.tensors[name]
        if not isinstance(value, fx.Proxy):
            value = self.tracer.proxy(self.tracer.create_arg(torch.as_tensor(value)))
        dtype = value.node.meta.get("nnef_dtype") if value.node.op in ("placeholder", "get_attr") else None
        annotate(value, tensor.shape, dtype or declared_dtype(tensor.dtype or "scalar", self.float_dtype))
        if value.node in fresh:
            value.node.meta[DOCUMENT_TENSOR] = name
        spec = self.graph.quantization.get(name)
        if spec is not None:
            before = _last_node(self.tracer.graph)
            if spec.op in OPS and spec.op not in self.custom:
                quantized = self.tracer.create_proxy("call_module", self.quantizer(name, spec), (value,), {})
            else:
                fn = self.find(spec.op, self.graph.dialect)
                quantized = fn(value, **{python_name(key): arg for key, arg in spec.args.items()})
            fresh = _nodes_after(self.tracer.graph, before)
            for node in fresh:
                node.meta[DOCUMENT_TENSOR] = name
            annotate(quantized, tensor.shape, value.node.meta["nnef_dtype"])
            value = quantized
        if value.node in fresh:
            value.node._rename(python_name(name))
        self.env[name] = value

    def submodule(self, holder_name: str, op: Operation, module: torch.nn.Module) -> str:
        """Register `module` for operation `op` under the root's `holder_name`, named after its first result."""
        holder = self.root._modules.get(holder_name)
        if holder is None:
            holder = torch.nn.Module()
            self.root.add_module(holder_name, holder)
        first = next(iter(op.outputs.values()))
        key = python_name(first.name if isinstance(first, Ref) else op.name)
        holder.add_module(key, module)
        return f"{holder_name}.{key}"

    def quantizer(self, name: str, spec: Any) -> str:
        """Register the FakeQuantize of tensor `name`'s graph.quant entry on the root (the one it holds already,
        where the graph is generated again for other input shapes); its submodule path."""
        holder = self.root._modules.get(QUANTIZERS)
        if holder is None:
            holder = torch.nn.Module()
            self.root.add_module(QUANTIZERS, holder)
        key = python_name(name)
        try:
            if key not in holder._modules:
                holder.add_module(key, FakeQuantize.from_spec(spec))
        except ValueError as error:
            raise NNEFUnsupportedError(f"graph.quant entry of '{name}': {error}", spec.location) from error
        self.quantizers[name] = f"{QUANTIZERS}.{key}"
        return self.quantizers[name]


def unbound_graph(graph: Graph, reason: str) -> fx.Graph:
    """The fx graph of a module whose input shapes bind at its first call (`ModelInfo.unbound`): its inputs, and
    one call that raises, for what runs the graph itself rather than calling the module (torch.export,
    `fx.Interpreter`)."""
    fx_graph = fx.Graph()
    for external in graph.signature.externals:
        fx_graph.placeholder(python_name(external.name))
    fx_graph.output(fx_graph.call_function(not_bound, (reason,)))
    return fx_graph


def not_bound(reason: str) -> None:
    raise NNEFOptionError(f"the module's input shapes bind at its first call ({reason}): call it once before "
                          "running its graph otherwise (torch.export, fx), or load it with input_shapes=")


def _last_node(graph: fx.Graph) -> fx.Node | None:
    return next(iter(reversed(graph.nodes)), None)


def _nodes_after(graph: fx.Graph, last: fx.Node | None) -> set[fx.Node]:
    """The nodes made since `last` was the last one (nodes are only appended while building)."""
    fresh = set()
    for node in reversed(graph.nodes):
        if node is last:
            break
        fresh.add(node)
    return fresh
