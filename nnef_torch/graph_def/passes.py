"""`NetworkPass`: rewrite a network with callbacks and ready-made edits; `network.promote(pass)` applies it.

Order of a promotion: the structural edits (use_up_to, drop_function, remove_and_rewire, rename, set_variable,
force_average_pooling_global, set_batch_normalization_batch_stat_all), then the function callbacks by name and
by type in forward order, then the variable callbacks, then the generate callbacks on the functions of the new
network. Functions that no longer reach an output are left out. The result is printed as NNEF and read back, so
types and shapes are checked and a broken graph fails with a located error.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from nnef_torch.errors import NNEFOptionError
from nnef_torch.graph_def.network import ProtoNetwork
from nnef_torch.graph_def.proto import ACTIVATION, INPUT, PARAMETER, ProtoFunction, ProtoVariable
from nnef_torch.graph_def.rebuild import checked_graph

FunctionCallback = Callable[[ProtoFunction], "ProtoFunction | None"]
VariableCallback = Callable[[ProtoVariable], "ProtoVariable | None"]
_BATCH_STAT = "_batch_stat"  # suffix of the moments a batch-statistics batch normalization reads


class NetworkPass:
    """Callbacks (registered with the decorators) and edits (the methods) for `ProtoNetwork.promote`. A
    callback gets a copy of the function or variable and returns it changed, or None to drop a function.
    `name` names the promoted network (by default the network's own name)."""

    def __init__(self, verbose: int = 0, *, name: str | None = None):
        self.verbose = verbose
        self.name = name
        self.by_name: dict[str, list[FunctionCallback]] = {}
        self.by_type: dict[str, list[FunctionCallback]] = {}
        self.generate_by_name: dict[str, list[FunctionCallback]] = {}
        self.generate_by_type: dict[str, list[FunctionCallback]] = {}
        self.on_variable: dict[str | None, list[VariableCallback]] = {}
        self.edits: list[Callable[[_Work], None]] = []

    # -- decorators --
    def on_function_pass_by_name(self, name: str) -> Callable[[FunctionCallback], FunctionCallback]:
        return _register(self.by_name, name)

    def on_function_pass_by_type(self, type: str) -> Callable[[FunctionCallback], FunctionCallback]:
        """Call the decorated function on every function of this type (an NNEF operation name)."""
        return _register(self.by_type, type)

    def on_generate_variable(self, name: str | None = None) -> Callable[[VariableCallback], VariableCallback]:
        """Call the decorated function on the variable `name` (every variable when None)."""
        return _register(self.on_variable, name)

    def on_generate_function_by_name(self, name: str) -> Callable[[FunctionCallback], FunctionCallback]:
        return _register(self.generate_by_name, name)

    def on_generate_function_by_type(self, type: str) -> Callable[[FunctionCallback], FunctionCallback]:
        return _register(self.generate_by_type, type)

    # -- edits --
    def drop_function(self, *names: str) -> NetworkPass:
        """Remove functions, their first input taking the place of their first output."""
        for name in names:
            self.edits.append(lambda work, name=name: work.rewire(name, 0, 0))
        return self

    def remove_and_rewire(self, name: str, input_index: int = 0, output_index: int = 0) -> NetworkPass:
        """Remove a function, its input `input_index` taking the place of its output `output_index`."""
        self.edits.append(lambda work: work.rewire(name, input_index, output_index))
        return self

    def fix_parameters(self) -> NetworkPass:
        """Every parameter becomes fixed (not trained; still shared with the other networks)."""
        self.edits.append(lambda work: work.fix())
        return self

    def use_up_to(self, *tensors: str) -> NetworkPass:
        """The network ends at these tensors (its outputs): what comes after is cut (keep a backbone)."""
        self.edits.append(lambda work: work.cut(list(tensors)))
        return self

    def set_variable(self, name: str, value: Any) -> NetworkPass:
        """Give a parameter a new value, or make an input or activation a fixed value (a new parameter)."""
        self.edits.append(lambda work: work.set_variable(name, value))
        return self

    def rename(self, old: str, new: str) -> NetworkPass:
        """Rename a variable (an input, parameter or activation); a function is named after its first output."""
        self.edits.append(lambda work: work.rename(old, new))
        return self

    def force_average_pooling_global(self) -> NetworkPass:
        """Every avg_pool becomes a mean over its spatial axes (global pooling at any input size)."""
        self.edits.append(lambda work: work.global_pooling())
        return self

    def set_batch_normalization_batch_stat_all(self, batch_stat: bool) -> NetworkPass:
        """Every batch_normalization uses the statistics of its batch (True) or its stored mean and variance."""
        self.edits.append(lambda work: work.batch_stat(batch_stat))
        return self

    # -- applying --
    def apply(self, network: ProtoNetwork) -> ProtoNetwork:
        work = _Work(network, self.verbose)
        for edit in self.edits:
            edit(work)
        work.callbacks(self.by_name, self.by_type)
        work.variable_callbacks(self.on_variable)
        work.prune()
        work.callbacks(self.generate_by_name, self.generate_by_type)
        work.prune()
        name = self.name or network.name
        graph = checked_graph(name, work.variables.values(), work.functions, work.inputs, work.outputs,
                              network.library, network.graph.quantization)
        promoted = ProtoNetwork(network.owner, name, graph, network.library, state=network.state,
                                fixed=frozenset(work.fixed), stat_sources=work.stat_sources)
        for label, value in work.values.items():
            network.owner.set_parameter(label, value) if network.owner is not None else None
        return promoted


def _register(table: dict[Any, list[Any]], key: Any) -> Callable[[Any], Any]:
    def decorator(callback: Any) -> Any:
        table.setdefault(key, []).append(callback)
        return callback
    return decorator


class _Work:
    """A network being rewritten: copies of its functions (in order) and variables, its inputs and outputs."""

    def __init__(self, network: ProtoNetwork, verbose: int):
        self.network = network
        self.verbose = verbose
        self.functions = [copy.copy(function) for function in network.functions.values()]
        for function in self.functions:
            function.inputs, function.outputs = list(function.inputs), list(function.outputs)
            function.attributes = dict(function.attributes)
        self.variables = {name: copy.copy(variable) for name, variable in network.variables.items()}
        self.inputs = list(network.inputs)
        self.outputs = list(network.outputs)
        self.fixed = set(network.fixed)
        self.values: dict[str, Any] = {}  # label -> new value for the owner
        self.stat_sources = dict(network.stat_sources)  # batch norm -> the stored mean and variance it read

    def log(self, text: str) -> None:
        if self.verbose:
            print(f"[{self.network.name}] {text}")

    def find(self, name: str) -> ProtoFunction:
        for function in self.functions:
            if function.name == name:
                return function
        raise NNEFOptionError(f"network '{self.network.name}' has no function '{name}' (functions are named "
                              f"after their first output: {[f.name for f in self.functions][:10]}...)")

    def replace_uses(self, old: str, new: str) -> None:
        for function in self.functions:
            function.inputs = [new if name == old else name for name in function.inputs]
        self.outputs = [new if name == old else name for name in self.outputs]

    def rewire(self, name: str, input_index: int, output_index: int) -> None:
        function = self.find(name)
        try:
            source, target = function.inputs[input_index], function.outputs[output_index]
        except IndexError:
            raise NNEFOptionError(f"function '{name}' ({function.type}) has {len(function.inputs)} input(s) and "
                                  f"{len(function.outputs)} output(s); no input {input_index} or output "
                                  f"{output_index}") from None
        self.functions.remove(function)
        self.replace_uses(target, source)
        self.log(f"removed {name} ({function.type}); {target} is now {source}")

    def fix(self) -> None:
        for variable in self.variables.values():
            if variable.kind == PARAMETER and variable.label is not None:
                self.fixed.add(variable.label.lower())
                variable.need_grad = False

    def cut(self, tensors: list[str]) -> None:
        missing = [name for name in tensors if name not in self.variables]
        if missing:
            raise NNEFOptionError(f"network '{self.network.name}' has no tensor {missing[0]!r}")
        self.outputs = tensors

    def set_variable(self, name: str, value: Any) -> None:
        variable = self.variables.get(name)
        if variable is None:
            raise NNEFOptionError(f"network '{self.network.name}' has no variable '{name}'")
        import numpy as np
        shape = tuple(np.shape(value.detach().cpu().numpy() if hasattr(value, "detach") else value))
        if variable.kind in (INPUT, ACTIVATION):
            writer = next((f for f in self.functions if name in f.outputs), None)
            if writer is not None:
                writer.outputs = [f"{o}_unused" if o == name else o for o in writer.outputs]
            if name in self.inputs:
                self.inputs.remove(name)
            variable.kind, variable.label = PARAMETER, f"{self.network.name}/{name}"
        variable.shape = shape
        variable.need_grad = variable.kind == PARAMETER and variable.label.lower() not in self.fixed
        self.values[variable.label] = value

    def rename(self, old: str, new: str) -> None:
        if old not in self.variables:
            raise NNEFOptionError(f"network '{self.network.name}' has no variable '{old}'")
        if new in self.variables:
            raise NNEFOptionError(f"network '{self.network.name}' already has a variable '{new}'")
        variable = self.variables.pop(old)
        variable.name = new
        self.variables[new] = variable
        self.inputs = [new if name == old else name for name in self.inputs]
        for function in self.functions:
            function.outputs = [new if name == old else name for name in function.outputs]
            if function.name == old:
                function.name = new
        self.replace_uses(old, new)

    def global_pooling(self) -> None:
        for index, function in enumerate(self.functions):
            if function.type != "avg_pool":
                continue
            rank = len(self.variables[function.inputs[0]].shape or ())
            pooled = ProtoFunction(function.name, "mean_reduce", function.inputs[:1], function.outputs,
                                   {"axes": list(range(2, rank))}, function.location)
            self.functions[index] = pooled
            self.log(f"{function.name}: avg_pool -> mean_reduce over axes {list(range(2, rank))}")

    def batch_stat(self, enabled: bool) -> None:
        for function in list(self.functions):
            if function.type != "batch_normalization":
                continue
            x, mean, variance = function.inputs[:3]
            if enabled and function.name not in self.stat_sources:
                rank = len(self.variables[x].shape or ())
                names = [f"{function.name}_mean{_BATCH_STAT}", f"{function.name}_variance{_BATCH_STAT}"]
                for name in names:
                    self.variables[name] = ProtoVariable(None, name, False, ACTIVATION)
                created = ProtoFunction(names[0], "moments", [x], names, {"axes": [0, *range(2, rank)]},
                                        function.location)
                self.functions.insert(self.functions.index(function), created)
                stored = (copy.copy(self.variables[mean]), copy.copy(self.variables[variance]))
                self.stat_sources[function.name] = stored
                function.inputs = [x, *names, *function.inputs[3:]]
                self.log(f"{function.name}: batch statistics")
            elif not enabled and function.name in self.stat_sources:
                stored = self.stat_sources.pop(function.name)
                for variable in stored:
                    self.variables.setdefault(variable.name, copy.copy(variable))
                function.inputs = [x, stored[0].name, stored[1].name, *function.inputs[3:]]
                self.log(f"{function.name}: stored mean and variance")

    def callbacks(self, by_name: dict[str, list[FunctionCallback]],
                  by_type: dict[str, list[FunctionCallback]]) -> None:
        kept = []
        for function in self.functions:
            current: ProtoFunction | None = function
            for callback in by_name.get(function.name, []) + by_type.get(function.type, []):
                if current is None:
                    break
                current = callback(current)
            if current is None:
                self.log(f"dropped {function.name} ({function.type})")
                continue
            kept.append(current)
        self.functions = kept

    def variable_callbacks(self, table: dict[str | None, list[VariableCallback]]) -> None:
        for name in list(self.variables):
            for callback in table.get(name, []) + table.get(None, []):
                result = callback(self.variables[name])
                if result is not None:
                    self.variables[name] = result

    def prune(self) -> None:
        """Leave out the functions that reach no output, and variables nothing uses."""
        writer = {name: function for function in self.functions for name in function.outputs}
        needed: set[int] = set()
        pending = list(self.outputs)
        for function in self.functions:
            if function.type == "update":
                needed.add(id(function))
                pending.extend(function.inputs)
        while pending:
            function = writer.get(pending.pop())
            if function is not None and id(function) not in needed:
                needed.add(id(function))
                pending.extend(function.inputs)
        self.functions = [function for function in self.functions if id(function) in needed]
        used = set(self.inputs) | set(self.outputs) | {name for f in self.functions for name in f.inputs + f.outputs}
        self.variables = {name: variable for name, variable in self.variables.items()
                          if name in used or variable.kind == INPUT}
