"""See any model: RelayViz JSON, Graphviz DOT, SVG/PNG/PDF, a self-contained HTML viewer and a terminal tree.

    nnef_torch.viz.draw("model.tgz", "model.svg")            # any model the reader opens, by OUT's suffix
    nnef_torch.viz.draw(module, "net.html", example_inputs=x) # a torch module, traced as `export` does
    print(nnef_torch.viz.tree("resnet-symbol.json"))          # other formats too

Every source becomes a `Scene` (nodes and labelled edges; `viz.scene`), and every renderer draws a scene. RelayViz
documents written by others are validated (`read_relayviz`) and drawn the same way.
"""
from __future__ import annotations

import os
import warnings
from typing import Any

from nnef_torch import formats
from nnef_torch.errors import NNEFOptionError
from nnef_torch.format.container import write_file
from nnef_torch.viz.dot import Highlight, dot_text
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.html import html_page
from nnef_torch.viz.relayviz_read import parse_relayviz, read_relayviz, scene_from_relayviz
from nnef_torch.viz.relayviz_write import format_relayviz, relayviz_document
from nnef_torch.viz.render import GRAPHVIZ_HINT, RenderError, find_dot, render
from nnef_torch.viz.scene import Edge, Node, Scene, TensorType
from nnef_torch.viz.select import neighbourhood
from nnef_torch.viz.sources import open_drawable
from nnef_torch.viz.tree import tree_text

# OUT's suffix -> what is written
OUTPUTS = {".json": "relayviz", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf",
           ".html": "html", ".htm": "html", ".txt": "text"}


def scene(source: Any, *, example_inputs: Any = None, collapse_fragments: bool = False, around: str | None = None,
          radius: int = 2, **options: Any) -> Scene:
    """The drawing of `source`: a model path of any format (or a RelayViz JSON file), an nn.Module with
    `example_inputs`, an imported NNEFModule, an exported Model, a ModelData or an IR Graph. `options` are
    the reader's (format=, params=, inputs=, outputs=, input_shapes=)."""
    return _drawing(source, example_inputs, collapse_fragments, around, radius, False, options)[0]


def _drawing(source: Any, example_inputs: Any, collapse_fragments: bool, around: str | None, radius: int,
             weights: bool, options: dict[str, Any]) -> tuple[Scene, Any]:
    """The scene of `source` and, with weights=True, its variables' values by label (None where not read)."""
    document = _relayviz_source(source)
    values = None
    if document is not None:
        drawn = scene_from_relayviz(document, name=os.path.basename(os.fspath(source)))
    else:
        drawable = open_drawable(source, example_inputs=example_inputs, weights=weights, **options)
        drawn, values = scene_of(drawable.graph, collapse=collapse_fragments), drawable.tensors
    return (neighbourhood(drawn, around, radius) if around is not None else drawn), values


def relayviz(source: Any, *, example_inputs: Any = None, embed_weights: bool = False, **options: Any) -> dict:
    """The RelayViz document of `source`; `embed_weights=True` writes variables as Const nodes with values."""
    document = _relayviz_source(source)
    if document is not None:
        return document
    drawable = open_drawable(source, example_inputs=example_inputs, weights=embed_weights, **options)
    return relayviz_document(drawable.graph, drawable.tensors)


def tree(source: Any, **options: Any) -> str:
    """The terminal tree of `source` (one operation per line, with shapes); options as `scene` takes."""
    return tree_text(scene(source, **options))


def draw(source: Any, output: str | os.PathLike, *, example_inputs: Any = None, embed_weights: bool = False,
         collapse_fragments: bool = False, clusters: bool = True, around: str | None = None, radius: int = 2,
         highlight: Highlight | None = None, **options: Any) -> str:
    """Draw `source` into `output`, in the format its suffix names: .json (RelayViz), .dot/.gv, .svg/.png/.pdf
    (with Graphviz's dot), .html (a self-contained viewer page, laid out in the browser; variables folded into the
    nodes that read them, with their statistics) or .txt (the tree). Returns the path written.

    Where dot is missing (.svg/.png/.pdf), the DOT text is written beside `output` (suffix .dot) and RenderError
    says how to install Graphviz. around/radius draw only a neighbourhood; collapse_fragments draws each fragment
    invocation as one node; clusters=False leaves invocations unboxed; highlight(node) -> True or DOT
    attributes styles chosen nodes (DOT only)."""
    path = os.fspath(output)
    kind = OUTPUTS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise NNEFOptionError(f"{path}: cannot tell what to write from the suffix; use one of "
                              f"{', '.join(sorted(OUTPUTS))}")
    if kind == "relayviz":
        document = relayviz(source, example_inputs=example_inputs, embed_weights=embed_weights, **options)
        write_file(path, format_relayviz(document).encode())
        return path
    if embed_weights:
        warnings.warn("embed_weights applies to RelayViz (.json) output only", stacklevel=2)
    drawn, values = _drawing(source, example_inputs, collapse_fragments, around, radius, kind == "html", options)
    if kind == "html":  # laid out in the page: no Graphviz
        write_file(path, html_page(drawn, title=drawn.name, values=values, clusters=clusters).encode())
        return path
    if kind == "text":
        write_file(path, tree_text(drawn).encode())
        return path
    dot = dot_text(drawn, highlight=highlight, clusters=clusters)
    if kind == "dot":
        write_file(path, dot.encode())
        return path
    if find_dot() is None:
        fallback = os.path.splitext(path)[0] + ".dot"
        write_file(fallback, dot.encode())
        raise RenderError(f"Graphviz's dot is not on the PATH, so {path} was not written; the graph is in "
                          f"{fallback} instead. {GRAPHVIZ_HINT}")
    render(dot, path, kind)
    return path


def _relayviz_source(source: Any) -> dict | None:
    """The document of a RelayViz JSON file (validated), or None for any other source."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isfile(source):
        return None
    with open(source, "rb") as handle:
        head = handle.read(4096)
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return None
    if formats.detect(source)[0] != "relayviz":
        return None
    return read_relayviz(source)


__all__ = ["GRAPHVIZ_HINT", "OUTPUTS", "Edge", "Node", "RenderError", "Scene", "TensorType", "draw", "dot_text",
           "find_dot", "neighbourhood", "parse_relayviz", "read_relayviz", "relayviz", "relayviz_document", "scene",
           "scene_from_relayviz", "tree", "tree_text"]
