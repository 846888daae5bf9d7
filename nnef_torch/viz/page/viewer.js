/* The nnef_torch viewer page: draws the node index as SVG, laid out by dagre, then pan, zoom, search and details.
   Inlined by nnef_torch/viz/html.py after dagre; the page fetches nothing. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var FONT = 12, LINE = 16, PAD_X = 8, PAD_Y = 5, READABLE = 1;  // READABLE: the scale the page opens at
  var DAGRE_NODES = 2000;  // larger graphs are laid out in rows: dagre takes seconds per thousand nodes
  var index = JSON.parse(document.getElementById("node-index").textContent);
  var edgeList = JSON.parse(document.getElementById("edge-list").textContent);
  var view = document.getElementById("view"), svg = document.getElementById("graph");
  var port = document.getElementById("viewport"), nodeLayer = document.getElementById("nodes");
  var edgeLayer = document.getElementById("edges");
  var box = document.getElementById("search"), count = document.getElementById("count");
  var details = document.getElementById("details");
  var scale = READABLE, tx = 0, ty = 0, hits = [], current = -1, selected = null;
  var boxes = {}, extent = { width: 0, height: 0 }, haystack = {};

  Object.keys(index).forEach(function (key) {
    var entry = index[key];
    var words = [entry.name, entry.op].concat(entry.outputs.map(function (o) { return o[0]; }));
    entry.folded.forEach(function (f) { words.push(f.name, f.label); });
    haystack[key] = words.join("\n").toLowerCase();
  });

  function element(name, attributes, parent) {
    var made = document.createElementNS(NS, name);
    Object.keys(attributes).forEach(function (a) { made.setAttribute(a, attributes[a]); });
    if (parent) { parent.appendChild(made); }
    return made;
  }

  function textWidth(text) {
    var width = text.getComputedTextLength();
    return width > 0 ? width : text.textContent.length * FONT * 0.6;
  }

  // --- drawing ------------------------------------------------------------------------------------------------
  function drawNodes() {
    var groups = {};
    Object.keys(index).forEach(function (key) {
      var entry = index[key];
      var group = element("g", { id: key, "class": entry.classes }, nodeLayer);
      var rect = element("rect", { rx: 5, ry: 5, fill: entry.fill }, group);
      var texts = entry.lines.map(function (line, i) {
        var text = element("text", { "class": line[0], x: PAD_X, y: PAD_Y + LINE * i + FONT }, group);
        text.textContent = line[1];
        return text;
      });
      groups[key] = { group: group, rect: rect, texts: texts };
    });
    Object.keys(groups).forEach(function (key) {  // all measured before any is changed: one reflow
      var drawn = groups[key], width = 40;
      drawn.texts.forEach(function (text) { width = Math.max(width, textWidth(text) + 2 * PAD_X); });
      drawn.width = Math.ceil(width);
      drawn.height = PAD_Y * 2 + LINE * Math.max(1, drawn.texts.length);
    });
    Object.keys(groups).forEach(function (key) {
      var drawn = groups[key];
      drawn.rect.setAttribute("width", drawn.width);
      drawn.rect.setAttribute("height", drawn.height);
      drawn.texts.forEach(function (text) {
        if (text.getAttribute("class") === "title") { text.setAttribute("x", drawn.width / 2); }
      });
    });
    return groups;
  }

  function edgeLabels() {
    return edgeList.map(function (edge) {
      if (!edge[2] && !edge[3]) { return null; }
      var text = element("text", { "class": "edge-label" + (edge[3] ? " quantized" : "") }, edgeLayer);
      text.textContent = edge[3] ? (edge[2] ? edge[2] + " " : "") + edge[3] : edge[2];
      return text;
    });
  }

  function layout(groups, labels, compound) {
    var graph = new dagre.graphlib.Graph({ multigraph: true, compound: compound });
    graph.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 36, edgesep: 12, marginx: 24, marginy: 24 });
    var captions = {};
    Object.keys(groups).forEach(function (key) {
      graph.setNode(key, { width: groups[key].width, height: groups[key].height });
      if (!compound) { return; }
      var parent = null;
      index[key].clusters.forEach(function (cluster) {  // outermost first
        if (!captions[cluster[0]]) {
          captions[cluster[0]] = cluster[1];
          graph.setNode(cluster[0], { paddingTop: LINE + 6 });
          if (parent) { graph.setParent(cluster[0], parent); }
        }
        parent = cluster[0];
      });
      if (parent) { graph.setParent(key, parent); }
    });
    edgeList.forEach(function (edge, i) {
      var label = labels[i], value = { minlen: 1 };
      if (label) { value.width = textWidth(label) + 4; value.height = FONT; value.labelpos = "c"; }
      graph.setEdge(edge[0], edge[1], value, "e" + i);
    });
    dagre.layout(graph);  // throws before anything is drawn
    drawClusters(graph, captions);
    Object.keys(groups).forEach(function (key) { put(key, groups[key], graph.node(key)); });
    edgeList.forEach(function (edge, i) {
      var placed = graph.edge(edge[0], edge[1], "e" + i);
      drawEdge(i, placed.points, labels[i], placed);
    });
    var size = graph.graph();
    extent = { width: size.width || 0, height: size.height || 0 };
  }

  function rows(groups, labels) {
    // the fallback for graphs too large or too deep for dagre: each node on the row of its longest path from
    // an input, rows in node order, edges drawn straight
    var keys = Object.keys(groups), rank = {}, into = {}, out = {}, waiting = {}, queue = [], row = [];
    keys.forEach(function (key) { rank[key] = 0; into[key] = 0; out[key] = []; });
    edgeList.forEach(function (edge) {
      if (edge[0] in out && edge[1] in into) { out[edge[0]].push(edge[1]); into[edge[1]] += 1; }
    });
    keys.forEach(function (key) { waiting[key] = into[key]; if (!into[key]) { queue.push(key); } });
    for (var q = 0; q < queue.length; q++) {  // Kahn's order: no recursion, whatever the depth
      out[queue[q]].forEach(function (next) {
        rank[next] = Math.max(rank[next], rank[queue[q]] + 1);
        if (--waiting[next] === 0) { queue.push(next); }
      });
    }
    keys.forEach(function (key) { (row[rank[key]] = row[rank[key]] || []).push(key); });
    var y = 24, widest = 0, centres = {};
    row.forEach(function (members) {
      if (!members) { return; }
      var width = -28, height = 0;
      members.forEach(function (key) {
        width += groups[key].width + 28; height = Math.max(height, groups[key].height);
      });
      widest = Math.max(widest, width);
      members.width = width; members.height = height; members.y = y;
      y += height + 48;
    });
    row.forEach(function (members) {
      if (!members) { return; }
      var x = 24 + (widest - members.width) / 2;
      members.forEach(function (key) {
        var drawn = groups[key];
        centres[key] = { x: x + drawn.width / 2, y: members.y + members.height / 2 };
        put(key, drawn, centres[key]);
        x += drawn.width + 28;
      });
    });
    edgeList.forEach(function (edge, i) {
      var a = boxes[edge[0]], b = boxes[edge[1]];
      if (!a || !b) { return; }
      var start = { x: a.x + a.width / 2, y: a.y + a.height }, end = { x: b.x + b.width / 2, y: b.y };
      drawEdge(i, [start, end], labels[i], { x: (start.x + end.x) / 2, y: (start.y + end.y) / 2 });
    });
    extent = { width: widest + 48, height: y - 24 };
  }

  function put(key, drawn, centre) {
    var x = centre.x - drawn.width / 2, y = centre.y - drawn.height / 2;
    drawn.group.setAttribute("transform", "translate(" + x + "," + y + ")");
    drawn.group.setAttribute("data-box", [x, y, drawn.width, drawn.height].join(","));
    boxes[key] = { x: x, y: y, width: drawn.width, height: drawn.height };
  }

  function drawEdge(i, points, label, labelAt) {
    var edge = edgeList[i], d = "M" + points[0].x + "," + points[0].y;
    for (var p = 1; p < points.length - 1; p++) {
      var last = p === points.length - 2;
      var to = last ? points[p + 1]
        : { x: (points[p].x + points[p + 1].x) / 2, y: (points[p].y + points[p + 1].y) / 2 };
      d += " Q" + points[p].x + "," + points[p].y + " " + to.x + "," + to.y;
    }
    if (points.length === 2) { d += " L" + points[1].x + "," + points[1].y; }
    element("path", { id: "e" + i, d: d, "class": "edge" + (edge[3] ? " quantized" : ""),
                      "marker-end": "url(#arrow)", "data-source": edge[0], "data-target": edge[1] }, edgeLayer);
    if (label) { label.setAttribute("x", labelAt.x); label.setAttribute("y", labelAt.y + FONT / 3); }
  }

  function drawClusters(graph, captions) {
    var layer = document.getElementById("clusters");
    Object.keys(captions).forEach(function (id) {
      var placed = graph.node(id);
      if (!placed || !placed.width) { return; }
      var x = placed.x - placed.width / 2, y = placed.y - placed.height / 2;
      var group = element("g", { id: id, "class": "cluster", transform: "translate(" + x + "," + y + ")" }, layer);
      element("rect", { width: placed.width, height: placed.height, rx: 6, ry: 6 }, group);
      var caption = element("text", { x: 6, y: FONT + 2 }, group);
      caption.textContent = captions[id];
    });
  }

  function place(groups, labels) {
    // dagre where it can (fragment boxes too), else rows; the layout used is mirrored on the svg as data-layout
    var compound = Object.keys(index).some(function (key) { return index[key].clusters.length > 0; });
    var tries = Object.keys(groups).length > DAGRE_NODES ? [] : compound ? [true, false] : [false];
    for (var i = 0; i < tries.length; i++) {
      try {
        layout(groups, labels, tries[i]);
        svg.setAttribute("data-layout", tries[i] ? "dagre, fragments boxed" : "dagre");
        return;
      } catch (error) {
        if (window.console) { console.warn("dagre could not lay the graph out:", error); }
      }
    }
    rows(groups, labels);
    svg.setAttribute("data-layout", "rows");
  }

  // --- the view -----------------------------------------------------------------------------------------------
  function apply() {
    port.setAttribute("transform", "translate(" + tx + "," + ty + ") scale(" + scale + ")");
    svg.setAttribute("data-scale", scale);
    svg.setAttribute("data-translate", tx + "," + ty);
    svg.setAttribute("data-view", view.clientWidth + "," + view.clientHeight);
  }

  function zoomAt(factor, x, y) {
    var next = Math.min(8, Math.max(0.02, scale * factor));
    factor = next / scale;
    tx = x - (x - tx) * factor; ty = y - (y - ty) * factor; scale = next; apply();
  }

  function fit() {
    var width = view.clientWidth, height = view.clientHeight;
    if (!extent.width || !extent.height) { return; }
    scale = Math.min(2, 0.96 * Math.min(width / extent.width, height / extent.height));
    tx = (width - extent.width * scale) / 2; ty = (height - extent.height * scale) / 2; apply();
  }

  function opening() {
    // at a readable scale, the graph's inputs at the top of the view (the whole graph, centred, where it fits)
    var width = view.clientWidth, height = view.clientHeight;
    scale = READABLE;
    if (extent.width * scale <= width && extent.height * scale <= height) {
      tx = (width - extent.width * scale) / 2; ty = (height - extent.height * scale) / 2; apply(); return;
    }
    var starts = Object.keys(index).filter(function (key) { return index[key].kind === "input" && boxes[key]; });
    if (!starts.length) {
      starts = Object.keys(boxes).sort(function (a, b) { return boxes[a].y - boxes[b].y; }).slice(0, 1);
    }
    if (!starts.length) { apply(); return; }
    var left = Infinity, right = -Infinity, top = Infinity;
    starts.forEach(function (key) {
      var b = boxes[key];
      left = Math.min(left, b.x); right = Math.max(right, b.x + b.width); top = Math.min(top, b.y);
    });
    if ((right - left) * scale > width) {  // inputs wider than the view: the first one
      left = boxes[starts[0]].x; right = left + boxes[starts[0]].width;
    }
    tx = width / 2 - (left + right) / 2 * scale;
    ty = Math.min(24, height / 2) - top * scale;
    apply();
  }

  function centre(key) {
    var b = boxes[key];
    if (!b) { return; }
    if (scale < 0.6) { scale = READABLE; }
    tx = view.clientWidth / 2 - (b.x + b.width / 2) * scale;
    ty = view.clientHeight / 2 - (b.y + b.height / 2) * scale;
    apply();
  }

  // --- details ------------------------------------------------------------------------------------------------
  function row(table, name, value) {
    var tr = table.insertRow(), a = tr.insertCell(), b = tr.insertCell();
    a.textContent = name; b.textContent = value;
  }

  function heading(text, level) {
    var h = document.createElement(level);
    h.textContent = text; details.appendChild(h);
    var table = document.createElement("table");
    details.appendChild(table);
    return table;
  }

  function show(key) {
    var entry = index[key];
    if (!entry) { return; }
    if (selected) { selected.classList.remove("selected"); }
    selected = document.getElementById(key);
    if (selected) { selected.classList.add("selected"); }
    details.textContent = "";
    var table = heading(entry.name, "h2");
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
    entry.folded.forEach(function (f) {
      var inner = heading(f.param + ": " + f.name, "h3");
      inner.classList.add("folded");
      row(inner, "kind", f.kind);
      if (f.label) { row(inner, "label", f.label); }
      row(inner, "type", f.type);
      if (f.via.length) { row(inner, "via", f.via.join(", ")); }
      if (f.dtype) { row(inner, "stored as", f.dtype); }
      f.stats.forEach(function (s) { row(inner, s[0], s[1]); });
    });
  }

  // --- search -------------------------------------------------------------------------------------------------
  function label(n) { return n === 1 ? "1 match" : n ? n + " matches" : "no match"; }

  function search(text) {
    hits.forEach(function (key) {
      var found = document.getElementById(key);
      if (found) { found.classList.remove("hit", "current"); }
    });
    hits = []; current = -1;
    var needle = text.trim().toLowerCase();
    svg.classList.toggle("searching", needle.length > 0);
    if (!needle) { count.textContent = ""; return; }
    Object.keys(haystack).forEach(function (key) {
      if (haystack[key].indexOf(needle) >= 0) {
        var found = document.getElementById(key);
        if (found) { found.classList.add("hit"); hits.push(key); }
      }
    });
    count.textContent = label(hits.length);
  }

  function step(by) {
    if (!hits.length) { return; }
    var old = document.getElementById(hits[current]);
    if (current >= 0 && old) { old.classList.remove("current"); }
    current = (current + by + hits.length) % hits.length;
    document.getElementById(hits[current]).classList.add("current");
    count.textContent = label(hits.length) + " (" + (current + 1) + " of " + hits.length + ")";
    centre(hits[current]); show(hits[current]);
  }

  function fromHash() {
    var match = /^#search=(.*)$/.exec(location.hash);
    if (!match) { return; }
    var text;
    try { text = decodeURIComponent(match[1]); } catch (error) { text = match[1]; }
    box.value = text; search(text);
    if (hits.length) { step(1); }
  }

  // --- events -------------------------------------------------------------------------------------------------
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
    zoomAt(1.25, view.clientWidth / 2, view.clientHeight / 2);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    zoomAt(0.8, view.clientWidth / 2, view.clientHeight / 2);
  });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("start").addEventListener("click", opening);

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
  window.addEventListener("hashchange", fromHash);

  var groups = drawNodes();
  place(groups, edgeLabels());
  opening();
  fromHash();
})();
