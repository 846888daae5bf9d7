"""Reading and writing a ProtoGraph: the default network is a standard NNEF model (graph.nnef, graph.quant and one
.dat per label), and each other network is a standard NNEF document beside it (`<name>.nnef`, `<name>.quant`) whose
variables refer to the same .dat files by label."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnef_torch.errors import (
    Location,
    NNEFContainerError,
    NNEFError,
    NNEFOptionError,
    NNEFSemanticError,
    NNEFShapeError,
)
from nnef_torch.format import container, tensor_file
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.format.parser import parse_document
from nnef_torch.graph_def.graph import ProtoGraph
from nnef_torch.graph_def.network import ProtoNetwork
from nnef_torch.ir.graph import Graph, Variable
from nnef_torch.reader import member_path, open_source, read_document, read_graph

RE_BATCH = 3  # the batch size a variable-batch network must also read at, beside its own


def load(path: str | os.PathLike, *, batch_size: int | None = None, exclude_parameter: bool = False,
         parameter_only: bool = False, parameters: Mapping[str, Any] | None = None) -> ProtoGraph:
    """The networks of a model: graph.nnef (the default network) and the other documents saved beside it, or
    the one network of a model of another format. batch_size re-declares every input's first axis.
    exclude_parameter: read no tensor data. parameter_only: read the data and no network. parameters: values
    by label to use instead of the files' (a caller-owned parameter store). Networks must have distinct names,
    and variables of one label (in any network) one shape and type: else a located NNEFError."""
    if exclude_parameter and parameter_only:
        raise NNEFOptionError("exclude_parameter and parameter_only exclude each other")
    owner = ProtoGraph(parameters=parameters)
    with open_source(path) as source:
        graphs = [read_document(source.document, quant_text=source.quant_text, quant_file=source.quant_file,
                                batch_size=batch_size)]
        files = [source.graph_file]
        if source.files is not None:  # the other documents, read and lowered one at a time
            names = source.files.document_names()
            for name in names:
                if not name.lower().endswith(".nnef"):
                    continue
                text = source.files.document(name)
                if text is None:
                    continue
                quant_name = name[:-5] + ".quant"
                quant = source.files.document(quant_name) if quant_name in names else None
                file = container_member(source.source, name)
                graph = read_graph(text, file=file, quant_text=quant, quant_file=container_member(source.source,
                                                                                                   quant_name),
                                   batch_size=batch_size)
                _check_name(graph, file, text, graphs, files)
                graphs.append(graph)
                files.append(file)
                del text, quant
        _check_labels(graphs)
        if not exclude_parameter:
            for graph in graphs:
                for variable in graph.signature.variables:
                    if not owner.has_parameter(variable.label):
                        owner.set_parameter(variable.label, source.read_variable(variable).array)
        if parameter_only:
            return owner
        for graph in graphs:
            owner.add(ProtoNetwork(owner, graph.name, graph, {}, state=source.state))
    return owner


def _check_name(graph: Graph, file: str, text: str, graphs: list[Graph], files: list[str]) -> None:
    """A network's name is its key in the ProtoGraph (and its file name when saved): one per network."""
    for first, first_file in zip(graphs, files):
        if first.name == graph.name:
            raise NNEFSemanticError(f"network '{graph.name}' is defined twice: in {first_file} and here (each "
                                    f"network of a model needs its own graph name)", _graph_location(text, file))


def _graph_location(text: str, file: str) -> Location:
    """Where `text` declares its graph (parsed again: this is only needed for an error)."""
    graph = parse_document(text, file).graph
    return graph.loc if graph is not None else Location(file=file)


def _check_labels(graphs: list[Graph]) -> None:
    """Variables of one label share one .dat file, in every network: they must agree on its shape and type."""
    first: dict[str, tuple[Variable, Graph]] = {}
    for graph in graphs:
        for variable in graph.signature.variables:
            seen = first.setdefault(variable.key, (variable, graph))
            earlier, earlier_graph = seen
            if earlier_graph is graph or (earlier.shape, earlier.dtype) == (variable.shape, variable.dtype):
                continue
            where = _variable_location(earlier_graph, earlier)
            raise NNEFShapeError(
                f"variable '{variable.name}' of network '{graph.name}' has label '{variable.label}' with shape "
                f"{list(variable.shape)} and type {variable.dtype}, but variable '{earlier.name}' of network "
                f"'{earlier_graph.name}' ({where or 'its graph'}) has that label with shape {list(earlier.shape)} and "
                f"type {earlier.dtype}: networks share the data of a label", _variable_location(graph, variable))


def _variable_location(graph: Graph, variable: Variable) -> Location | None:
    for op in graph.operations:
        if op.name == "variable" and op.outputs["output"].name == variable.name:
            return op.location
    return None


def container_member(source: str, name: str) -> str:
    return member_path(source, name)


def save(path: str | os.PathLike, content: ProtoGraph | ProtoNetwork | Sequence[ProtoGraph | ProtoNetwork], *,
         include_parameters: bool = True, variable_batch_size: bool = True, compress: bool | None = None) -> None:
    """Write networks as one NNEF model folder or archive, atomically: the first network as graph.nnef, each
    other as `<name>.nnef`, the data of every label once. variable_batch_size: check that each network reads at
    another batch size (nothing but its inputs holds the batch), else NNEFError naming the operation that fixes
    it. include_parameters=False writes the documents only."""
    networks = _networks(content)
    documents: dict[str, str] = {}
    texts = []
    for index, network in enumerate(networks):
        document, quant = network.document(), network.quant_text()
        if variable_batch_size:
            _check_variable_batch(network, document)
        text = document.text
        texts.append((text, quant))
        if index:
            documents[f"{network.name}.nnef"] = text
            if quant is not None:
                documents[f"{network.name}.quant"] = quant
    tensors = _tensors(networks) if include_parameters else {}
    container.write_model(path, texts[0][0], tensors.items(), texts[0][1], compress=compress, documents=documents)


def _networks(content: Any) -> list[ProtoNetwork]:
    items = content if isinstance(content, (list, tuple)) else [content]
    networks: list[ProtoNetwork] = []
    for item in items:
        if isinstance(item, ProtoGraph):
            networks.extend(item.networks.values())
        elif isinstance(item, ProtoNetwork):
            networks.append(item)
        else:
            raise TypeError(f"cannot save a {type(item).__name__}: expected ProtoGraph or ProtoNetwork objects")
    if not networks:
        raise NNEFOptionError("nothing to save: no networks")
    names = [network.name for network in networks]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise NNEFOptionError(f"networks {repeated} share a name; each is saved as <name>.nnef")
    if "graph" in names[1:]:
        raise NNEFOptionError("only the first network may be called 'graph' (it is saved as graph.nnef)")
    return networks


def _check_variable_batch(network: ProtoNetwork, document: GraphFile) -> None:
    batches = {external.shape[0] for external in network.graph.signature.externals if external.shape}
    other = RE_BATCH if RE_BATCH not in batches else RE_BATCH + 4
    try:
        read_document(document, batch_size=other)
    except NNEFError as error:
        raise NNEFError(f"network '{network.name}' does not read at batch size {other}, so its batch is fixed "
                        f"somewhere besides its inputs (export it with dynamic_batch=True, or save with "
                        f"variable_batch_size=False):\n{error}") from None


def _tensors(networks: list[ProtoNetwork]) -> dict[str, Any]:
    """label -> encoder of its .dat, once per label; shapes must agree between networks."""
    shapes: dict[str, tuple[tuple[int, ...], str]] = {}
    found: dict[str, Any] = {}
    for network in networks:
        for variable in network.parameters.values():
            label = variable.label
            key = label.lower()
            if key in shapes:
                if shapes[key][0] != tuple(variable.shape or ()):
                    raise NNEFContainerError(f"label '{label}' has shape {list(variable.shape or ())} in network "
                                             f"'{network.name}' and {list(shapes[key][0])} in network "
                                             f"'{shapes[key][1]}'")
                continue
            shapes[key] = (tuple(variable.shape or ()), network.name)
            if network.owner is None or not network.owner.has_parameter(label):
                raise NNEFError(f"network '{network.name}' has no data for variable '{label}'")
            value = network.owner.parameter(label)
            found[label] = _encoder(value, variable.dtype)
    return found


def _encoder(value: Any, nnef_type: str | None) -> Any:
    def encode() -> bytes:
        array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        if nnef_type == "scalar" and array.dtype.kind not in "f":
            array = array.astype(np.float32)
        return tensor_file.encode(array)
    return encode
