"""`ProtoNetwork`: one NNEF graph of a ProtoGraph, as functions and variables, callable at any batch size."""
from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nnef_torch.format import ast
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.format.quant_file import print_quantization
from nnef_torch.graph_def.modules import build_module
from nnef_torch.graph_def.proto import ACTIVATION, BUFFER, INPUT, PARAMETER, ProtoFunction, ProtoVariable
from nnef_torch.graph_def.sequence import forward_sequence
from nnef_torch.ir.document import graph_file
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.stdlib import standard_fragments

if TYPE_CHECKING:
    import torch

    from nnef_torch.graph_def.graph import ProtoGraph
    from nnef_torch.graph_def.passes import NetworkPass
    from nnef_torch.importer.module import NNEFModule

_SOURCES = ("external", "variable")


class ProtoNetwork:
    """A network: `functions` (by name), `variables` (every tensor, by name), `parameters` (the variables that
    hold data, by name), `inputs` and `outputs` (names, in order). Calling it runs the generated torch module;
    networks of one ProtoGraph share their parameters by label."""

    def __init__(self, owner: ProtoGraph | None, name: str, graph: Graph,
                 library: Mapping[str, ast.Fragment] | None = None, *, state: frozenset[str] = frozenset(),
                 fixed: frozenset[str] = frozenset(), stat_sources: Mapping[str, Any] | None = None):
        self.owner = owner
        self.name = name
        self.graph = graph
        self.library = dict(library or {})  # fragments for the operations that are not standard
        self.state = state  # labels (lower case) of variables that are state, not parameters
        self.fixed = fixed  # labels (lower case) of parameters a pass fixed
        # batch normalizations switched to batch statistics -> the stored mean and variance they read before
        self.stat_sources = dict(stat_sources or {})
        self.functions: OrderedDict[str, ProtoFunction] = OrderedDict()
        self.variables: OrderedDict[str, ProtoVariable] = OrderedDict()
        self.parameters: OrderedDict[str, ProtoVariable] = OrderedDict()
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        self._modules: dict[int | None, NNEFModule] = {}
        self._describe()

    # -- what it holds --
    def _describe(self) -> None:
        updated = {update.variable for update in self.graph.signature.updates}
        for op in self.graph.operations:
            outputs = [ref.name for ref in op.output_refs()]
            if op.name == "external":
                self._add(outputs[0], INPUT)
                continue
            if op.name == "variable":
                label = op.attribs["label"]
                kind = BUFFER if outputs[0] in updated or label.lower() in self.state else PARAMETER
                variable = self._add(outputs[0], kind, label=label)
                variable.need_grad = kind == PARAMETER and label.lower() not in self.fixed
                self.parameters[outputs[0]] = variable
                continue
            name = outputs[0] if outputs else f"{op.name}_{len(self.functions)}"
            attributes = dict(op.attribs)
            attributes.update({key: value for key, value in op.inputs.items() if not _has_ref(value)})
            self.functions[name] = ProtoFunction(name, op.name, [ref.name for ref in op.input_refs()], outputs,
                                                 attributes, op.location, op)
            for output in outputs:
                if output not in self.variables:
                    self._add(output, ACTIVATION)

    def _add(self, name: str, kind: str, *, label: str | None = None) -> ProtoVariable:
        tensor = self.graph.tensors.get(name)
        variable = ProtoVariable(tensor.shape if tensor else None, name, False, kind,
                                 tensor.dtype if tensor else None, label)
        self.variables[name] = variable
        return variable

    def fragments(self) -> list[str]:
        """The non-standard operations the network uses, in order of first use (defined in its text)."""
        standard = standard_fragments()
        used: dict[str, None] = {}
        for op in self.graph.operations:
            if op.name not in standard:
                used.setdefault(op.name)
        return list(used)

    def text(self) -> str:
        """The network as an NNEF document (graph.nnef text); its graph is named after the network."""
        return self.document().text

    def document(self) -> GraphFile:
        """The network as a graph.nnef held in memory (its text printed when asked for)."""
        return graph_file(dataclasses.replace(self.graph, name=self.name), self.fragments(), self.library,
                          f"{self.name} (graph_def)")

    def quant_text(self) -> str | None:
        return print_quantization(self.graph.quantization) if self.graph.quantization else None

    # -- running --
    def module(self, batch_size: int | None = None) -> NNEFModule:
        """The generated torch module of this network (at `batch_size`: every input's first axis re-declared),
        holding the ProtoGraph's shared Parameters; built once per batch size."""
        if batch_size not in self._modules:
            self._modules[batch_size] = build_module(self, batch_size)
        return self._modules[batch_size]

    def __call__(self, *inputs: torch.Tensor, batch_size: int | None = None) -> Any:
        """Run the network on `inputs` (torch tensors, in the order of `inputs`)."""
        if len(inputs) != len(self.inputs):
            raise TypeError(f"network '{self.name}' takes {len(self.inputs)} input(s) {self.inputs}, "
                            f"got {len(inputs)}")
        return self.module(batch_size)(*inputs)

    # -- walking and rewriting --
    def forward_sequence(self) -> Iterator[ProtoFunction]:
        """The functions in execution order: only those that reach an output (or write a variable with
        `update`), each once every input it reads is ready. NNEFError if two functions write one variable."""
        return forward_sequence(self)

    def execute_on_proto(self, execute: Callable[[ProtoFunction], Any]) -> None:
        """Call `execute` on each function of `forward_sequence()`, in order."""
        for function in self.forward_sequence():
            execute(function)

    def promote(self, network_pass: NetworkPass) -> ProtoNetwork:
        """A new network: this one rewritten by `network_pass` and checked like any loaded graph."""
        return network_pass.apply(self)

    def save(self, path: str | os.PathLike, *, include_parameters: bool = True,
             variable_batch_size: bool = True) -> None:
        """Write this network alone as an NNEF model (see `graph_def.save`)."""
        from nnef_torch.graph_def.files import save  # cycle: graph_def.files imports this module
        save(path, self, include_parameters=include_parameters, variable_batch_size=variable_batch_size)

    def values(self) -> dict[str, Any]:
        """The current value of each parameter and buffer, by label (the owner's shared tensors)."""
        if self.owner is None:
            return {}
        return {variable.label: self.owner.parameter(variable.label) for variable in self.parameters.values()
                if variable.label is not None and self.owner.has_parameter(variable.label)}

    def __repr__(self) -> str:
        return (f"ProtoNetwork({self.name!r}, {len(self.functions)} functions, inputs {self.inputs}, "
                f"outputs {self.outputs})")


def _has_ref(value: Any) -> bool:
    if isinstance(value, Ref):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_ref(item) for item in value)
    return False


def operations_of(network: ProtoNetwork) -> list[Operation]:
    """The IR operations of a network: its sources (externals, variables), then its functions in order."""
    sources = [op for op in network.graph.operations if op.name in _SOURCES]
    return sources + [function.operation for function in network.functions.values()
                      if function.operation is not None]
