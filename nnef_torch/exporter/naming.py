"""The names of an exported graph's tensors: an imported document's own, after the module that computed them, and
as the user names the graph's inputs and outputs.

Imported documents. A module made by `nnef_torch.load`, traced itself or as a submodule, keeps its document's
names (`Documents`): its externals (where it is the traced module), variables (label and tensor name, where no
other tensor of the trace has the label), every activation, and so the graph.quant keys, which follow the names.
The importer marks each node of the generated code with the document tensor it computes (`DOCUMENT_TENSOR`), and
each traced node is traced back to its node: through `from_node` (torch.export runs a traced GraphModule through
an fx Interpreter, which records the node each ATen node came from) or through its `stack_trace` (a submodule's
generated code runs as Python: the frame of its code file and line). A document operation written as several
tensors names its result (the last) plainly and the others `conv1_1`, `conv1_2`, ... in order. Names cannot be kept
where a tensor has no operation of its own in the trace: an operation the importer fuses (`importer/fuse.py`: the
inner tensors of a layer norm or gelu chain), a reshape of a reshape folded into one, an op whose torch value is
its input (a `copy`, an identity reshape), an ATen node torch records no origin for (arithmetic on parameters
alone, such as a bias reshaped for conv: its tensor keeps the ATen name). A module imported twice (or a document
traced beside another that names a tensor alike) has one tensor per name plainly and the others with suffixes. A
graph.quant entry on a document's input stays on the input itself (`exporter/quantization.py`).

Module paths. torch.export records, on each node, the modules it was called from (`nn_module_stack`); the
innermost one names the tensors the node computes, its path with `_` for `.`: a tensor computed inside
`layer1.0.conv1` is `layer1_0_conv1`. A module that computes several tensors (a block's own operations, a module
called twice, a rule that writes a tensor per result) names the last one it computes plainly, since that is its
result, and the others in order with suffixes: `layer1_0_relu_1` (the first call of `layer1.0.relu`), then
`layer1_0_relu` (the second, the block's result). A node outside every submodule (forward of the module itself)
keeps its ATen-based name (`add`, `flatten`), and so do the tensors a rule writes on the way to its result
(`conv2d_1_pad`). A name already taken keeps the tensor's ATen-based name. Variables keep their labels and names.

Inputs and outputs. `input_names=` and `output_names=` (export, save, the CLI's `--input-names`) rename the
graph's `external`s and outputs, in order, once the graph is complete (`name_model`): they win over a document's."""
from __future__ import annotations

import dataclasses
import linecache
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.model import Model
from nnef_torch.formats.tract_core.target import exported_text
from nnef_torch.importer.build import DOCUMENT_TENSOR
from nnef_torch.importer.module import INFO_KEY, NNEFModule
from nnef_torch.ir.builder import KEYWORDS, Builder, identifier, replace_refs
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.stdlib import extension_fragments, standard_fragments

__all__ = ["Documents", "ModuleNames", "Origin", "checked_names", "module_path", "name_model"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ')  # one frame of a node's `stack_trace`
_ASSIGNED = re.compile(r"\s+([A-Za-z_][A-Za-z0-9_]*) = ")  # a line of fx code: the node it computes


class Origin(NamedTuple):
    """The document tensor a traced node computes (or helps compute), and, for a node of several results, the
    document tensor of each result by index."""

    tensor: str
    parts: Mapping[int, str]


class Documents:
    """The modules made by `nnef_torch.load` inside a traced module: the document tensor each traced node computes
    (`origin`), and their documents' variable labels and names and input names."""

    def __init__(self) -> None:
        self.graphs: dict[int, dict[str, Origin]] = {}  # id of a generated fx graph -> node name -> its origin
        self.codes: dict[str, dict[int, Origin]] = {}  # generated code -> line number -> the origin of its node
        self.variables: dict[str, tuple[str, str]] = {}  # state_dict name -> (label, tensor name) in its document
        self.inputs: dict[str, str] = {}  # forward's argument -> its external (the traced module's own document)
        self.names: set[str] = set()  # every tensor name the documents give
        self._files: dict[str, dict[int, Origin] | None] = {}  # code file of a frame -> its lines, if generated

    @classmethod
    def of(cls, module: torch.nn.Module | None) -> Documents | None:
        """The documents of the imported modules in `module` (itself or its submodules); None where it has none."""
        found = cls()
        for prefix, imported in (module.named_modules() if isinstance(module, torch.nn.Module) else ()):
            if isinstance(imported, NNEFModule):
                found._add(prefix, imported)
        return found if found.names else None

    def _add(self, prefix: str, module: NNEFModule) -> None:
        for form in (module, *module.forms().values()):  # its own forward, and those for other input shapes
            parts: dict[str, dict[int, str]] = {}  # a node of several results -> its getitems' tensors by index
            for node in form.graph.nodes:
                source, index = node.args[:2] if node.target is operator.getitem else (None, None)
                if isinstance(source, torch.fx.Node) and isinstance(index, int) and DOCUMENT_TENSOR in node.meta:
                    parts.setdefault(source.name, {})[index] = node.meta[DOCUMENT_TENSOR]
            table = {node.name: Origin(node.meta[DOCUMENT_TENSOR], parts.get(node.name, {}))
                     for node in form.graph.nodes if DOCUMENT_TENSOR in node.meta}
            self.graphs[id(form.graph)] = table
            lines = {number: table[match.group(1)] for number, line in enumerate(form.code.splitlines(), 1)
                     if (match := _ASSIGNED.match(line)) and match.group(1) in table}
            self.codes.setdefault(form.code.rstrip(), lines)
            self.names.update(origin.tensor for origin in table.values())
        info = module.meta.get(INFO_KEY)
        if info is None:  # not made by the importer: no document to name variables and inputs after
            return
        graph = info.graph
        shared = graph.shared_variables()
        for slot in info.slots.values():
            name = shared[slot.key][0].name if shared.get(slot.key) else slot.label.replace("/", "_")
            self.variables[f"{prefix}.{slot.path}" if prefix else slot.path] = (slot.label, name)
            self.names.add(name)
        if not prefix:
            arguments = [node.target for node in module.graph.nodes if node.op == "placeholder"]
            for argument, external in zip(arguments, graph.signature.externals):
                self.inputs[str(argument)] = external.name
                self.names.add(external.name)

    def origin(self, node: torch.fx.Node) -> Origin | None:
        """What traced node `node` computes in a document; None outside every document."""
        for source in _sources(node.meta.get("from_node")):
            table = self.graphs.get(getattr(source, "graph_id", None))
            if table is not None and getattr(source, "name", None) in table:
                return table[source.name]
        for file, line in reversed(_FRAME.findall(node.meta.get("stack_trace") or "")):  # innermost first
            lines = self._lines(file)
            if lines is not None:
                return lines.get(int(line))
        return None

    def tensor(self, node: torch.fx.Node) -> str | None:
        """The document tensor traced node `node` computes (or helps compute); None outside every document."""
        origin = self.origin(node)
        return origin.tensor if origin is not None else None

    def _lines(self, file: str) -> dict[int, Origin] | None:
        """The origins of the lines of `file` (a frame's), where it is the code generated for a document (fx
        names its code files `<eval_with_key>.N` and serves their text through linecache)."""
        if file not in self._files:
            self._files[file] = self.codes.get("".join(linecache.getlines(file)).rstrip())
        return self._files[file]

    def labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        """`labels` (state_dict name -> label) with each document variable's own label, where no other name of
        the trace has it (NNEF labels compare without case)."""
        wanted = {target: self.variables[target][0] for target in labels if target in self.variables}
        owners: dict[str, set[str]] = {}  # a label (lower case) -> the tensors that would have it, by first label
        for target, value in labels.items():
            owners.setdefault(wanted.get(target, value).lower(), set()).add(value)
        return {target: wanted[target] if target in wanted and len(owners[wanted[target].lower()]) == 1 else value
                for target, value in labels.items()}

    def variable_names(self, labels: Mapping[str, str]) -> dict[str, str]:
        """Label -> the document's name of its variable, for the document labels `labels` (state_dict name ->
        label) kept."""
        return {label: self.variables[target][1] for target, label in labels.items()
                if target in self.variables and self.variables[target][0] == label}


def _sources(sources: Any) -> Iterable[Any]:
    """The nodes a traced node came from (torch's provenance, `from_node`), nearest first, recursively."""
    for source in sources or ():
        yield source
        yield from _sources(getattr(source, "from_node", None))


def module_path(node: torch.fx.Node) -> str:
    """The path of the innermost module `node` was called from ('layer1.0.conv1'); '' outside every submodule."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    entry = list(stack.values())[-1]
    return str(entry[0]) if isinstance(entry, (tuple, list)) and entry else ""


class ModuleNames:
    """Collects, while the nodes are converted, the tensors computed for each document tensor and in each
    submodule (`claim`), and names them after it once every node is converted (`apply`)."""

    def __init__(self, documents: Documents | None = None) -> None:
        self.documents = documents
        self.documented: dict[str, list[str]] = {}  # document tensor -> the tensors computing it, in order
        self.groups: dict[str, list[str]] = {}  # module path -> its tensors (current names), in order computed
        self.origins: dict[str, str] = {}  # tensor name -> the node that computed it, for names not the node's
        # results of a multi-result node -> that node and its document tensor, until a getitem takes one
        self._pending: dict[str, tuple[str, str | None]] = {}
        self._nodes: dict[str, str] = {}  # tensor name -> node name, of every claimed tensor

    def claim(self, emit: Builder, node: torch.fx.Node, result: Any, fallback: str) -> Any:
        """The result of `node`'s rule with its name: a tensor the rule wrote for a document tensor or inside a
        submodule is kept for `apply`; any other gets `fallback` (the node's name) unless a document names
        another tensor so."""
        path = module_path(node)
        origin = self.documents.origin(node) if self.documents is not None else None
        if isinstance(result, (tuple, list)):  # named when a getitem takes one of them
            for index, item in enumerate(result):
                if isinstance(item, Ref) and item.name in emit.created:
                    part = origin.parts.get(index, origin.tensor) if origin is not None else None
                    self._pending[item.name] = (node.name, part)
            return result
        if not isinstance(result, Ref):
            return result
        source, part = self._pending.pop(result.name, (None, None))
        tensor = part if source is not None else origin.tensor if origin is not None else None
        if result.name not in emit.created and source is None:
            return result  # a tensor of another node (an alias): it keeps its name
        if tensor is not None:
            self.documented.setdefault(tensor, []).append(result.name)
        elif not path:
            taken = self.documents is not None and fallback in self.documents.names
            return emit.rename(result, fallback) if source is None and not taken else result
        else:
            self.groups.setdefault(path, []).append(result.name)
        self._nodes[result.name] = source or node.name
        return result

    def apply(self, emit: Builder) -> dict[str, Ref]:
        """Rename the claimed tensors after their document tensors, then after their modules; returns the new
        reference of each renamed one."""
        renamed: dict[str, Ref] = {}
        wanted: dict[str, str] = {}  # tensor -> its name: each document tensor's result first, then the others
        for tensor, names in self.documented.items():
            wanted[names[-1]] = tensor
        avoid = self.documents.names if self.documents is not None else set()
        for tensor, names in self.documented.items():
            for index, name in enumerate(names[:-1]):
                wanted[name] = _free(f"{tensor}_{index + 1}", emit, avoid)
        for name, new in wanted.items():
            if name == new:
                continue
            ref = emit.rename(Ref(name), new)
            if ref.name != name:
                renamed[name] = ref
                self.origins[ref.name] = self._nodes[name]
        self.documented = {}
        for path, names in self.groups.items():
            base = identifier(path.replace(".", "_"))
            last = len(names) - 1
            for index, name in enumerate(names):
                wanted = base if index == last else f"{base}_{index + 1}"
                ref = emit.rename(Ref(name), wanted, own=self._nodes[name])
                if ref.name != name:
                    renamed[name] = ref
                    self.origins[ref.name] = self._nodes[name]
        self.groups = {}
        return renamed


def _free(name: str, emit: Builder, avoid: set[str]) -> str:
    """`name`, or it with underscores added until no tensor and no document tensor has it."""
    while name in emit.tensors or name in avoid:
        name += "_"
    return name


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
