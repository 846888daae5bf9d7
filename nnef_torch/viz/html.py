"""Scene -> one self-contained HTML page that lays the graph out itself: pan (drag), zoom (wheel, buttons, fit),
search, and a panel with the clicked node's details. Nothing is fetched and no system program is needed: the
style, the vendored layout library (dagre, `viz/vendor/`), the viewer script (`viz/page/viewer.js`) and the graph
are all inline.

Variables and constants are folded into the nodes that read them (`viz.fold`): a node reads `linear  W[96,32]
b[1,96]`, and its panel lists each folded tensor with its shape, element type and statistics. The graph is JSON in
two `<script type="application/json">` elements: the node index (node key -> name, op, kind, family, attributes,
outputs, folded tensors and the lines drawn in its box) and the edge list. The script draws each node as an SVG
group `<g id="n12" class="node operation convolution">` placed by dagre (`data-box="x,y,width,height"`), opens at
a readable scale on the graph's inputs ("fit" shows it all), and search marks matching groups with the class `hit`.
`page.html#search=relu` opens the page with that search run.
"""
from __future__ import annotations

import html
import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from nnef_torch.viz.dot import KIND_STYLES
from nnef_torch.viz.families import FAMILIES, colour, family
from nnef_torch.viz.fold import fold_variables
from nnef_torch.viz.labels import shown_attributes, value_text
from nnef_torch.viz.scene import CONSTANT, INPUT, OUTPUT, VARIABLE, Folded, Node, Scene

ATTRIBUTE_CHARS = 200  # the panel shows longer attribute values than the drawing
SHOWN_ATTRIBUTES = 6  # a box lists this many attributes, then how many more
SHOWN_OUTPUTS = 4  # and this many outputs
WEIGHT_LINE_CHARS = 44  # folded tensors are listed on lines of about this length
QUANT_COLOUR = "#b2182b"
# how a folded tensor is called in its reader's box, by the argument it feeds
SHORT_PARAMS = {"filter": "W", "weight": "W", "weights": "W", "bias": "b"}
_SURROGATES = {code: "\ufffd" for code in range(0xD800, 0xE000)}  # lone surrogates: UTF-8 cannot hold them


def node_index(scene: Scene, *, clusters: bool = True) -> dict[str, dict[str, Any]]:
    """What the page knows about each node, by key: for drawing, search and the details panel. `clusters` are the
    fragment invocations it was expanded from, outermost first, as [cluster id, caption]: boxes in the drawing
    (none with clusters=False)."""
    index = {}
    numbers: dict[tuple[str, ...], str] = {}
    for node in scene.nodes.values():
        fam = _family(node)
        classes = ["node", node.kind] + ([fam] if fam else []) + (["quantized"] if _quantized(node) else [])
        index[node.key] = {
            "name": node.name, "op": node.op or "", "kind": node.kind, "family": fam,
            "label": node.label or "", "scope": " / ".join(scene.scopes.get(s, s) for s in node.scope),
            "attrs": [[key, value_text(value, ATTRIBUTE_CHARS)] for key, value in node.attrs.items()],
            "outputs": [[t.name, t.describe(), t.quant or ""] for t in node.outputs],
            "folded": [_folded_entry(item) for item in node.folded],
            "classes": " ".join(classes), "fill": _fill(node, fam), "lines": _lines(node),
            "clusters": [[numbers.setdefault(node.scope[:depth], f"c{len(numbers)}"),
                          scene.scopes.get(node.scope[depth - 1], node.scope[depth - 1])]
                         for depth in range(1, len(node.scope) + 1)] if clusters else [],
        }
    return index


def edge_list(scene: Scene) -> list[list[str]]:
    """Each edge as [source key, target key, label, quantization]; labels only where they tell arguments apart
    (the target reads two or more drawn tensors)."""
    readers: dict[int, int] = {}
    for edge in scene.edges:
        readers[edge.target] = readers.get(edge.target, 0) + 1
    return [[f"n{edge.source}", f"n{edge.target}", edge.label if readers[edge.target] > 1 else "", edge.quant or ""]
            for edge in scene.edges]


def _family(node: Node) -> str:
    return family(node.op) if node.op and node.kind not in (INPUT, VARIABLE, CONSTANT, OUTPUT) else ""


def _quantized(node: Node) -> bool:
    return any(t.quant for t in node.outputs)


def _fill(node: Node, fam: str) -> str:
    return colour(fam) if fam else KIND_STYLES.get(node.kind, {}).get("fillcolor", "#ffffff")


def _lines(node: Node) -> list[list[str]]:
    """The lines drawn in a node's box, each [css class, text]: a title, folded tensors, attributes, outputs."""
    if node.kind in (INPUT, OUTPUT):
        return [["title", node.name]] + [["type", t.describe()] for t in node.outputs[:1]]
    if node.kind == VARIABLE:
        label = [["detail", f"'{node.label}'"]] if node.label and node.label != node.name else []
        return [["title", node.name]] + label + [["type", t.describe()] for t in node.outputs[:1]]
    if node.kind == CONSTANT:
        value = [] if node.value is None else [["detail", f"value = {value_text(node.value)}"]]
        return [["title", node.name]] + value + [["type", t.describe()] for t in node.outputs[:1]]
    lines = [["title", node.op or node.name]]
    lines.extend(["weights", text] for text in _weight_lines(node.folded))
    shown = shown_attributes(node.op, node.attrs)
    lines.extend(["detail", f"{key} = {value_text(value)}"] for key, value in shown[:SHOWN_ATTRIBUTES])
    if len(shown) > SHOWN_ATTRIBUTES:
        lines.append(["detail", f"… {len(shown) - SHOWN_ATTRIBUTES} more attributes"])
    single = len(node.outputs) == 1
    for tensor in node.outputs[:SHOWN_OUTPUTS]:
        lines.append(["type", "→ " + (tensor.describe() if single else f"{tensor.name}: {tensor.describe()}")])
        if tensor.quant:
            lines.append(["detail", f"quant: {_cut(tensor.quant)}"])
    if len(node.outputs) > SHOWN_OUTPUTS:
        lines.append(["type", f"→ … {len(node.outputs) - SHOWN_OUTPUTS} more outputs"])
    return lines


def _cut(text: str, limit: int = WEIGHT_LINE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _weight_lines(folded: tuple[Folded, ...]) -> list[str]:
    """`W[64,3,7,7] b[64]`, wrapped."""
    words = []
    for item in folded:
        shape = "?" if item.type.shape is None else ",".join(str(dim) for dim in item.type.shape)
        words.append(f"{SHORT_PARAMS.get(item.param, item.param)}[{shape}]")
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= WEIGHT_LINE_CHARS:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _folded_entry(item: Folded) -> dict[str, Any]:
    return {"param": item.param, "name": item.name, "kind": item.kind, "label": item.label or "",
            "type": item.type.describe(), "via": list(item.via), "dtype": item.data_dtype or "",
            "stats": [[name, f"{value:.6g}"] for name, value in item.stats]}


def _script_json(value: Any) -> str:
    """JSON that cannot end its <script> element early: '<', '>' and '&' written as escapes."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@lru_cache(maxsize=1)
def _scripts() -> tuple[str, str, str]:
    """The style, dagre (with its license as a comment) and the viewer script, as the page inlines them."""
    here = resources.files("nnef_torch.viz")
    style = here.joinpath("page/viewer.css").read_text(encoding="utf-8")
    viewer = here.joinpath("page/viewer.js").read_text(encoding="utf-8")
    dagre = here.joinpath("vendor/dagre.min.js").read_text(encoding="utf-8")
    dagre = "\n".join(line for line in dagre.splitlines() if not line.startswith("//# sourceMappingURL="))
    notice = here.joinpath("vendor/LICENSE").read_text(encoding="utf-8").replace("*/", "* /")
    dagre = f"/*! @dagrejs/dagre 3.1.3 (with @dagrejs/graphlib), MIT license:\n{notice}*/\n{dagre}"
    for text in (style, viewer, dagre):
        assert "</script" not in text.lower() and "</style" not in text.lower() and "<!--" not in text
    return style, dagre, viewer


def html_page(scene: Scene, *, title: str | None = None, values: Mapping[str, Any] | None = None,
              fold: bool = True, clusters: bool = True) -> str:
    """The viewer page of `scene`. `values` (a variable's label -> its array or tensor) gives the folded variables
    their statistics; fold=False draws variables and constants as nodes of their own; clusters=False draws no
    boxes around fragment invocations."""
    drawn = fold_variables(scene, values) if fold else scene
    style, dagre, viewer = _scripts()
    heading = html.escape(title if title is not None else scene.name)
    present = {_family(node) for node in drawn.nodes.values()} - {""}
    legend = "".join(f'<li><span class="swatch" style="background:{colour(name)}"></span>{name}</li>'
                     for name in FAMILIES if name in present)
    if any(_quantized(node) for node in drawn.nodes.values()):
        legend += '<li><span class="swatch quantized"></span>quantized</li>'
    folded = sum(len(node.folded) for node in drawn.nodes.values())
    index = _script_json(node_index(drawn, clusters=clusters))
    page = _PAGE.format(title=heading, style=style, legend=legend, index=index, edges=_script_json(edge_list(drawn)),
                        dagre=dagre, script=viewer, nodes=len(drawn.nodes), edge_count=len(drawn.edges),
                        folded=folded)
    return page.translate(_SURROGATES)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<header id="bar">
  <strong id="title">{title}</strong>
  <input id="search" type="search" placeholder="search name, op or tensor" autocomplete="off" spellcheck="false">
  <span id="count" aria-live="polite"></span>
  <button id="next" title="next match (Enter)">next</button>
  <span class="gap"></span>
  <button id="zoom-out" title="zoom out">&minus;</button>
  <button id="zoom-in" title="zoom in">+</button>
  <button id="start" title="back to the inputs, at a readable size">inputs</button>
  <button id="fit" title="fit the drawing in the window">fit</button>
</header>
<main id="view"><svg id="graph" xmlns="http://www.w3.org/2000/svg">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
<path d="M0,0 L10,5 L0,10 z"></path></marker></defs>
<g id="viewport"><g id="clusters"></g><g id="edges"></g><g id="nodes"></g></g>
</svg></main>
<aside id="info">
  <div id="details"><p class="hint">{nodes} nodes, {edge_count} edges, {folded} weights and constants folded into
  the nodes that read them. Click a node for its details; drag to pan, wheel to zoom.</p></div>
  <ul id="legend">{legend}</ul>
</aside>
<script type="application/json" id="node-index">{index}</script>
<script type="application/json" id="edge-list">{edges}</script>
<script>{dagre}</script>
<script>{script}</script>
</body>
</html>
"""
