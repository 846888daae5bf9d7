"""Export with a variable batch size: only the `external` declarations hold the batch extent.

The batch axis is marked, never guessed: axis 0 of every input, an axis of every input, or one axis (None: none)
per input. The export runs in three steps:

1. torch.export traces the module once with a symbolic batch (one `torch.export.Dim` shared by every batch axis).
   Where torch finds that the code fixes the batch (a literal `reshape(4, -1)`, a `torch.zeros(4, 8) + x`, a
   branch on `x.shape[0]`), the export stops with the operation and the user's source line: they are taken from
   the guards torch records while tracing (its `torch.fx.experimental.symbolic_shapes` log, read at INFO level for
   the duration of the trace).
2. The module is exported twice, at two batch sizes that no other extent of the inputs has, through the usual
   pipeline. The two IR graphs must have the same operations; each attribute that differs between them depends on
   the batch and is rewritten relative to it: `reshape` shapes get 0 (the input's extent) or -1, `slice` bounds are
   counted from the end, and batch-sized constants and `tile`s become their batch-independent part broadcast to a
   batch-sized zero tensor. That zero tensor comes from a scalar graph input with a batch axis: one element per
   batch item (`slice`), reshaped and multiplied by 0.0, so an infinity or NaN in that element of the input makes
   the broadcast constant NaN. Any other difference (padding, split ratios, a literal computed from the batch)
   stops the export, naming the operation.
3. The text is read back at the example batch and at both traced batches; every tensor must get the shape torch
   computed, and `Model.graph` carries the shapes at the example batch.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFError
from nnef_torch.exporter.batch_guards import check_symbolic, rebatched
from nnef_torch.exporter.emitter import exporter_fragments
from nnef_torch.exporter.export import Built, build, finish
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.problems import Problem, error_problem, node_problem
from nnef_torch.exporter.quantization import QuantExport
from nnef_torch.exporter.trace import example_tuple, explain
from nnef_torch.format.parser import parse_document
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import External, Graph, Operation, Ref, Signature, Variable
from nnef_torch.ir.lower import lower
from nnef_torch.phases import phase

# batch sizes the two concrete traces may use: primes, so that no product of other extents equals one by chance
TRACE_BATCHES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53)


def batch_axes(dynamic_batch: bool | int | Sequence[int | None], count: int) -> list[int | None]:
    """One batch axis (or None) per input, from `dynamic_batch`: True (axis 0 of every input), an axis of every
    input, or a sequence with one axis or None per input."""
    if dynamic_batch is True:
        return [0] * count
    if isinstance(dynamic_batch, int) and not isinstance(dynamic_batch, bool):
        return [dynamic_batch] * count
    if isinstance(dynamic_batch, Sequence) and not isinstance(dynamic_batch, str):
        axes = list(dynamic_batch)
        if len(axes) != count or not all(a is None or (isinstance(a, int) and not isinstance(a, bool))
                                         for a in axes):
            raise ExportError(f"dynamic_batch={dynamic_batch!r}: expected one axis (or None) per input, for "
                              f"{count} input(s)")
        return axes
    raise ExportError(f"dynamic_batch must be True, an axis, or one axis (or None) per input, not "
                      f"{dynamic_batch!r}")


def export_dynamic(module: torch.nn.Module, example_inputs: Any, dynamic_batch: bool | int | Sequence[int | None],
                   options: QuantExport, fold: bool = False) -> Model:
    """`module` (already prepared by `export.prepare`) exported with a variable batch size; the text declares
    the example batch. `fold`: inference batch norms folded (`exporter.fold`)."""
    inputs = example_tuple(example_inputs)
    axes = _checked_axes(inputs, batch_axes(dynamic_batch, len(inputs)))
    batch = _example_batch(inputs, axes)
    sizes = _trace_sizes(inputs, axes)
    name = type(module).__name__
    # traced symbolically at the example batch where torch can (it specializes 0 and 1): its guards then say
    # "batch == example" where the code fixes the batch
    with phase(f"tracing {name} with a symbolic batch"):
        deferred = check_symbolic(module, inputs, axes, batch if batch >= 2 else sizes[0])
    with phase(f"tracing {name} at batch {sizes[0]}"):
        first = build(module, rebatched(inputs, axes, sizes[0]), options, fold=fold)
    with phase(f"tracing {name} at batch {sizes[1]}"):
        second = build(module, rebatched(inputs, axes, sizes[1]), options, fold=fold)
    if deferred is not None:  # torch could not trace a symbolic batch, though it traces concrete ones
        raise ExportError(f"{name} cannot be exported with a variable batch size: torch.export fails with a "
                          "symbolic batch:", [error_problem(deferred, explain(deferred))]) from deferred
    names = [external.name for external in first.graph.signature.externals]
    by_name = {external: axis for external, axis in zip(names, axes) if axis is not None}
    rewrite = _Rewrite(first, second, sizes, by_name, batch)
    graph, data = rewrite.run()
    model = finish(graph, data, first.emit.fragments, options)
    with phase(f"reading {name} back at batches {sizes[0]}, {sizes[1]} and {batch}"):
        shapes = _read_back(model, rewrite, sizes, batch)
    tensors = {key: dataclasses.replace(tensor, shape=shapes.get(key, tensor.shape))
               for key, tensor in model.graph.tensors.items()}
    return dataclasses.replace(model, graph=dataclasses.replace(model.graph, tensors=tensors))


# ------------------------------------------------------------------------------------------------ inputs
def _checked_axes(inputs: tuple[Any, ...], axes: list[int | None]) -> list[int | None]:
    checked: list[int | None] = []
    for index, (value, axis) in enumerate(zip(inputs, axes)):
        if axis is None:
            checked.append(None)
            continue
        if not isinstance(value, torch.Tensor):
            raise ExportError(f"input {index} is a {type(value).__name__}, which has no batch axis: give it the "
                              "batch axis None in dynamic_batch")
        if not -value.dim() <= axis < value.dim():
            raise ExportError(f"input {index} has shape {list(value.shape)}, which has no axis {axis} to be the "
                              "batch axis")
        checked.append(axis % value.dim())
    if all(axis is None for axis in checked):
        raise ExportError("dynamic_batch names no batch axis of any input")
    return checked


def _example_batch(inputs: tuple[Any, ...], axes: list[int | None]) -> int:
    extents = {int(value.shape[axis]) for value, axis in zip(inputs, axes) if axis is not None}
    if len(extents) != 1:
        raise ExportError(f"the inputs' batch axes have different extents {sorted(extents)}: one batch size is "
                          "shared by every input")
    return extents.pop()


def _trace_sizes(inputs: tuple[Any, ...], axes: list[int | None]) -> tuple[int, int]:
    """Two batch sizes that are not the extent of any other axis of an input."""
    taken = {int(extent) for value, axis in zip(inputs, axes) if isinstance(value, torch.Tensor)
             for d, extent in enumerate(value.shape) if d != axis}
    free = [size for size in TRACE_BATCHES if size not in taken]
    return free[0], free[1]


# ------------------------------------------------------------------------------------------------ rewrite
class _Rewrite:
    """The graph of the first trace with every attribute that differs in the second written relative to the
    batch, and the variables' data to go with it."""

    def __init__(self, first: Built, second: Built, sizes: tuple[int, int], axes: dict[str, int], batch: int):
        self.first, self.second = first, second
        self.graphs = (first.graph, second.graph)
        self.sizes = sizes
        self.axes = axes  # external name -> batch axis
        self.batch = batch
        self.data = dict(first.emit.data)
        self.out = Builder(exporter_fragments(), reserved=list(first.graph.tensors))
        self.out.tensors.update(first.graph.tensors)
        self.variables = {variable.name: variable for variable in first.graph.signature.variables}
        self.zeros: dict[tuple[int, int], Ref] = {}
        self.probe: Ref | None = None
        self.placed: set[str] = set()  # externals already written (the probe's may be written early)
        self.externals = {op.outputs["output"].name: op for op in first.graph.operations if op.name == "external"}

    # -- the whole graph --
    def run(self) -> tuple[Graph, dict[str, torch.Tensor]]:
        ops1, ops2 = self.graphs[0].operations, self.graphs[1].operations
        for index in range(max(len(ops1), len(ops2))):
            if index >= len(ops1) or index >= len(ops2):
                self.fail(ops1[min(index, len(ops1) - 1)], "the graph has a different number of operations at "
                          f"batch {self.sizes[0]} and at batch {self.sizes[1]}: it changes with the batch here")
            op1, op2 = ops1[index], ops2[index]
            self._same_structure(op1, op2)
            changed = [key for key in op1.attribs if op1.attribs[key] != op2.attribs.get(key)]
            if op1.name == "external":
                self._external(op1, changed)
            elif not changed:
                self.out.operations.append(op1)
            else:
                rule = _RULES.get(op1.name)
                if rule is None:
                    self.fail(op1, f"{self._changes(op1, op2, changed)}: {op1.name} has no form relative to the "
                                   "batch")
                rule(self, op1, op2, changed)
        return self._graph(), self.data

    def _same_structure(self, op1: Operation, op2: Operation) -> None:
        if op1.name != op2.name or op1.outputs != op2.outputs:
            self.fail(op1, f"the graph changes with the batch here: '{op1.name}' at batch {self.sizes[0]}, "
                           f"'{op2.name}' at batch {self.sizes[1]}")
        if op1.inputs != op2.inputs or op1.dtype != op2.dtype:
            changed = [key for key in op1.inputs if op1.inputs[key] != op2.inputs.get(key)]
            shown = ", ".join(f"{key} = {op1.inputs[key]!r} at batch {self.sizes[0]} and {op2.inputs.get(key)!r} "
                              f"at batch {self.sizes[1]}" for key in changed) or "its element type"
            self.fail(op1, f"{op1.name}: {shown}; a value computed from the batch size has no NNEF form")

    def _graph(self) -> Graph:
        operations = []
        for op in self.out.operations:
            if op.name == "external":
                name = op.outputs["output"].name
                shape = list(op.attribs["shape"])
                if name in self.axes:
                    shape[self.axes[name]] = self.batch
                op = dataclasses.replace(op, attribs={**op.attribs, "shape": shape})
            operations.append(op)
        graph = self.graphs[0]
        externals = tuple(External(e.name, e.dtype, tuple(
            self.batch if e.name in self.axes and d == self.axes[e.name] else extent
            for d, extent in enumerate(e.shape))) for e in graph.signature.externals)
        signature = Signature(externals, tuple(self.variables.values()), graph.signature.updates,
                              graph.signature.outputs)
        return dataclasses.replace(graph, tensors=dict(self.out.tensors), operations=tuple(operations),
                                   signature=signature)

    # -- per operation --
    def _external(self, op: Operation, changed: list[str]) -> None:
        name = op.outputs["output"].name
        shapes = [graph.tensors[name].shape for graph in self.graphs]
        moved = [d for d, (a, b) in enumerate(zip(*shapes)) if a != b]
        if moved != ([self.axes[name]] if name in self.axes else []) or changed not in ([], ["shape"]):
            self.fail(op, f"input '{name}' changes shape {list(shapes[0])} -> {list(shapes[1])}, not only along "
                          "its batch axis")
        if name not in self.placed:
            self.placed.add(name)
            self.out.operations.append(op)

    def reshape(self, op1: Operation, op2: Operation, changed: list[str]) -> None:
        if changed != ["shape"]:
            self.fail(op1, self._changes(op1, op2, changed))
        start = op1.attribs.get("axis_start", 0)
        inputs = [self.shape(op.inputs["input"], k) for k, op in enumerate((op1, op2))]
        outputs = [self.shape(op.outputs["output"], k) for k, op in enumerate((op1, op2))]
        shape1, shape2 = op1.attribs["shape"], op2.attribs["shape"]
        shape = list(shape1)
        for i, (a, b) in enumerate(zip(shape1, shape2)):
            if a == b and a != -1:
                continue
            if a == b:  # an inferred extent that stays: written out, leaving -1 for the batch
                if outputs[0][start + i] == outputs[1][start + i]:
                    shape[i] = outputs[0][start + i]
                continue
            copies = start + i < len(inputs[0]) and a == inputs[0][start + i] and b == inputs[1][start + i]
            shape[i] = 0 if copies else -1
        if shape.count(-1) > 1:
            self.fail(op1, f"reshape to {shape1} at batch {self.sizes[0]} and {shape2} at batch {self.sizes[1]}: "
                           "more than one extent follows the batch, and NNEF infers only one (-1)")
        self.out.operations.append(dataclasses.replace(op1, attribs={**op1.attribs, "shape": shape}))

    def slice(self, op1: Operation, op2: Operation, changed: list[str]) -> None:
        if not set(changed) <= {"begin", "end"}:
            self.fail(op1, self._changes(op1, op2, changed))
        inputs = [self.shape(op.inputs["input"], k) for k, op in enumerate((op1, op2))]
        axes, stride = op1.attribs["axes"], op1.attribs.get("stride") or []
        attribs = dict(op1.attribs)
        for key in ("begin", "end"):
            values = list(op1.attribs[key])
            for i, axis in enumerate(axes):
                a, b = op1.attribs[key][i], op2.attribs[key][i]
                if a == b:
                    continue
                offset = a - inputs[0][axis]
                if offset != b - inputs[1][axis] or offset > 0 or (offset == 0 and key == "begin"):
                    self.fail(op1, f"slice {key} {a} at batch {self.sizes[0]} and {b} at batch {self.sizes[1]} "
                                   f"(axis {axis} of extents {inputs[0][axis]} and {inputs[1][axis]}) is not "
                                   "a fixed distance from the end")
                if offset == 0 and any(step != 1 for step in stride):  # end 0 means 'to the end' at stride 1 only
                    self.fail(op1, "a strided slice to the end of an axis that follows the batch has no NNEF form")
                values[i] = offset
            attribs[key] = values
        self.out.operations.append(dataclasses.replace(op1, attribs=attribs))

    def constant(self, op1: Operation, op2: Operation, changed: list[str]) -> None:
        shape1, shape2 = op1.attribs["shape"], op2.attribs["shape"]
        axis = self._batch_axis(op1, shape1, shape2)
        values1, values2 = op1.attribs["value"], op2.attribs["value"]
        name = op1.outputs["output"].name
        if len(values1) == 1 and values1 == values2:
            self._scalar(op1)
            self._filled(name, shape1, axis, values1[0])
            return
        part = self._batch_part(op1, torch.tensor(values1).reshape(shape1), torch.tensor(values2).reshape(shape2),
                                axis)
        self._scalar(op1)
        self.out.begin(name)
        ref = self.out.op("constant", shape=list(part.shape), value=part.reshape(-1).tolist(), generic="scalar")
        self._broadcast(name, ref, len(shape1), axis)

    def variable(self, op1: Operation, op2: Operation, changed: list[str]) -> None:
        shape1, shape2 = op1.attribs["shape"], op2.attribs["shape"]
        axis = self._batch_axis(op1, shape1, shape2)
        label, name = op1.attribs["label"], op1.outputs["output"].name
        part = self._batch_part(op1, self.first.emit.data[label], self.second.emit.data[label], axis)
        self._scalar(op1)
        del self.variables[name]
        if bool((part == part.reshape(-1)[0]).all()):  # one value: no variable needed
            del self.data[label]
            self._filled(name, shape1, axis, part.reshape(-1)[0].item())
            return
        self.out.begin(name)
        ref = self.out.op("variable", shape=list(part.shape), label=label, generic="scalar",
                          out_shape=tuple(part.shape))
        self.variables[ref.name] = Variable(ref.name, label, "scalar", tuple(part.shape))
        self.data[label] = part.clone()
        self._broadcast(name, ref, len(shape1), axis)

    def tile(self, op1: Operation, op2: Operation, changed: list[str]) -> None:
        source = op1.inputs["input"]
        shape = self.shape(source, 0)
        out1, out2 = self.shape(op1.outputs["output"], 0), self.shape(op2.outputs["output"], 1)
        axis = self._batch_axis(op1, out1, out2)
        if changed != ["repeats"] or shape[axis] != 1 or self.shape(source, 1)[axis] != 1:
            self.fail(op1, f"{self._changes(op1, op2, changed)}: only an axis of extent 1 repeated to the batch "
                           "size has a form relative to the batch")
        self._scalar(op1)
        repeats = list(op1.attribs["repeats"])
        repeats[axis] = 1
        name = op1.outputs["output"].name
        self.out.begin(name)
        part = self.out.op("tile", source, repeats=repeats) if any(r != 1 for r in repeats) else source
        self._broadcast(name, part, len(out1), axis)

    # -- batch-sized tensors --
    def _batch_axis(self, op: Operation, shape1: Sequence[int], shape2: Sequence[int]) -> int:
        moved = [d for d, (a, b) in enumerate(zip(shape1, shape2)) if a != b]
        if len(shape1) != len(shape2) or len(moved) != 1 or \
                (shape1[moved[0]], shape2[moved[0]]) != self.sizes:
            self.fail(op, f"shape {list(shape1)} at batch {self.sizes[0]} and {list(shape2)} at batch "
                          f"{self.sizes[1]}: only one axis of the batch's extent has a form relative to the batch")
        return moved[0]

    def _scalar(self, op: Operation) -> None:
        if op.dtype not in (None, "scalar"):
            self.fail(op, f"a batch-sized {op.dtype} tensor: only scalar tensors can be broadcast to the batch "
                          "size in NNEF")

    def _batch_part(self, op: Operation, value1: torch.Tensor, value2: torch.Tensor, axis: int) -> torch.Tensor:
        """The one slice along `axis` that both values repeat; fails where the values vary along it."""
        part = value1.narrow(axis, 0, 1)
        if not (torch.equal(value1, part.expand_as(value1)) and torch.equal(value2, part.expand_as(value2))):
            self.fail(op, "its values vary along the batch axis, so they depend on the batch size")
        return part.contiguous()

    def _filled(self, name: str, shape: Sequence[int], axis: int, value: Any) -> None:
        """`name` = a tensor of `shape` (the batch along `axis`) filled with `value`."""
        repeats = [1 if d == axis else extent for d, extent in enumerate(shape)]
        zero = self.zero(len(shape), axis)
        self.out.begin(name)
        if value != 0:
            filled = self.out.op("tile", zero, repeats=repeats) if any(r != 1 for r in repeats) else zero
            self.out.op("add", filled, float(value), out_name=name)
        elif any(r != 1 for r in repeats):
            self.out.op("tile", zero, repeats=repeats, out_name=name)
        else:
            self.out.op("copy", zero, out_name=name)

    def _broadcast(self, name: str, part: Any, rank: int, axis: int) -> None:
        self.out.op("add", self.zero(rank, axis), part, out_name=name)

    def zero(self, rank: int, axis: int) -> Ref:
        """A zero tensor of `rank` whose extent along `axis` is the batch and 1 elsewhere (written once)."""
        key = (rank, axis)
        if key not in self.zeros:
            probe, probe_axis, probe_rank = self._probe()
            self.out.begin("batch")
            shaped = probe
            if (probe_rank, probe_axis) != (rank, axis):
                shaped = self.out.op("reshape", probe, shape=[-1 if d == axis else 1 for d in range(rank)])
            self.zeros[key] = self.out.op("mul", shaped, 0.0)
        return self.zeros[key]

    def _probe(self) -> tuple[Ref, int, int]:
        """One element per batch item of the first scalar input with a batch axis: [1, .., batch, .., 1]."""
        candidates = [e for e in self.graphs[0].signature.externals if e.name in self.axes and e.dtype == "scalar"]
        if not candidates:
            self.fail(None, "a batch-sized constant needs a scalar (floating-point) input with a batch axis to "
                            "take the batch size from, and the module has none")
        external = candidates[0]
        axis, rank = self.axes[external.name], len(external.shape)
        if self.probe is None:
            if external.name not in self.placed:  # written before the operations that use it
                self.placed.add(external.name)
                self.out.operations.append(self.externals[external.name])
            self.out.begin("batch")
            others = [d for d in range(rank) if d != axis]
            ref = Ref(external.name)
            self.probe = self.out.op("slice", ref, axes=others, begin=[0] * len(others), end=[1] * len(others)) \
                if others else ref
        return self.probe, axis, rank

    # -- messages --
    def shape(self, ref: Any, which: int) -> tuple[int, ...]:
        if not isinstance(ref, Ref):
            return ()
        graph = self.graphs[which]
        if ref.name in graph.tensors:
            return tuple(graph.tensors[ref.name].shape)
        return tuple(self.out.tensors[ref.name].shape)

    def _changes(self, op1: Operation, op2: Operation, changed: list[str]) -> str:
        return f"{op1.name}: " + ", ".join(f"{key} = {op1.attribs[key]} at batch {self.sizes[0]} and "
                                           f"{op2.attribs.get(key)} at batch {self.sizes[1]}" for key in changed)

    def fail(self, op: Operation | None, reason: str) -> None:
        name = self.graphs[0].name
        raise ExportError(f"{name} cannot be exported with a variable batch size:",
                          [self.problem(op, reason)])

    def problem(self, op: Operation | None, reason: str) -> Problem:
        node = _node_of(op, self.first.program) if op is not None else None
        if node is None:
            where = f" (writing '{next(op.output_refs()).name}')" if op is not None else ""
            return Problem(reason + where)
        return node_problem(node, reason)


_RULES = {"reshape": _Rewrite.reshape, "slice": _Rewrite.slice, "constant": _Rewrite.constant,
          "variable": _Rewrite.variable, "tile": _Rewrite.tile}


def _node_of(op: Operation, program: torch.export.ExportedProgram) -> torch.fx.Node | None:
    """The traced node an operation was written for: its results are named after the node."""
    outputs = [ref.name for ref in op.output_refs()]
    best = None
    for node in program.graph.nodes:
        if any(out == node.name or out.startswith(node.name + "_") for out in outputs):
            if best is None or len(node.name) > len(best.name):
                best = node
    return best


# ------------------------------------------------------------------------------------------------ read back
def _read_back(model: Model, rewrite: _Rewrite, sizes: tuple[int, int], batch: int) -> dict[str, tuple[int, ...]]:
    """Read the text at both traced batches, where every tensor must have the shape torch gave it, and at the
    example batch: the shapes there. The text is standard NNEF (no dialect): it is parsed and lowered as the
    reader does (`lower` is the layer below the reader)."""
    expected = ({name: tensor.shape for name, tensor in rewrite.out.tensors.items()},
                {name: tensor.shape for name, tensor in rewrite.graphs[1].tensors.items()})
    graph = model.graph
    for size, shapes in zip((*sizes, batch), (*expected, None)):
        inputs = {e.name: tuple(size if e.name in rewrite.axes and d == rewrite.axes[e.name] else extent
                                for d, extent in enumerate(e.shape)) for e in graph.signature.externals}
        try:
            read = lower(parse_document(model.text, f"{graph.name} (batch {size})"), input_shapes=inputs,
                         text=model.text, lenient=True)
        except NNEFError as error:
            raise ExportError(f"{graph.name} cannot be exported with a variable batch size: its text does not "
                              f"read at batch {size}: {error} (a bug in nnef_torch)") from error
        if shapes is None:
            return {name: tensor.shape for name, tensor in read.tensors.items()}
        for op in graph.operations:
            if op.name == "variable":  # declared, maybe in the shape its readers take (exporter.variable_shapes)
                continue
            for ref in op.output_refs():
                found = read.tensors.get(ref.name)
                if found is not None and ref.name in shapes and found.shape != tuple(shapes[ref.name]):
                    rewrite.fail(op, f"written relative to the batch, '{ref.name}' has shape {list(found.shape)} "
                                     f"at batch {size} where torch computes {list(shapes[ref.name])}")
    return {}
