"""The LightNet back end: an IR graph and its variables' values -> LightNet's JSON IR and a .wts weight file.

The writer follows the conventions of LightNet's own tools (`tools/il2json`, `tools/onnx2ln`): op names are the
optype and a count per optype (`conv2d0`, `conv2d1`), tensor names are C identifiers, unique in the file (the NNEF
tensor names where they are free), params come in the order the op definitions list them, and numbers are JSON
numbers. Each graph input is a `create` op (`data: [0]`, `ran: [0, 0]`, `from_file: false`) named after the input,
in input order, before every other op; the graph's outputs are the tensors no op reads, in output order (a
`forward` copies an output that another op reads, that is an input, that repeats another, or that would come out
of order).

Every NNEF operation is written by its rule in the op table's `lightnet` facet (`registry.write_rule`), called as
`rule(writer, op)`. Variables and constants are values, not ops: an operation whose inputs are all values is
folded (computed by the op table's torch implementation), so the reshapes and unsqueezes the exporter writes
around weights cost nothing, and a value becomes a `create` op where an op reads it, in the shape that op needs.
Values made from variables go to the .wts file (`from_file: true`) unless `weights='inline'`; other constants are
written inline. Every operation without a LightNet form is collected, and one `ExportError` lists them all.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnef_torch.errors import ExportError
from nnef_torch.exporter.problems import Problem
from nnef_torch.format import container
from nnef_torch.formats.lightnet.convert import SIDE_EFFECTS
from nnef_torch.formats.lightnet.optypes import OPTYPES, check_param
from nnef_torch.formats.lightnet.write_json import LightNetModel, numbers, wts_path
from nnef_torch.ir.builder import Unmappable, unique_identifier
from nnef_torch.ir.graph import Graph, Operation, Ref, Variable
from nnef_torch.ops import registry

FORMAT = "lightnet"
WEIGHTS = ("file", "inline")
DTYPES = {"scalar": "TL_FLOAT", "integer": "TL_INT32", "logical": "TL_BOOL"}  # NNEF type -> TensorLight dtype
MAX_NAME = 400  # LightNet names hold at most 511 bytes; leave room for the suffixes it adds itself
_SIGNATURE_OPS = ("external", "variable", "constant")
OBSERVERS = ("print", "fprint")  # optypes that read a tensor without consuming it (it stays an output)

__all__ = ["DTYPES", "FORMAT", "WEIGHTS", "Const", "LightNetModel", "Live", "Unmappable", "Writer", "lightnet_rules",
           "save_lightnet", "write_graph", "wts_path"]


@dataclass(frozen=True)
class Live:
    """A tensor LightNet computes: the name of a tensor of the file and its shape."""

    name: str
    shape: tuple[int, ...]


class Const:
    """A value known when writing (a variable, a constant, or what an operation of those computes), read on first
    use. `origin`: the NNEF name of the variable it is a view of (its `create` op is named after it); `stored`: it
    comes from variables, so it is written to the .wts file."""

    def __init__(self, shape: Sequence[int], dtype: str, load: Callable[[], Any], origin: str | None = None,
                 stored: bool = False):
        self.shape = tuple(int(extent) for extent in shape)
        self.dtype = dtype
        self._load: Callable[[], Any] | None = load
        self._array: np.ndarray | None = None
        self.origin = origin
        self.stored = stored

    def array(self) -> np.ndarray:
        if self._array is None:
            assert self._load is not None
            self._array = np.broadcast_to(_numpy(self._load()), self.shape)
            self._load = None
        return self._array


class _Failed:
    """The value of an operation that could not be written (its problem is reported); ops reading it are skipped."""


FAILED = _Failed()


def write_graph(graph: Graph, values: Callable[[Variable], Any], *, weights: str = "file",
                located: bool = True) -> LightNetModel:
    """Write `graph` as LightNet; `values(variable)` gives each variable's data (an array or a tensor), read only
    where an operation uses it. Raises `ExportError` listing every operation without a LightNet form, at its line
    of the graph text where `located` (not for the text of an export, which the user never saw)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    return Writer(graph, values, weights, located).write()


class Writer:
    """Writes one graph. Rules see it as `w`: they read their inputs (`value`, `shape`, `array`, `tensor`), write
    LightNet ops (`emit`), and bind the NNEF results (`result`, `alias`)."""

    def __init__(self, graph: Graph, values: Callable[[Variable], Any], weights: str = "file",
                 located: bool = True):
        self.graph = graph
        self.located = located
        self.inline = weights == "inline"
        self.ops: list[dict[str, Any]] = []
        self.weights: dict[str, np.ndarray] = {}
        self.op: Operation | None = None  # the operation being written
        self._get = values
        self._values: dict[str, Live | Const | _Failed] = {}
        self._shapes: dict[str, tuple[int, ...]] = {}  # LightNet tensor -> shape
        self._counts: dict[str, int] = {}
        self._used: set[str] = set()
        self._reserved = set(graph.tensors)  # NNEF names stay free for the results they name
        self._made: dict[tuple[Any, tuple[int, ...]], str] = {}  # (Const or its origin, shape) -> create's tensor
        self._reshaped: dict[tuple[str, tuple[int, ...]], str] = {}
        self._reshape_of: dict[str, str] = {}  # the result of a reshape op -> its source
        self._producers: dict[str, dict[str, Any]] = {}  # tensor -> the op that writes it
        self._inputs: list[str] = []

    # ------------------------------------------------------------------------------------------ reading inputs
    def value(self, x: Any) -> Live | Const:
        """What an operation input is: a LightNet tensor, or a value (a literal is a value of shape ())."""
        if isinstance(x, Ref):
            found = self._values[x.name]
            assert not isinstance(found, _Failed)
            return found
        if isinstance(x, (list, tuple)):
            raise Unmappable("expected one tensor, found an array of tensors")
        dtype = "logical" if isinstance(x, bool) else "integer" if isinstance(x, int) else "scalar"
        return Const((), dtype, lambda: np.asarray(x))

    def shape(self, x: Any) -> tuple[int, ...]:
        return self.value(x).shape

    def rank(self, x: Any) -> int:
        return len(self.shape(x))

    def array(self, x: Any) -> np.ndarray | None:
        """The data of a value input; None for a tensor LightNet computes."""
        found = self.value(x)
        return found.array() if isinstance(found, Const) else None

    def producer(self, name: str) -> dict[str, Any] | None:
        """The op (as written) whose result is tensor `name`; None for an input."""
        return self._producers.get(name)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        """The shape of LightNet tensor `name`."""
        return self._shapes[name]

    def result_shape(self, op: Operation, key: str | None = None) -> tuple[int, ...]:
        return self._nnef_shape(_output(op, key))

    def tensor(self, x: Any, shape: Sequence[int] | None = None, base: str | None = None) -> str:
        """The LightNet tensor holding input `x`, reshaped to `shape` when given (a value becomes a `create` op)."""
        found = self.value(x)
        target = found.shape if shape is None else tuple(int(extent) for extent in shape)
        if isinstance(found, Const):
            own = base is None and isinstance(x, Ref)
            return self.create(found, target, base or (x.name if isinstance(x, Ref) else self._base("value")), own)
        return self.reshape(found.name, target)

    def reshape(self, name: str, shape: Sequence[int], out: str | None = None) -> str:
        """`name` with shape `shape`: a `reshape` op (of the tensor a reshape made `name` from, so that chains of
        reshapes become one) unless it has that shape already. `out` names the result."""
        shape = tuple(int(extent) for extent in shape)
        have = self._shapes[name]
        if have == shape:
            return name
        if math.prod(have) != math.prod(shape):
            raise AssertionError(f"reshape of {name} {list(have)} to {list(shape)}")
        name = self._reshape_of.get(name, name)
        if self._shapes[name] == shape:
            return name
        key = (name, shape)
        if key not in self._reshaped:
            [made] = self.emit("reshape", {"src": name}, {"dims": list(shape)},
                               {"dst": out or self.temp(f"{name}_reshape")})
            self._reshaped[key] = made
            self._reshape_of[made] = name
        return self._reshaped[key]

    def create(self, const: Const, shape: Sequence[int], base: str, own: bool = False) -> str:
        """A `create` op holding `const` in `shape` (the same items, or broadcast where `shape` is larger), named
        after the variable it comes from, else after `base` (`own`: `base` is the NNEF name of this value)."""
        shape = tuple(int(extent) for extent in shape) or (1,)
        key = (const.origin if const.origin is not None else const, shape)  # views of one variable are one
        if key in self._made:
            return self._made[key]
        if const.dtype not in DTYPES:
            raise Unmappable(f"LightNet has no tensors of type {const.dtype}")
        data = const.array()
        data = data.reshape(shape) if data.size == math.prod(shape) else np.broadcast_to(
            data.reshape(data.shape + (1,) * (len(shape) - data.ndim)), shape)
        name = self._fresh(const.origin or base, own=own or const.origin is not None)
        dtype = DTYPES[const.dtype]
        params: dict[str, Any] = {"dtype": dtype, "dims": list(shape)}
        if const.stored and not self.inline and dtype == "TL_FLOAT":
            self.weights[name] = np.ascontiguousarray(data, dtype=np.float32)
            params.update(ran=[0, 0], data=[0], from_file=True)
        else:
            params.update(ran=[0, 0], data=numbers(data, dtype), from_file=False)
        self.emit("create", {}, params, {"dst": name})
        self._made[key] = name
        return name

    # ------------------------------------------------------------------------------------------ writing
    def emit(self, optype: str, inputs: Mapping[str, str], params: Mapping[str, Any],
             outputs: Mapping[str, str]) -> list[str]:
        """Append a LightNet op; returns its output tensor names (from `result` or `temp`). Tensors and params are
        written in the order the optype table (`optypes.OPTYPES`) declares them."""
        kind = OPTYPES[optype]
        assert set(inputs) == set(kind.tensors_in) and set(outputs) == set(kind.tensors_out), optype
        assert set(params) == {param.name for param in kind.params}, (optype, sorted(params))
        for param in kind.params:
            if param.name != "data":  # create's data: numbers() made them, one by one
                problem = check_param(kind, param, params[param.name])
                if problem is not None:
                    raise Unmappable(f"LightNet's {optype} param '{param.name}' {problem}")
        index = self._counts.get(optype, 0)
        self._counts[optype] = index + 1
        self.ops.append({"name": f"{optype}{index}", "optype": optype,
                         "tensors_in": [{"arg_name": arg, "name": inputs[arg]} for arg in kind.tensors_in],
                         "tensors_out": [{"arg_name": arg, "name": outputs[arg]} for arg in kind.tensors_out],
                         "params": [{"arg_name": param.name, "value": params[param.name]} for param in kind.params]})
        for name in outputs.values():
            self._producers[name] = self.ops[-1]
            if name not in self._shapes:
                self._shapes[name] = _infer(optype, [self._shapes[n] for n in inputs.values()], params)
        return [outputs[arg] for arg in kind.tensors_out]

    def result(self, op: Operation, key: str | None = None, index: int | None = None) -> str:
        """A name for the LightNet tensor of result `key` of `op` (by default its first; item `index` of an array
        result), its NNEF name where free, bound to it."""
        ref = _output(op, key, index)
        shape = self._nnef_shape(ref)
        if not shape:
            raise Unmappable("LightNet tensors have at least one dimension; this result has none")
        name = self._fresh(ref.name, own=True)
        self._shapes[name] = shape
        self._values[ref.name] = Live(name, shape)
        return name

    def temp(self, base: str, shape: Sequence[int] | None = None) -> str:
        """A name for an intermediate tensor."""
        name = self._fresh(base)
        if shape is not None:
            self._shapes[name] = tuple(shape)
        return name

    def alias(self, op: Operation, name: str, key: str | None = None, index: int | None = None) -> None:
        """Result `key` of `op` is the existing tensor `name`, reshaped to the result's shape (the reshape named
        after the result)."""
        ref = _output(op, key, index)
        shape = self._nnef_shape(ref)
        if not shape:
            raise Unmappable("LightNet tensors have at least one dimension; this result has none")
        if self._shapes[name] != shape and (self._reshape_of.get(name, name), shape) not in self._reshaped:
            name = self.reshape(name, shape, self._fresh(ref.name, own=True))
        else:
            name = self.reshape(name, shape)
        self._values[ref.name] = Live(name, shape)

    def base(self, op: Operation, key: str | None = None) -> str:
        """The NNEF name of result `key` of `op` (by default its first), to name intermediate tensors after."""
        ref = op.outputs[key] if key is not None else next(iter(op.outputs.values()))
        return (ref[0] if isinstance(ref, list) else ref).name

    # ------------------------------------------------------------------------------------------ the graph
    def write(self) -> LightNetModel:
        graph = self.graph
        rules = lightnet_rules()
        problems: list[str] = []  # Problems: text with a location
        for external in graph.signature.externals:
            name = self._fresh(external.name, own=True)
            if external.dtype not in DTYPES:
                problems.append(Problem(f"input '{external.name}': LightNet has no tensors of type {external.dtype}"))
                continue
            self.emit("create", {}, {"dtype": DTYPES[external.dtype], "dims": list(external.shape),
                                     "ran": [0, 0], "data": [0], "from_file": False}, {"dst": name})
            self._shapes[name] = tuple(external.shape)
            self._values[external.name] = Live(name, tuple(external.shape))
            self._inputs.append(name)
        for update in graph.signature.updates:
            problems.append(Problem(f"update of variable '{update.variable}': LightNet graphs keep no state between "
                                    "runs (export the module in eval mode)"))
        variables = {variable.name: variable for variable in graph.signature.variables}
        for op in live_operations(graph):
            self.op = op
            if op.name in _SIGNATURE_OPS:
                self._declare(op, variables)
                continue
            if any(self._values.get(ref.name) is FAILED for ref in op.input_refs()):
                self._fail(op)
                continue
            if self._fold(op):
                continue
            rule = rules.get(op.name)
            try:
                if rule is None:
                    raise Unmappable("LightNet has no operation for it")
                rule(self, op)
            except Unmappable as error:
                problems.append(_problem(op, str(error), self.located))
                self._fail(op)
        self.op = None
        if problems:
            raise ExportError(f"{graph.name} cannot be written as LightNet ({len(problems)} problem(s)):", problems)
        try:
            outputs = self._outputs()
        except Unmappable as error:  # an output that is a value LightNet cannot hold
            raise ExportError(f"{graph.name} cannot be written as LightNet: an output {error}") from None
        return LightNetModel(self.ops, self.weights, tuple(self._inputs), tuple(outputs))

    def _declare(self, op: Operation, variables: Mapping[str, Variable]) -> None:
        ref = next(op.output_refs())
        if op.name == "external":
            return  # written first, in input order
        if op.name == "variable":
            variable = variables[ref.name]
            self._values[ref.name] = Const(variable.shape, variable.dtype, lambda: self._get(variable),
                                           origin=ref.name, stored=True)
            return
        shape = tuple(op.attribs["shape"])
        value = list(op.attribs["value"])
        self._values[ref.name] = Const(shape, op.dtype or "scalar", lambda: np.asarray(value).reshape(shape)
                                       if len(value) == math.prod(shape) else np.full(shape, value[0]))

    def _fold(self, op: Operation) -> bool:
        """Compute an operation whose inputs are all values, with the op table's torch implementation."""
        refs = list(op.input_refs())
        if not all(isinstance(self._values.get(ref.name), Const) for ref in refs):
            return False
        entry = registry.entry(op.name, "torch", dialect=self.graph.dialect)
        if entry is None or (entry.torch is None and entry.module is None):
            return False
        if any(self.graph.tensors[ref.name].shape is None for ref in op.output_refs()):
            return False
        keeps = op.name in ("reshape", "squeeze", "unsqueeze", "copy") and len(refs) == 1
        source = self._values[refs[0].name] if refs else None
        stored = any(isinstance(v, Const) and v.stored for v in (self._values[ref.name] for ref in refs))
        computed: dict[str, Any] = {}

        def load(name: str) -> Any:
            if not computed:
                computed.update(self._compute(op, entry))
            return computed[name]
        for ref in op.output_refs():
            tensor = self.graph.tensors[ref.name]
            assert tensor.shape is not None
            self._values[ref.name] = Const(tensor.shape, tensor.dtype or "scalar", functools.partial(load, ref.name),
                                           origin=source.origin if keeps and isinstance(source, Const) else None,
                                           stored=stored)
        return True

    def _compute(self, op: Operation, entry: registry.OpEntry) -> dict[str, Any]:
        import torch

        def arg(value: Any) -> Any:
            if isinstance(value, Ref):
                const = self._values[value.name]
                assert isinstance(const, Const)
                return torch.from_numpy(np.array(const.array()))
            if isinstance(value, list):
                return [arg(item) for item in value]
            return value
        inputs = [arg(value) for value in op.inputs.values()]
        attribs = {(key + "_" if key == "lambda" else key): value for key, value in op.attribs.items()}
        with torch.no_grad():
            if entry.torch is not None:
                extra = {"dtype": _torch_dtype(op.dtype)} if entry.typed else {}
                results = entry.torch(*inputs, **attribs, **extra)
            else:
                assert entry.module is not None
                results = entry.module(**attribs).eval()(*inputs)
        results = results if isinstance(results, tuple) else (results,)
        found: dict[str, Any] = {}
        for value, result in zip(op.outputs.values(), results):
            if isinstance(value, list):
                found.update({ref.name: item for ref, item in zip(value, result)})
            else:
                found[value.name] = result
        return found

    def _fail(self, op: Operation) -> None:
        """The results of an op that cannot be written become placeholders of their shapes, so that the ops after
        it are still checked (and their problems reported too); without a shape, they are skipped."""
        for ref in op.output_refs():
            shape = self.graph.tensors[ref.name].shape
            if shape is None:
                self._values[ref.name] = FAILED
                continue
            name = self._fresh(f"{ref.name}_unwritten")
            self._shapes[name] = tuple(shape)
            self._values[ref.name] = Live(name, tuple(shape))

    def _outputs(self) -> list[str]:
        """Make the graph's outputs the tensors no op reads, in output order (see the module docstring)."""
        names = []
        for output in self.graph.outputs:
            found = self._values[output]
            if isinstance(found, Const):
                names.append(self.create(found, found.shape, output))
            else:
                assert isinstance(found, Live)
                names.append(found.name)
        read = {t["name"] for op in self.ops if op["optype"] not in OBSERVERS for t in op["tensors_in"]}
        position = {t["name"]: (i, j) for i, op in enumerate(self.ops) for j, t in enumerate(op["tensors_out"])}
        kept, last = 0, (-1, -1)
        for name in names:
            if name in read or name in self._inputs or names.count(name) > 1 or position[name] <= last:
                break
            last = position[name]
            kept += 1
        renamed: dict[str, str] = {}
        for index in range(kept, len(names)):
            wanted, source = self.graph.outputs[index], names[index]
            source = renamed.get(source, source)
            if source == wanted and source not in self._inputs:  # the output's name goes to the copy
                source = renamed[wanted] = self.temp(f"{wanted}_value")
                self._rename(wanted, source)
                self._used.add(wanted)
                target = wanted
            else:
                target = self._fresh(wanted, own=True)
            self.emit("forward", {"src": source}, {}, {"dst": target})
            names[index] = target
        self._prune(set(names))
        counts: dict[str, int] = {}
        for op in self.ops:  # numbered again: pruned ops leave gaps
            index = counts.get(op["optype"], 0)
            counts[op["optype"]] = index + 1
            op["name"] = f"{op['optype']}{index}"
        return names

    def _rename(self, old: str, new: str) -> None:
        for op in self.ops:
            for entry in op["tensors_in"] + op["tensors_out"]:
                if entry["name"] == old:
                    entry["name"] = new
        if old in self.weights:
            self.weights = {new if key == old else key: value for key, value in self.weights.items()}
        self._shapes[new] = self._shapes[old]

    def _prune(self, outputs: set[str]) -> None:
        """Drop ops whose results nothing reads and that make no output (inputs and ops without results, which
        print, stay)."""
        needed = set(outputs) | set(self._inputs)
        kept = []
        for op in reversed(self.ops):
            if not op["tensors_out"] or any(t["name"] in needed for t in op["tensors_out"]):
                kept.append(op)
                needed.update(t["name"] for t in op["tensors_in"])
            else:
                for t in op["tensors_out"]:
                    self.weights.pop(t["name"], None)
        self.ops = kept[::-1]

    # ------------------------------------------------------------------------------------------ names
    def _fresh(self, base: str, own: bool = False) -> str:
        return unique_identifier(base, self._used, self._reserved, own, MAX_NAME)

    def _base(self, suffix: str) -> str:
        return f"{self.base(self.op)}_{suffix}" if self.op is not None and self.op.outputs else suffix

    def _nnef_shape(self, ref: Ref) -> tuple[int, ...]:
        shape = self.graph.tensors[ref.name].shape
        if shape is None:
            raise Unmappable(f"the shape of '{ref.name}' is not known")
        return tuple(shape)


def save_lightnet(path: str | os.PathLike, graph: Graph, values: Callable[[Variable], Any], *,
                  weights: str = "file", located: bool = True) -> LightNetModel:
    """Write `graph` as LightNet's JSON IR at `path` and, with `weights='file'`, its weights in the .wts file of
    the same stem beside it (`model.json`, `model.wts`). Both files are replaced together, once both are complete
    (see `container.write_files`); nothing else is written."""
    target = os.fspath(path)
    if target.lower().endswith(".wts"):
        raise ValueError(f"{target}: the JSON IR cannot go to a .wts path; name it .json (the weights go beside it)")
    model = write_graph(graph, values, weights=weights, located=located)
    files = [(target, model.json_text().encode("utf-8"))]
    if weights == "file":
        files.insert(0, (wts_path(target), model.wts_text().encode("ascii")))
    container.write_files(files)
    return model


def lightnet_rules() -> dict[str, Callable[[Writer, Operation], None]]:
    """Every NNEF operation the LightNet back end writes, with its rule (the op table imports the rule modules:
    `registry.FACETS["write:lightnet"]`)."""
    return registry.write_rules(FORMAT)


def live_operations(graph: Graph) -> list[Operation]:
    """The operations the outputs depend on, in graph order (inputs, and the LightNet front end's print ops, are
    kept whether read or not)."""
    live = set(graph.outputs)
    kept = []
    for op in reversed(graph.operations):
        if op.name == "external" or op.name in SIDE_EFFECTS or any(ref.name in live for ref in op.output_refs()):
            kept.append(op)
            live.update(ref.name for ref in op.input_refs())
    return kept[::-1]


def _output(op: Operation, key: str | None, index: int | None = None) -> Ref:
    ref = op.outputs[key] if key is not None else next(iter(op.outputs.values()))
    return ref if index is None else ref[index]


def _problem(op: Operation, reason: str, located: bool) -> Problem:
    results = ", ".join(ref.name for ref in op.output_refs())
    return Problem(f"{op.name} ({results}): {reason}", op.location if located else None)


def _infer(optype: str, shapes: list[tuple[int, ...]], params: Mapping[str, Any]) -> tuple[int, ...]:
    """The result shape of the ops whose rules name results with `temp` and no shape (reshape, create)."""
    if "dims" in params:
        return tuple(params["dims"])
    if optype == "forward":
        return shapes[0]
    raise AssertionError(f"give the shape of the result of {optype}")


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu()
        return (value.float() if value.is_floating_point() else value).numpy()
    return np.asarray(value)


def _torch_dtype(nnef_dtype: str | None) -> Any:
    import torch
    return {"integer": torch.int64, "logical": torch.bool}.get(nnef_dtype or "scalar", torch.float32)
