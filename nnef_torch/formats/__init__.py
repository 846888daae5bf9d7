"""Front ends: graph formats other than NNEF, each read into what the NNEF reader gives.

A front end turns its files into an IR graph of NNEF operations, handed over in memory as an NNEF document (text is
printed only when something asks for it), and the variables' data (`Converted`). From there a model is an NNEF
model: `nnef_torch.load` generates its module, `read_model` checks it, `save` and the command line write it, QAT
and the benchmarks use it. Each format is a package of this one (its files, its operator rules in the op table, its
fragments); `convert` picks one from the file's content or by name.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location, NNEFContainerError, NNEFOptionError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.formats import kinds
from nnef_torch.formats.json_file import open_regular, read_json
from nnef_torch.ir.graph import Graph

# format name -> the package that reads it
FORMATS: dict[str, str] = {"nnvm": "nnef_torch.formats.nnvm", "lightnet": "nnef_torch.formats.lightnet",
                           "onnx": "nnef_torch.formats.onnx"}
_JSON_KEYS = {"nnvm": ("nodes", "arg_nodes", "heads"), "lightnet": ("ops",)}


@dataclass(frozen=True)
class Converted:
    """A model of another format as NNEF: the graph, its NNEF document (the graph with the front end's fragments
    kept whole), the variables' values by label, and the labels whose variables are state rather than parameters
    (such as MXNet's aux states)."""

    format: str
    source: str
    graph: Graph
    document: GraphFile
    tensors: dict[str, np.ndarray]
    state: frozenset[str] = frozenset()
    quant_text: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # what `convert` was called with, to read it again
    names: dict[str, str] = field(default_factory=dict)  # label -> the file's own name where a label cannot hold it
    # why its input shapes are not known (a symbol read without them): then `graph` declares only its inputs (of
    # unknown shape) and its variables, and the model is converted when the shapes are known (`nnef_torch.load`
    # does so at the module's first call)
    unbound: str | None = None

    @property
    def text(self) -> str:
        """The graph.nnef text (printed on first use)."""
        return self.document.text


def detect(path: str | os.PathLike) -> tuple[str, Any]:
    """The format of the file or folder at `path` ('nnef' or a front end's name) and, for a JSON file, its parsed
    document. An NNEF model is a folder, an archive or graph text; a JSON file is told apart by its keys."""
    where = os.fspath(path)
    if os.path.isdir(where):
        return "nnef", None
    if not os.path.exists(where):
        raise NNEFContainerError("no such model folder, graph file or archive", Location(file=where))
    with open_regular(where, "model file", NNEFContainerError) as handle:  # a FIFO is refused, not waited on
        head = handle.read(kinds.HEAD_BYTES)
        handle.seek(0)
        if kinds.is_onnx(head, where):
            return "onnx", None
        if _first_char(handle) != b"{":
            check_kind(where, head)
            return "nnef", None
    document = read_json(where)
    if isinstance(document, dict):
        if document.get("format") == "relayviz":
            return "relayviz", document
        for name, keys in _JSON_KEYS.items():
            if all(key in document for key in keys):
                return name, document
    described = "; ".join(f"{name}: keys {', '.join(keys)}" for name, keys in _JSON_KEYS.items())
    described += '; relayviz: "format": "relayviz"'
    found = ", ".join(key[:40] for key in sorted(document)[:8]) if isinstance(document, dict) \
        else type(document).__name__  # the names of a few keys, shortened: never the file's content
    raise ForeignFormatError(f"this JSON file is no graph format nnef_torch reads ({described}); found {found}",
                             Location(file=where))


def check_kind(path: str | os.PathLike, head: bytes | None = None) -> None:
    """Refuse, saying what it is and what to pass instead, a file given as a model that is another kind of file (an
    NNEF .dat, a graph.quant, MXNet .params, numpy arrays, a zip, ONNX, ...: `kinds.identify`); `head`: its first
    bytes, read here when not given. A folder is let through."""
    where = os.fspath(path)
    if head is None:
        if not os.path.isfile(where):
            return
        with open_regular(where, "model file", NNEFContainerError) as handle:
            head = handle.read(kinds.HEAD_BYTES)
    refused = kinds.identify(head, where)
    if refused is not None:
        raise ForeignFormatError(refused, Location(file=where))


def _first_char(handle: IO[bytes]) -> bytes:
    """The first byte of a file past a UTF-8 byte order mark and JSON's white space (b'' when there is none)."""
    head = handle.read(3)
    rest = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    while True:
        rest = rest.lstrip(b" \t\r\n")
        if rest:
            return rest[:1]
        rest = handle.read(1 << 16)
        if not rest:
            return b""


def convert(path: str | os.PathLike, *, format: str | None = None, document: Any = None,
            params: str | os.PathLike | Mapping[str, Any] | None = None,
            input_shapes: Mapping[str, Any] | None = None, shapes_at_call: bool = False,
            **options: Any) -> Converted:
    """Read a model of another format as NNEF (`format` forces one; by default it is detected). `options` are
    the format's own (LightNet's `inputs` and `outputs`); one the format does not take is refused unless None.
    shapes_at_call: a format whose files may not say the input shapes (`SHAPES_AT_CALL` in its package) returns
    its variables without converting the graph where they are missing (`Converted.unbound`)."""
    if format is None:
        format, document = detect(path)
        if format == "nnef":
            raise ValueError(f"{os.fspath(path)} is an NNEF model, not one of the formats {sorted(FORMATS)}")
    if format == "relayviz":
        raise ForeignFormatError("RelayViz JSON is a drawing of a graph, not a model to run (it has no weights "
                                 "by default, and its operators are a visualizer's names): draw it with "
                                 "`nnef-torch viz` or nnef_torch.viz.draw", Location(file=os.fspath(path)))
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected 'nnef' or one of {sorted(FORMATS)}")
    reader = importlib.import_module(FORMATS[format])
    taken = getattr(reader, "OPTIONS", ("params", "input_shapes"))
    given = {key: value for key, value in options.items() if value is not None}
    refused = sorted(key for key in given if key not in taken)
    if refused:
        raise NNEFOptionError(f"{', '.join(key + '=' for key in refused)} do(es) not apply to {format} models "
                         f"(they take {', '.join(key + '=' for key in taken)})")
    if shapes_at_call and getattr(reader, "SHAPES_AT_CALL", False):
        given["shapes_at_call"] = True
    return reader.read(path, document=document, params=params, input_shapes=input_shapes, **given)


__all__ = ["FORMATS", "Converted", "check_kind", "convert", "detect"]
