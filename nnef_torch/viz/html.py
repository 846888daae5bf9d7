"""Scene + its SVG -> one self-contained HTML page: pan (drag), zoom (wheel, buttons, fit), search, and a panel with
the clicked node's details. Nothing is fetched: the SVG, the style, the script and the node index are all inline.

The index (node key -> name, op, kind, family, attributes, outputs) is JSON in a `<script type="application/json">`;
search marks matching SVG node groups (`<g id="n12" class="node ...">`) with the class `hit`. `page.html#search=relu`
opens the page with that search run.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any

from nnef_torch.viz.families import FAMILIES, colour, family
from nnef_torch.viz.labels import value_text
from nnef_torch.viz.scene import Node, Scene

ATTRIBUTE_CHARS = 200  # the panel shows longer attribute values than the drawing

_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)  # XML declaration, DOCTYPE, comments before <svg>
_SURROGATES = re.compile("[\ud800-\udfff]")  # lone surrogates: UTF-8 cannot hold them


def node_index(scene: Scene) -> dict[str, dict[str, Any]]:
    """What the page knows about each node, by key: for search and for the details panel."""
    index = {}
    for node in scene.nodes.values():
        index[node.key] = {
            "name": node.name, "op": node.op or "", "kind": node.kind, "family": _family(node),
            "label": node.label or "", "scope": " / ".join(scene.scopes.get(s, s) for s in node.scope),
            "attrs": [[key, value_text(value, ATTRIBUTE_CHARS)] for key, value in node.attrs.items()],
            "outputs": [[t.name, t.describe(), t.quant or ""] for t in node.outputs],
        }
    return index


def _family(node: Node) -> str:
    return family(node.op) if node.op and node.kind not in ("input", "variable", "constant", "output") else ""


def _script_json(value: Any) -> str:
    """JSON that cannot end its <script> element early: '<', '>' and '&' written as escapes."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")




def html_page(scene: Scene, svg: str | bytes, *, title: str | None = None) -> str:
    """The viewer page of `scene`, drawn as `svg` (Graphviz's SVG of `dot_text(scene)`)."""
    if isinstance(svg, bytes):
        svg = svg.decode("utf-8", "replace")
    svg = _PROLOGUE.sub("", svg, count=1).strip()
    heading = html.escape(title if title is not None else scene.name)
    present = {_family(node) for node in scene.nodes.values()} - {""}
    legend = "".join(f'<li><span class="swatch" style="background:{colour(name)}"></span>{name}</li>'
                     for name in FAMILIES if name in present)
    page = _PAGE.format(title=heading, style=_STYLE, svg=svg, legend=legend, index=_script_json(node_index(scene)),
                        script=_SCRIPT, nodes=len(scene.nodes), edges=len(scene.edges))
    return _SURROGATES.sub("\ufffd", page)


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
  <button id="fit" title="fit the drawing in the window">fit</button>
</header>
<main id="view"><div id="canvas">
{svg}
</div></main>
<aside id="info">
  <div id="details"><p class="hint">{nodes} nodes, {edges} edges. Click a node for its details;
  drag to pan, wheel to zoom.</p></div>
  <ul id="legend">{legend}</ul>
</aside>
<script type="application/json" id="node-index">{index}</script>
<script>{script}</script>
</body>
</html>
"""

_STYLE = """
html, body { margin: 0; height: 100%; font: 13px system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
body { display: grid; grid-template-rows: auto 1fr; grid-template-columns: 1fr 300px; }
#bar { grid-column: 1 / 3; display: flex; gap: 6px; align-items: center; padding: 6px 10px;
       background: #f4f4f4; border-bottom: 1px solid #ccc; }
#title { margin-right: 12px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 30%; }
#search { width: 260px; padding: 3px 6px; }
#count { min-width: 80px; color: #555; }
.gap { flex: 1; }
button { padding: 3px 10px; }
#view { position: relative; overflow: hidden; cursor: grab; background: #fff; }
#view.dragging { cursor: grabbing; }
#canvas { position: absolute; left: 0; top: 0; transform-origin: 0 0; }
#info { border-left: 1px solid #ccc; padding: 8px 12px; overflow: auto; background: #fafafa; }
#info h2 { font-size: 15px; margin: 4px 0 8px; word-break: break-all; }
#info table { border-collapse: collapse; width: 100%; }
#info td { vertical-align: top; padding: 2px 4px; border-bottom: 1px solid #eee; word-break: break-all; }
#info td:first-child { color: #666; white-space: nowrap; word-break: normal; }
.hint { color: #666; }
#legend { list-style: none; padding: 0; margin: 16px 0 0; }
#legend li { margin: 3px 0; }
.swatch { display: inline-block; width: 14px; height: 14px; margin-right: 6px; border: 1px solid #888;
          vertical-align: middle; border-radius: 3px; }
svg.searching g.node:not(.hit):not(.legend) { opacity: 0.35; }
g.node.hit path, g.node.hit polygon, g.node.hit ellipse, g.node.hit polyline { stroke: #ff7f0e; stroke-width: 5px; }
g.node.selected path, g.node.selected polygon, g.node.selected ellipse { stroke: #3182bd; stroke-width: 5px; }
g.node.current path, g.node.current polygon, g.node.current ellipse { stroke: #d62728; stroke-width: 7px; }
g.node { cursor: pointer; }
"""

_SCRIPT = """
(function () {
  "use strict";
  var index = JSON.parse(document.getElementById("node-index").textContent);
  var view = document.getElementById("view"), canvas = document.getElementById("canvas");
  var svg = canvas.querySelector("svg");
  var box = document.getElementById("search"), count = document.getElementById("count");
  var details = document.getElementById("details");
  var scale = 1, tx = 0, ty = 0, hits = [], current = -1, selected = null;
  var haystack = {};
  Object.keys(index).forEach(function (key) {
    var entry = index[key];
    haystack[key] = [entry.name, entry.op].concat(entry.outputs.map(function (o) { return o[0]; }))
      .join("\\n").toLowerCase();
  });

  function apply() { canvas.style.transform = "translate(" + tx + "px," + ty + "px) scale(" + scale + ")"; }

  function zoomAt(factor, x, y) {
    var next = Math.min(16, Math.max(0.01, scale * factor));
    factor = next / scale;
    tx = x - (x - tx) * factor; ty = y - (y - ty) * factor; scale = next; apply();
  }

  function fit() {
    if (!svg) { return; }
    var rect = view.getBoundingClientRect(), drawn = svg.getBoundingClientRect();
    var width = drawn.width / scale, height = drawn.height / scale;
    if (!width || !height) { return; }
    scale = Math.min(2, 0.96 * Math.min(rect.width / width, rect.height / height));
    tx = (rect.width - width * scale) / 2; ty = (rect.height - height * scale) / 2; apply();
  }

  function centre(element) {
    var rect = view.getBoundingClientRect(), drawn = element.getBoundingClientRect();
    if (scale < 0.6) { zoomAt(0.6 / scale, drawn.left - rect.left, drawn.top - rect.top); }
    drawn = element.getBoundingClientRect();
    tx += rect.left + rect.width / 2 - (drawn.left + drawn.width / 2);
    ty += rect.top + rect.height / 2 - (drawn.top + drawn.height / 2);
    apply();
  }

  function row(table, name, value) {
    var tr = table.insertRow(), a = tr.insertCell(), b = tr.insertCell();
    a.textContent = name; b.textContent = value;
  }

  function show(key) {
    var entry = index[key];
    if (!entry) { return; }
    if (selected) { selected.classList.remove("selected"); }
    selected = document.getElementById(key);
    if (selected) { selected.classList.add("selected"); }
    details.textContent = "";
    var h = document.createElement("h2"), table = document.createElement("table");
    h.textContent = entry.name;
    details.appendChild(h); details.appendChild(table);
    row(table, "kind", entry.kind);
    if (entry.op) { row(table, "op", entry.op); }
    if (entry.family) { row(table, "family", entry.family); }
    if (entry.label) { row(table, "label", entry.label); }
    if (entry.scope) { row(table, "in", entry.scope); }
    entry.attrs.forEach(function (a) { row(table, a[0], a[1]); });
    entry.outputs.forEach(function (o) {
      row(table, "output", o[0] + ": " + o[1]);
      if (o[2]) { row(table, "quant", o[2]); }
    });
  }

  function label(n) { return n === 1 ? "1 match" : n ? n + " matches" : "no match"; }

  function search(text) {
    hits.forEach(function (key) {
      var element = document.getElementById(key);
      if (element) { element.classList.remove("hit", "current"); }
    });
    hits = []; current = -1;
    var needle = text.trim().toLowerCase();
    if (svg) { svg.classList.toggle("searching", needle.length > 0); }
    if (!needle) { count.textContent = ""; return; }
    Object.keys(haystack).forEach(function (key) {
      if (haystack[key].indexOf(needle) >= 0) {
        var element = document.getElementById(key);
        if (element) { element.classList.add("hit"); hits.push(key); }
      }
    });
    count.textContent = label(hits.length);
  }

  function step(by) {
    if (!hits.length) { return; }
    var old = document.getElementById(hits[current]);
    if (current >= 0 && old) { old.classList.remove("current"); }
    current = (current + by + hits.length) % hits.length;
    var element = document.getElementById(hits[current]);
    element.classList.add("current");
    count.textContent = label(hits.length) + " (" + (current + 1) + " of " + hits.length + ")";
    centre(element); show(hits[current]);
  }

  var timer = null;
  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { search(box.value); }, 120);
  });
  box.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      clearTimeout(timer);
      if (current < 0) { search(box.value); }
      step(event.shiftKey ? -1 : 1);
    } else if (event.key === "Escape") { box.value = ""; search(""); }
  });
  document.getElementById("next").addEventListener("click", function () { step(1); });
  document.getElementById("zoom-in").addEventListener("click", function () {
    var rect = view.getBoundingClientRect(); zoomAt(1.25, rect.width / 2, rect.height / 2);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    var rect = view.getBoundingClientRect(); zoomAt(0.8, rect.width / 2, rect.height / 2);
  });
  document.getElementById("fit").addEventListener("click", fit);

  view.addEventListener("wheel", function (event) {
    event.preventDefault();
    var rect = view.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - rect.left, event.clientY - rect.top);
  }, { passive: false });

  var drag = null;
  view.addEventListener("pointerdown", function (event) {
    drag = { x: event.clientX, y: event.clientY, moved: false };
    view.setPointerCapture(event.pointerId);
  });
  view.addEventListener("pointermove", function (event) {
    if (!drag) { return; }
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) { return; }
    drag.moved = true; view.classList.add("dragging");
    tx += dx; ty += dy; drag.x = event.clientX; drag.y = event.clientY; apply();
  });
  view.addEventListener("pointerup", function (event) {
    var clicked = drag && !drag.moved;
    drag = null; view.classList.remove("dragging");
    if (!clicked) { return; }
    var under = document.elementFromPoint(event.clientX, event.clientY);
    var group = under && under.closest ? under.closest("g.node") : null;
    if (group && index[group.id]) { show(group.id); }
  });

  function fromHash() {
    var match = /^#search=(.*)$/.exec(location.hash);
    if (!match) { return; }
    var text;
    try { text = decodeURIComponent(match[1]); } catch (error) { text = match[1]; }
    box.value = text; search(text);
    if (hits.length) { step(1); }
  }
  window.addEventListener("hashchange", fromHash);
  fit();
  fromHash();
})();
"""
