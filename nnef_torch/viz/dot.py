"""Scene -> Graphviz DOT text, drawn top to bottom.

Each node's label gives its name and operation, its attributes (those that differ from the op's defaults) and the
type of each output; edges are labelled with the argument they feed, so argument order shows. Fill colours follow
the operation's family (`viz.families`), and a tensor with a graph.quant entry has its quantization written on its
producer and on the edges that carry it, drawn in the quantization colour. Fragment invocations become nested
clusters. Every node has `id="<node.key>"` and a `class` naming its kind and family: Graphviz (2.40 and later)
writes both into the SVG (`<g id="n12" class="node operation convolution">`), which the HTML viewer searches.

Labels are plain DOT strings (no HTML-like labels and no record shapes), so only backslash, double quote and `&`
(Graphviz reads entities in every label) need escaping; control characters are shown as escapes.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from nnef_torch.viz.families import FAMILIES, colour, family
from nnef_torch.viz.labels import shown_attributes, value_text
from nnef_torch.viz.scene import (
    BIND,
    CONSTANT,
    FRAGMENT,
    FUNCTION,
    GET_ITEM,
    IF,
    INPUT,
    LET,
    OPERATION,
    OUTPUT,
    TUPLE,
    VARIABLE,
    Node,
    Scene,
    TensorType,
)

Highlight = Callable[[Node], "Mapping[str, str] | bool | None"]

QUANT_COLOUR = "#b2182b"  # quantized tensors: their producer's outline and their edges
HIGHLIGHT_STYLE = {"color": "#e6550d", "penwidth": "4"}
FONT = "Helvetica"
SHOWN_OUTPUTS = 16  # a node with more outputs (a large split) lists this many
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# kind -> the DOT attributes that set it apart (operations use the defaults of the `node` statement)
KIND_STYLES: dict[str, dict[str, str]] = {
    INPUT: {"peripheries": "2", "fillcolor": "#c7e9c0"},
    VARIABLE: {"shape": "cylinder", "style": "filled", "fillcolor": "#f3e2c0"},
    CONSTANT: {"shape": "note", "style": "filled", "fillcolor": "#f0f0f0"},
    OUTPUT: {"peripheries": "2", "fillcolor": "#a1d99b"},
    FRAGMENT: {"shape": "box3d", "style": "filled", "penwidth": "1.5"},
    FUNCTION: {"shape": "tab", "style": "filled", "fillcolor": "#ececec"},
    TUPLE: {"shape": "parallelogram", "style": "filled", "fillcolor": "#ececec"},
    GET_ITEM: {"shape": "invtrapezium", "style": "filled", "fillcolor": "#ececec"},
    LET: {"shape": "cds", "style": "filled", "fillcolor": "#ececec"},
    IF: {"shape": "diamond", "style": "filled", "fillcolor": "#ececec"},
    BIND: {"shape": "hexagon", "style": "filled", "fillcolor": "#ececec"},
}
_RELAYVIZ_KINDS = {FUNCTION, TUPLE, GET_ITEM, LET, IF, BIND}


def _family(node: Node) -> str | None:
    """The family that colours `node`: operations' and fragments', and RelayViz nodes' that name an op."""
    if node.kind in (OPERATION, FRAGMENT) or (node.kind in _RELAYVIZ_KINDS and node.op):
        return family(node.op)
    return None

# characters a DOT string cannot hold as they are: escaped, or (control characters) shown as `\xNN`
_ESCAPES: dict[int, str] = {ord("\\"): "\\\\", ord('"'): '\\"', ord("&"): "&amp;"}
_ESCAPES.update({code: f"\\\\x{code:02x}" for code in (*range(32), 127)})
_ESCAPES.update({code: "\ufffd" for code in range(0xD800, 0xE000)})  # lone surrogates cannot be written as UTF-8


def escape(text: str) -> str:
    """`text` as the inside of a double-quoted DOT string (one label line: newlines shown as `\\x0a`)."""
    return text.translate(_ESCAPES)


def _quoted(text: str) -> str:
    return '"' + escape(text) + '"'


def _key(name: str) -> str:
    """An attribute name: bare where DOT allows it, quoted otherwise."""
    return name if _NAME.fullmatch(name) else _quoted(name)


def dot_text(scene: Scene, *, highlight: Highlight | None = None, clusters: bool = True,
             legend: bool = True) -> str:
    """The DOT text of `scene`. highlight(node) returns True (the default highlight style), a dict of DOT
    attributes for that node, or None/False; clusters=False leaves fragment invocations unboxed; legend=False
    leaves out the cluster that shows each family's colour."""
    out = [f"digraph {_quoted(scene.name or 'graph')} {{",
           f'  graph [rankdir=TB, fontname="{FONT}", fontsize=12, label={_quoted(scene.name)}, labelloc=t, '
           'nodesep=0.3, ranksep=0.4];',
           f'  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="{FONT}", fontsize=10, '
           'margin="0.12,0.06"];',
           f'  edge [fontname="{FONT}", fontsize=9, color="#555555", arrowsize=0.7];']
    statements = {node.id: _node_statement(node, highlight) for node in scene.nodes.values()}
    if clusters and any(node.scope for node in scene.nodes.values()):
        out.extend(_clustered(scene, statements))
    else:
        out.extend("  " + statement for statement in statements.values())
    for index, edge in enumerate(scene.edges):
        out.append(f"  n{edge.source} -> n{edge.target} [{_edge_attributes(index, edge.label, edge.quant)}];")
    if legend:
        out.extend(_legend(scene))
    out.append("}")
    return "\n".join(out) + "\n"


# --- nodes ------------------------------------------------------------------------------------------------------

def _node_statement(node: Node, highlight: Highlight | None) -> str:
    fam = _family(node)
    classes = [node.kind] + ([fam] if fam else [])
    attrs: dict[str, str] = dict(KIND_STYLES.get(node.kind, ()))
    if fam is not None:
        attrs["fillcolor"] = colour(fam)
    if any(t.quant for t in node.outputs):
        attrs["color"] = QUANT_COLOUR
        attrs["penwidth"] = "2"
        classes.append("quantized")
    if highlight is not None:
        chosen = highlight(node)
        if chosen:
            attrs.update({str(k): str(v) for k, v in chosen.items()} if isinstance(chosen, Mapping)
                         else HIGHLIGHT_STYLE)
            classes.append("highlighted")
    parts = [f'id="{node.key}"', f'class="{escape(" ".join(classes))}"', f'label="{_label(node)}"']
    parts.extend(f"{_key(key)}={_quoted(value)}" for key, value in attrs.items())
    return f"{node.key} [{', '.join(parts)}];"


def _label(node: Node) -> str:
    """The escaped label text: centred title lines (`\\n`), then left-justified detail lines (`\\l`)."""
    if node.kind in (INPUT, OUTPUT):
        return _lines([node.name], [], node.outputs, single=True)
    if node.kind == VARIABLE:
        titles = [node.name] + ([f"'{node.label}'"] if node.label and node.label != node.name else [])
        return _lines(titles, [], node.outputs, single=True)
    if node.kind == CONSTANT:
        details = [] if node.value is None else [f"value = {value_text(node.value)}"]
        return _lines([node.name], details, node.outputs, single=True)
    names = [t.name for t in node.outputs] or [node.name]
    title = ", ".join(names if len(names) <= 3 else names[:2] + ["…"]) + (f" = {node.op}" if node.op else "")
    details = [f"{key} = {value_text(value)}" for key, value in shown_attributes(node.op, node.attrs)]
    return _lines([title], details, node.outputs, single=len(node.outputs) == 1)


def _lines(titles: Iterable[str], details: Iterable[str], outputs: list[TensorType], *, single: bool) -> str:
    text = "".join(escape(line) + "\\n" for line in titles)
    text += "".join(escape(line) + "\\l" for line in details)
    for tensor in outputs[:SHOWN_OUTPUTS]:
        shown = tensor.describe() if single else f"{tensor.name}: {tensor.describe()}"
        text += escape(f"-> {shown}") + "\\l"
        if tensor.quant:
            text += escape(f"   quant: {tensor.quant}") + "\\l"
    if len(outputs) > SHOWN_OUTPUTS:
        text += f"-> ... {len(outputs) - SHOWN_OUTPUTS} more outputs\\l"
    return text


def _clustered(scene: Scene, statements: Mapping[int, str]) -> list[str]:
    """Node statements in scene order inside nested `subgraph cluster_N` blocks, one per fragment invocation; an
    invocation met again after others reopens its cluster (DOT merges subgraphs of the same name)."""
    numbers: dict[tuple[str, ...], int] = {}
    out: list[str] = []
    current: tuple[str, ...] = ()
    for node in scene.nodes.values():
        path = node.scope
        common = 0
        while common < min(len(path), len(current)) and path[common] == current[common]:
            common += 1
        out.extend("  " * depth + "}" for depth in range(len(current), common, -1))
        for depth in range(common + 1, len(path) + 1):
            number = numbers.setdefault(path[:depth], len(numbers) + 1)
            caption = scene.scopes.get(path[depth - 1], path[depth - 1])
            out.append(f"{'  ' * depth}subgraph cluster_{number} {{")
            out.append(f'{"  " * (depth + 1)}id="scope{number}"; class="scope"; label={_quoted(caption)}; '
                       'style="rounded,dashed"; color="#7f7f7f"; fontsize=10;')
        current = path
        out.append("  " * (len(path) + 1) + statements[node.id])
    out.extend("  " * depth + "}" for depth in range(len(current), 0, -1))
    return out


# --- edges and legend -------------------------------------------------------------------------------------------

def _edge_attributes(index: int, label: str, quant: str | None) -> str:
    parts = [f'id="e{index}"']
    text = escape(label)
    if quant:
        text += "\\n" + escape(quant)
        parts.append(f'class="quantized", color="{QUANT_COLOUR}", fontcolor="{QUANT_COLOUR}", penwidth=1.8')
    if text:
        parts.append(f'label="{text}"')
    return ", ".join(parts)


def _legend(scene: Scene) -> list[str]:
    """A small cluster with one box per family present in the scene (and one for quantized tensors), in a row."""
    present = {_family(node) for node in scene.nodes.values()}
    entries = [(name, f'fillcolor="{colour(name)}"') for name in FAMILIES if name in present]
    if any(t.quant for node in scene.nodes.values() for t in node.outputs):
        entries.append(("quantized", f'color="{QUANT_COLOUR}", penwidth=2'))
    if not entries:
        return []
    out = ['  subgraph cluster_legend {',
           '    id="legend"; class="legend"; label="families"; style="rounded"; color="#bdbdbd"; fontsize=10;',
           '    node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontsize=9, margin="0.08,0.03"];']
    for index, (text, style) in enumerate(entries):
        key = text.replace("-", "_")  # Graphviz writes '-' in an SVG id as '&#45;'
        out.append(f'    legend_{index} [id="legend_{key}", class="legend", label="{text}", {style}];')
    if len(entries) > 1:  # one rank, kept in order by invisible edges
        names = [f"legend_{index}" for index in range(len(entries))]
        out.append(f"    {{rank=same; {'; '.join(names)}}}")
        out.append(f"    {' -> '.join(names)} [style=invis];")
    out.append("  }")
    return out
