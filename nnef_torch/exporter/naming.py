"""The names of an exported graph's tensors: after the module that computed them, and as the user names the
graph's inputs and outputs.

Module paths. torch.export records, on each node, the modules it was called from (`nn_module_stack`); the
innermost one names the tensors the node computes, its path with `_` for `.`: a tensor computed inside
`layer1.0.conv1` is `layer1_0_conv1`. A module that computes several tensors (a block's own operations, a module
called twice, a rule that writes a tensor per result) names the last one it computes plainly, since that is its
result, and the others in order with suffixes: `layer1_0_relu_1` (the first call of `layer1.0.relu`), then
`layer1_0_relu` (the second, the block's result). A node outside every submodule (forward of the module itself)
keeps its ATen-based name (`add`, `flatten`), and so do the tensors a rule writes on the way to its result
(`conv2d_1_pad`). A name already taken keeps the tensor's ATen-based name. Variables keep their labels and names.

Inputs and outputs. `input_names=` and `output_names=` (export, save, the CLI's `--input-names`) rename the
graph's `external`s and outputs, in order, once the graph is complete (`name_model`)."""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.model import Model
from nnef_torch.formats.tract_core.target import exported_text
from nnef_torch.ir.builder import KEYWORDS, Builder, identifier, replace_refs
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.stdlib import extension_fragments, standard_fragments

__all__ = ["ModuleNames", "checked_names", "module_path", "name_model"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def module_path(node: torch.fx.Node) -> str:
    """The path of the innermost module `node` was called from ('layer1.0.conv1'); '' outside every submodule."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    entry = list(stack.values())[-1]
    return str(entry[0]) if isinstance(entry, (tuple, list)) and entry else ""


class ModuleNames:
    """Collects, while the nodes are converted, the tensors computed in each submodule (`claim`), and names them
    after it once every node is converted (`apply`)."""

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {}  # module path -> its tensors (current names), in order computed
        self.origins: dict[str, str] = {}  # tensor name -> the node that computed it, for names not the node's
        self._pending: dict[str, str] = {}  # results of a multi-result node -> that node, until a getitem takes one
        self._nodes: dict[str, str] = {}  # tensor name -> node name, of every claimed tensor

    def claim(self, emit: Builder, node: torch.fx.Node, result: Any, fallback: str) -> Any:
        """The result of `node`'s rule with its name: a tensor the rule wrote gets `fallback` (the node's name)
        outside every submodule, and is kept for `apply` inside one."""
        path = module_path(node)
        if isinstance(result, (tuple, list)):  # named when a getitem takes one of them
            for item in result:
                if isinstance(item, Ref) and item.name in emit.created:
                    self._pending[item.name] = node.name
            return result
        if not isinstance(result, Ref):
            return result
        source = self._pending.pop(result.name, None)
        if result.name not in emit.created and source is None:
            return result  # a tensor of another node (an alias): it keeps its name
        if not path:
            return emit.rename(result, fallback) if source is None else result
        self.groups.setdefault(path, []).append(result.name)
        self._nodes[result.name] = source or node.name
        return result

    def apply(self, emit: Builder) -> dict[str, Ref]:
        """Rename the claimed tensors after their modules; returns the new reference of each renamed one."""
        renamed: dict[str, Ref] = {}
        for path, names in self.groups.items():
            base = identifier(path.replace(".", "_"))
            last = len(names) - 1
            for index, name in enumerate(names):
                wanted = base if index == last else f"{base}_{index + 1}"
                ref = emit.rename(Ref(name), wanted)
                if ref.name != name:
                    renamed[name] = ref
                    self.origins[ref.name] = self._nodes[name]
        self.groups = {}
        return renamed


def checked_names(names: Any, what: str, count: int, taken: Sequence[str] = ()) -> list[str] | None:
    """`names` (None, or a sequence of `count` NNEF identifiers, none in `taken`) as a list; `ExportError` else."""
    if names is None:
        return None
    option = f"{what}_names="
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise ExportError(f"{option} takes a sequence of names (a list or tuple of str), not "
                          f"{type(names).__name__} {names!r}")
    names = list(names)
    if len(names) != count:
        raise ExportError(f"{option} gives {len(names)} name(s), and the graph has {count} {what}(s)")
    reserved = set(KEYWORDS) | set(standard_fragments()) | set(extension_fragments())
    for name in names:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ExportError(f"{option}: {name!r} is not an NNEF identifier (a letter or '_', then letters, "
                              "digits and '_')")
        if name in reserved:
            raise ExportError(f"{option}: {name!r} is a keyword or an operation's name in NNEF; choose another")
        if name in taken:
            raise ExportError(f"{option}: {name!r} is named twice among the graph's inputs and outputs")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ExportError(f"{option}: {name!r} is named twice")
        seen.add(name)
    return names


def name_model(model: Model, input_names: Any = None, output_names: Any = None, target: str = "standard") -> Model:
    """`model` with its externals and outputs named `input_names` and `output_names` (in order; None keeps them).
    Raises `ExportError` for a name that is not an identifier, is given twice, clashes with another tensor of the
    graph, or a count that is not the graph's."""
    if input_names is None and output_names is None:
        return model
    graph = model.graph
    externals = [external.name for external in graph.signature.externals]
    outputs = list(graph.signature.outputs)
    inputs = checked_names(input_names, "input", len(externals))
    results = checked_names(output_names, "output", len(outputs), inputs or ())
    mapping: dict[str, str] = {}
    for old, new in [*zip(externals, inputs or externals), *zip(outputs, results or outputs)]:
        if old != new:
            if mapping.get(old, new) != new:
                raise ExportError(f"input_names= and output_names= name the tensor '{old}' both '{mapping[old]}' "
                                  f"and '{new}' (an output that is the input itself)")
            mapping[old] = new
    clash = sorted(new for new in mapping.values() if new in graph.tensors and new not in mapping)
    if clash:
        raise ExportError(f"input_names= / output_names=: {', '.join(map(repr, clash))} already name(s) another "
                          "tensor of the graph; choose another name")
    graph = rename_tensors(graph, mapping)
    dims = {mapping.get(key, key): value for key, value in model.dims.items()}
    return dataclasses.replace(model, graph=graph, dims=dims, text=_text(graph, model, dims, target),
                               quant_text=_quant_text(graph))


def rename_tensors(graph: Graph, mapping: dict[str, str]) -> Graph:
    """`graph` with each tensor named in `mapping` renamed (its operations, signature and graph.quant entries)."""
    swap = {old: Ref(new) for old, new in mapping.items()}

    def name(old: Any) -> Any:
        return mapping.get(old, old) if isinstance(old, str) else old

    signature = graph.signature
    signature = dataclasses.replace(
        signature,
        externals=tuple(dataclasses.replace(e, name=name(e.name)) for e in signature.externals),
        variables=tuple(dataclasses.replace(v, name=name(v.name)) for v in signature.variables),
        updates=tuple(dataclasses.replace(u, **{f.name: name(getattr(u, f.name)) for f in dataclasses.fields(u)})
                      for u in signature.updates),
        outputs=tuple(name(output) for output in signature.outputs))
    tensors = {name(key): dataclasses.replace(tensor, name=name(tensor.name)) for key, tensor in graph.tensors.items()}
    operations = tuple(replace_refs(op, swap) for op in graph.operations)
    return dataclasses.replace(graph, tensors=tensors, operations=operations, signature=signature,
                               quantization={name(key): spec for key, spec in graph.quantization.items()})


def _text(graph: Graph, model: Model, dims: dict[str, Any], target: str) -> str:
    if target == "tract":
        return exported_text(graph, model.fragments, dims, model.symbols)
    return graph_text(graph, model.fragments)


def _quant_text(graph: Graph) -> str | None:
    from nnef_torch.exporter.quantization import quant_text  # quantization imports the emitter, as convert does
    return quant_text(graph)
