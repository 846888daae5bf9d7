"""Read a whole model: container -> graph text -> IR graph, graph.quant attached, every .dat checked.

A model of another format (NNVM or MXNet JSON, ...) is read through its front end (`nnef_torch.formats`) into the
same form: NNEF text and the variables' data. Only composes the format layer and the front ends: the container
module does the file access, the rest are pure functions.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnef_torch import formats
from nnef_torch.errors import NNEFError, NNEFOptionError, NNEFQuantizationError
from nnef_torch.format import container, tensor_file
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.format.quant_file import QuantSpec, read_quantization
from nnef_torch.format.tensor_file import TensorData
from nnef_torch.formats.dialects import apply_dialects
from nnef_torch.ir.graph import Graph, Variable
from nnef_torch.ir.lower import Atomic, Constants, lower
from nnef_torch.options import ReadOptions
from nnef_torch.stdlib import standard_fragments

_KINDS = {"scalar": ("float", "quantized"), "integer": ("integer",), "logical": ("logical",)}


@dataclass(frozen=True)
class ModelData:
    """A model read from disk: its IR graph and the decoded data of each variable, by lower-case label."""

    source: str
    graph: Graph
    tensors: dict[str, TensorData]
    format: str = "nnef"  # or the front end it was converted by

    def tensor(self, variable: Variable) -> TensorData:
        return self.tensors[variable.key]


def read_graph(text: str, *, file: str = "graph.nnef", quant_text: str | None = None, quant_file: str = "graph.quant",
               atomic: Atomic = None, custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
               input_shapes: Mapping[str, Any] | None = None, batch_size: int | None = None,
               batch_axes: Mapping[str, int | None] | None = None, lenient: bool = True,
               constants: Constants = None) -> Graph:
    """Parse, check and flatten graph text (with optional graph.quant text) into an IR graph; the options are
    `read_document`'s."""
    return read_document(GraphFile(text, file=file), quant_text=quant_text, quant_file=quant_file, atomic=atomic,
                         custom_shapes=custom_shapes, input_shapes=input_shapes, batch_size=batch_size,
                         batch_axes=batch_axes, lenient=lenient, constants=constants)


def read_document(source: GraphFile, *, quant_text: str | None = None, quant_file: str = "graph.quant",
                  atomic: Atomic = None, custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
                  input_shapes: Mapping[str, Any] | None = None, batch_size: int | None = None,
                  batch_axes: Mapping[str, int | None] | None = None, lenient: bool = True,
                  constants: Constants = None) -> Graph:
    """Check and flatten a graph.nnef (its text, or a document a front end built; with optional graph.quant text)
    into an IR graph: the document, then its dialects, then `lower`. input_shapes: new shapes of graph inputs, by
    name; batch_size: the extent of the batch axis (axis 0, or as `batch_axes` says by input name) of every other
    input. lenient: read the deviations from the spec that real producers write (docs/tract_core.md, "Deviations
    read") with an `NNEFDeviationWarning` each; False: each is an `NNEFError`. constants: the data of a variable, by
    `Variable` (for a constant tensor passed as an attribute)."""
    doc = source.document
    try:  # `extension tract_registry tract_core;` and similar (the options bind a dialect's dynamic dimensions)
        doc, declared, relaxed = apply_dialects(doc, input_shapes, batch_size, batch_axes)
        graph = lower(doc, atomic=atomic, custom_shapes=custom_shapes, input_shapes=input_shapes,
                      text=source.held_text, source_length=source.size, batch_size=batch_size,
                      batch_axes=batch_axes, lenient=lenient, constants=constants, dialect=(declared, relaxed))
    except NNEFError as error:
        raise source.located(error) from None
    if quant_text is None:
        return graph
    fragments = dict(standard_fragments())
    fragments.update({fragment.name: fragment for fragment in doc.fragments})
    specs = read_quantization(quant_text, fragments, quant_file)
    return attach_quantization(graph, specs, quant_text, quant_file)


def attach_quantization(graph: Graph, specs: Mapping[str, QuantSpec], text: str | None = None,
                        file: str | None = None) -> Graph:
    """A new graph whose tensors carry `specs`; every key must name a tensor of the graph."""
    for name, spec in specs.items():
        if name not in graph.tensors:
            error = NNEFQuantizationError(f"graph.quant names '{name}', which is not a tensor of the graph "
                                          "(keys are tensor identifiers, not variable labels)", spec.location)
            raise error.with_source(text, file)
    return dataclasses.replace(graph, quantization=dict(specs))


def read_model(path: str | os.PathLike, *, load_tensors: bool = True, atomic: Atomic = None,
               custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
               input_shapes: Mapping[str, Any] | None = None, format: str | None = None,
               params: Any = None, inputs: Sequence[str] | None = None,
               outputs: Sequence[str] | None = None, batch_size: int | None = None,
               batch_axes: Mapping[str, int | None] | None = None, lenient: bool = True) -> ModelData:
    """Open a model (an NNEF folder, graph.nnef path or archive, or a file of another format with its `params`
    and, for LightNet, the tensors that are its `inputs` and `outputs`) and check everything in it (spec
    chapter 6). batch_size: re-declare the batch axis of every input not in `input_shapes` (axis 0, or as
    `batch_axes` says by input name); NNEF models only. lenient: as `read_graph`'s."""
    with open_source(path, format=format, params=params, input_shapes=input_shapes, inputs=inputs,
                     outputs=outputs) as source:
        check_batch_format(source.format, batch_size, batch_axes)
        graph = read_document(source.document, quant_text=source.quant_text, quant_file=source.quant_file,
                              atomic=atomic, custom_shapes=custom_shapes,
                              input_shapes=input_shapes if source.format == "nnef" else None, batch_size=batch_size,
                              batch_axes=batch_axes, lenient=lenient, constants=constant_reader(source))
        tensors: dict[str, TensorData] = {}
        if load_tensors:
            for key, variables in graph.shared_variables().items():
                tensors[key] = source.read_variable(variables[0])
        return ModelData(str(path), graph, tensors, source.format)


def constant_reader(source: ModelSource) -> Callable[[Variable], Any]:
    """The data of a variable of `source` as an array (for a constant tensor passed as an attribute)."""
    return lambda variable: source.read_variable(variable).array


def check_batch_format(format: str, batch_size: int | None, batch_axes: Mapping[str, Any] | None) -> None:
    """batch_size= and batch_axes= apply to NNEF models, whose graph declares its input shapes."""
    if format != "nnef" and (batch_size is not None or batch_axes):
        raise NNEFOptionError(f"batch_size= and batch_axes= apply to NNEF models; give a {format} model its input "
                              "shapes with input_shapes=")


@dataclass
class ModelSource:
    """An opened model of any format, as NNEF: its graph.nnef (the file's text, or the document a front end built),
    its graph.quant text, and its variables' data by label. `state` names the labels whose variables are state, not
    parameters (a front end's knowledge; NNEF says it with `update`). Use as a context manager."""

    source: str
    format: str
    document: GraphFile
    quant_text: str | None
    quant_file: str
    files: container.ModelFiles | None = None  # an NNEF container
    arrays: Mapping[str, Any] = field(default_factory=dict)  # a converted model's values by label
    state: frozenset[str] = frozenset()
    options: ReadOptions = ReadOptions()  # how to open it again (format, params, input_shapes, ...)
    names: Mapping[str, str] = field(default_factory=dict)  # label -> the name the module keeps it under, if not it
    # why its input shapes are not known yet (`formats.Converted.unbound`); `graph` is then the converted graph of
    # its inputs and variables, and the model is read again with input_shapes= when they are known
    unbound: str | None = None
    graph: Graph | None = None

    @property
    def graph_text(self) -> str:
        return self.document.text

    @property
    def graph_file(self) -> str:
        return self.document.file

    def read_variable(self, variable: Variable) -> TensorData:
        if self.files is not None:
            return read_variable(self.files, variable)
        return tensor_file.in_memory(self.arrays[variable.label])

    def tensor_path(self, label: str) -> str:
        return self.files.tensor_path(label) if self.files is not None else f"{self.source}:{label}"

    def close(self) -> None:
        if self.files is not None:
            self.files.close()

    def __enter__(self) -> ModelSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_source(path: str | os.PathLike, options: ReadOptions | None = None, *, shapes_at_call: bool = False,
                progress: bool | None = None, **keywords: Any) -> ModelSource:
    """Open `path` as NNEF (`format='nnef'`), as another format, or as what its content says (by default), with
    `options` (or `ReadOptions.of(**keywords)`: format, params, input_shapes, inputs, outputs, ...). `inputs` and
    `outputs` name the tensors a LightNet model takes and gives (see `formats.lightnet`). shapes_at_call: a model
    of another format that does not say its input shapes opens unconverted (`ModelSource.unbound`). progress: a bar
    on stderr while an NNEF archive is read (None: on a terminal, for large archives)."""
    options = ReadOptions.of(**keywords) if options is None else options
    format, document = options.format, None
    if format is None:
        format, document = formats.detect(path)  # refuses the kinds of file that are not models (formats.kinds)
    elif format == "nnef":
        formats.check_kind(path)
    if format == "nnef":
        if options.params is not None:
            raise ValueError("params= is for models of other formats; an NNEF model keeps its data in .dat files")
        if options.inputs is not None or options.outputs is not None:
            raise ValueError("inputs= and outputs= are for LightNet models; an NNEF graph declares its inputs and "
                             "outputs")
        files = container.open_model(path, progress=progress)  # an archive is read here, in one pass
        document = GraphFile(files.graph_text, file=member_path(files.source, "graph.nnef"))
        return ModelSource(files.source, "nnef", document, files.quant_text, member_path(files.source, "graph.quant"),
                           files, options=options.replace(format="nnef"))
    converted = formats.convert(path, format=format, document=document, params=options.params,
                                  input_shapes=options.shapes, inputs=options.inputs, outputs=options.outputs,
                                  shapes_at_call=shapes_at_call)
    return ModelSource(converted.source, format, converted.document, converted.quant_text,
                       f"{converted.source} (graph.quant)", None, converted.tensors, converted.state,
                       options.replace(format=format, **converted.options), converted.names, converted.unbound,
                       converted.graph if converted.unbound else None)


def read_variable(files: container.ModelFiles, variable: Variable) -> TensorData:
    """Decode the .dat of `variable`, checking its shape and item kind against the graph's declaration before its
    data is read."""
    where = files.tensor_path(variable.label)
    check = tensor_file.header_check(file=where, expected_shape=variable.shape, kinds=_KINDS.get(variable.dtype, ()),
                                     declared=f"variable '{variable.name}' is declared {variable.dtype}")
    return tensor_file.decode(files.tensor_bytes(variable.label, check), file=where, expected_shape=variable.shape)


def member_path(source: str, name: str) -> str:
    """How to name a file of the container in messages: a path, or 'archive:member'."""
    if os.path.isdir(source):
        return os.path.join(source, name)
    if source.endswith(".nnef"):
        return source if name == "graph.nnef" else source[:-len(".nnef")] + ".quant"
    return f"{source}:{name}"


__all__ = ["ModelData", "ModelSource", "NNEFError", "attach_quantization", "check_batch_format", "constant_reader",
           "member_path",
           "open_source", "read_document", "read_graph", "read_model", "read_variable"]
