"""The HTML viewer page: self-contained (nothing fetched, no Graphviz), a node index and an edge list that cannot end
their scripts early, variables folded into their readers; and, in a headless browser, a `#search=` that marks
exactly the matching node groups, and a 200-operation transformer laid out without overlaps and opened at a
readable scale on its input."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest
import torch

import nnef_torch
from nnef_torch import viz
from nnef_torch.cli import demo_model_path
from nnef_torch.reader import read_graph
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.html import html_page
from nnef_torch.viz.scene import Edge, Node, Scene, TensorType
from viz.corpus import FRAGMENTS_TEXT

BROWSER = next((found for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                if (found := shutil.which(name))), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="needs a headless chromium/chrome to run the page "
                                                           "(apt-get install chromium)")
INDEX = re.compile(r'<script type="application/json" id="node-index">(.*?)</script>', re.DOTALL)
EDGES = re.compile(r'<script type="application/json" id="edge-list">(.*?)</script>', re.DOTALL)
FETCHES = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)|@import|url\(\s*["']?"""
                     r"""\s*(?:https?:)?//""", re.IGNORECASE)
LABEL_PX = 12  # the font size of node text at scale 1 (viewer.css)
WINDOW = (1280, 800)


@pytest.fixture(scope="module")
def demo():
    model = nnef_torch.read_model(demo_model_path(), load_tensors=True)
    values = {variable.label: model.tensors[variable.key].array for variable in model.graph.signature.variables}
    return model.graph, scene_of(model.graph), values


def test_page_embeds_index_and_edges_with_variables_folded(demo):
    graph, scene, values = demo
    page = html_page(scene, values=values)
    assert page.startswith("<!DOCTYPE html>") and '<svg id="graph"' in page
    index = json.loads(INDEX.search(page).group(1))
    variables = {i for i, op in enumerate(graph.operations) if op.name == "variable"}
    assert variables and len(index) == len(graph.operations) - len(variables) + len(graph.outputs)
    for i, op in enumerate(graph.operations):
        if i in variables:
            assert f"n{i}" not in index
            continue
        entry = index[f"n{i}"]
        outputs = [ref.name for ref in op.outputs.values()]
        assert entry["name"] == outputs[0] and [o[0] for o in entry["outputs"]] == outputs
        assert entry["op"] == op.name
    quantized = {entry["outputs"][0][0] for entry in index.values() if entry["outputs"] and entry["outputs"][0][2]}
    assert quantized == set(graph.quantization)
    conv = index[next(f"n{i}" for i, op in enumerate(graph.operations) if op.name == "conv")]
    assert [f["param"] for f in conv["folded"]] == ["filter", "bias"]
    assert conv["lines"][1][0] == "weights" and re.fullmatch(r"W\[\d+(,\d+){3}\] b\[1,\d+\]", conv["lines"][1][1])
    filter_label = conv["folded"][0]["label"]
    expected = values[filter_label]
    stats = dict(conv["folded"][0]["stats"])
    assert float(stats["min"]) == pytest.approx(float(expected.min()), rel=1e-5)
    assert float(stats["std"]) == pytest.approx(float(expected.std()), rel=1e-5)
    assert conv["folded"][0]["dtype"] == "float32"
    edges = json.loads(EDGES.search(page).group(1))
    assert all(source in index and target in index for source, target, _, _ in edges)


def test_page_fetches_nothing(demo):
    _, scene, _ = demo
    page = html_page(scene)
    assert FETCHES.search(page) is None
    assert "<link" not in page and "<iframe" not in page and "<img" not in page
    assert re.search(r"<script[^>]*\bsrc=", page) is None
    assert "sourceMappingURL" not in page and "Chris Pettitt" in page  # dagre inline, with its license


def test_legend_is_drawn_once(demo):
    _, scene, _ = demo
    page = html_page(scene)
    assert page.count('id="legend"') == 1 and page.count(">convolution</li>") == 1


def test_hostile_names_cannot_escape_the_scripts():
    name = '</script><script>alert("x")</script><!--'
    scene = Scene("</title><b>", {0: Node(0, "input", name, "external", outputs=[TensorType(name, "scalar", (1,))]),
                                  1: Node(1, "operation", "r\ud800", "relu", outputs=[TensorType("r", None, None)])}, [])
    page = html_page(scene, title="<i>t</i> & \ud800")
    page.encode("utf-8")  # no lone surrogate left
    script = INDEX.search(page).group(1)
    assert "<" not in script and ">" not in script
    assert json.loads(script)["n0"]["name"] == name
    assert page.count("<script") == 4 and page.count("</script>") == 4
    assert "<title>&lt;i&gt;t&lt;/i&gt; &amp; \ufffd</title>" in page


# --- in a headless browser ------------------------------------------------------------------------------------------

def demo_page(demo, tmp_path):
    _, scene, values = demo
    path = tmp_path / "page.html"
    path.write_text(html_page(scene, values=values), encoding="utf-8")
    return path


def browse(path, fragment, tmp_path, *extra):
    """The DOM after the page's script ran, as a headless browser dumps it."""
    command = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               "--virtual-time-budget=5000", *extra, "--dump-dom", f"{path.as_uri()}#{fragment}"]
    done = subprocess.run(command, capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode("utf-8")


def node_classes(dom):
    return {key: set(classes.split()) for key, classes in re.findall(r'<g id="(n\d+)" class="([^"]*)"', dom)}


def node_boxes(dom):
    return {key: tuple(float(v) for v in box.split(","))
            for key, box in re.findall(r'<g id="(n\d+)" class="[^"]*"[^>]*\bdata-box="([^"]*)"', dom)}


def view_state(dom):
    tag = re.search(r'<svg id="graph"[^>]*>', dom).group(0)
    scale = float(re.search(r'data-scale="([^"]*)"', tag).group(1))
    tx, ty = (float(v) for v in re.search(r'data-translate="([^"]*)"', tag).group(1).split(","))
    width, height = (float(v) for v in re.search(r'data-view="([^"]*)"', tag).group(1).split(","))
    return scale, tx, ty, width, height


def count_text(dom):
    return html.unescape(re.search(r'<span id="count"[^>]*>(.*?)</span>', dom).group(1))


def producer_keys(graph, *names):
    return {f"n{i}" for i, op in enumerate(graph.operations) for ref in op.outputs.values() if ref.name in names}


@needs_browser
def test_browser_search_from_hash_marks_the_node(demo, tmp_path):
    graph, _, _ = demo
    dom = browse(demo_page(demo, tmp_path), "search=relu1", tmp_path)
    classes = node_classes(dom)
    drawn = [op for op in graph.operations if op.name != "variable"]
    assert len(classes) == len(drawn) + len(graph.outputs)
    assert {key for key, names in classes.items() if "hit" in names} == producer_keys(graph, "relu1")
    assert "hit" in classes[next(iter(producer_keys(graph, "relu1")))]
    details = html.unescape(re.search(r'<div id="details">(.*?)</div>', dom, re.DOTALL).group(1))
    assert "relu1" in details


@needs_browser
def test_browser_search_is_case_insensitive_and_counts(demo, tmp_path):
    graph, _, _ = demo
    dom = browse(demo_page(demo, tmp_path), "search=RELU", tmp_path)
    hits = {key for key, names in node_classes(dom).items() if "hit" in names}
    assert hits == {f"n{i}" for i, op in enumerate(graph.operations) if op.name == "relu"}
    assert count_text(dom).startswith("2 matches")
    # the output node and its producer both carry the tensor 'probabilities'
    dom = browse(demo_page(demo, tmp_path), "search=probab", tmp_path)
    assert count_text(dom).startswith("2 matches")
    dom = browse(demo_page(demo, tmp_path), "search=no%20such%20node", tmp_path)
    assert count_text(dom) == "no match"
    assert not any("hit" in names for names in node_classes(dom).values())


@needs_browser
def test_browser_search_finds_a_folded_weight_and_shows_its_statistics(demo, tmp_path):
    graph, _, _ = demo
    dom = browse(demo_page(demo, tmp_path), "search=conv1%2Ffilter", tmp_path)
    assert {key for key, names in node_classes(dom).items() if "hit" in names} == producer_keys(graph, "conv1")
    details = html.unescape(re.sub(r"<[^>]+>", " ", re.search(r'<div id="details">(.*?)</div>', dom,
                                                                re.DOTALL).group(1)))
    assert "filter: conv1_filter" in details and "conv1/filter" in details
    for word in ("min", "max", "mean", "std", "float32"):
        assert word in details


@pytest.fixture(scope="module")
def transformer_page(tmp_path_factory):
    """A 4-layer transformer encoder (about 190 operations) drawn by `viz.draw`."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()
    path = tmp_path_factory.mktemp("transformer") / "transformer.html"
    viz.draw(model, path, example_inputs=(torch.randn(1, 8, 32),))
    return path


def overlapping(boxes):
    items = sorted(boxes.items(), key=lambda item: item[1][0])
    found = []
    for i, (key, (x, y, w, h)) in enumerate(items):
        for other, (x2, y2, _w2, h2) in items[i + 1:]:
            if x2 >= x + w:
                break
            if y < y2 + h2 and y2 < y + h:
                found.append((key, other))
    return found


@needs_browser
def test_browser_lays_out_a_transformer_readably(transformer_page, tmp_path):
    page = transformer_page.read_text(encoding="utf-8")
    index = json.loads(INDEX.search(page).group(1))
    operations = [entry for entry in index.values() if entry["kind"] == "operation"]
    assert len(operations) >= 180
    assert not [entry for entry in index.values() if entry["kind"] in ("variable", "constant")]
    assert sum(len(entry["folded"]) for entry in index.values()) >= 48  # 12 tensors a layer
    dom = browse(transformer_page, "", tmp_path)
    boxes = node_boxes(dom)
    assert set(boxes) == set(index)  # every node was placed
    assert all(w > 0 and h > 0 for _, _, w, h in boxes.values())
    assert overlapping(boxes) == []
    assert dom.count('<ul id="legend">') == 1 and dom.count(">convolution</li>") == 1
    assert "legend" not in "".join(re.findall(r'<g id="[^"]*"', dom))  # none drawn in the graph
    scale, tx, ty, width, height = view_state(dom)
    assert LABEL_PX * scale >= 10
    (start,) = [key for key, entry in index.items() if entry["kind"] == "input"]
    x, y, w, h = boxes[start]
    left, top = tx + x * scale, ty + y * scale
    assert 0 <= left and left + w * scale <= width and 0 <= top and top + h * scale <= height


@pytest.mark.slow  # the layout itself is checked by test_browser_lays_out_a_transformer_readably
@needs_browser
def test_browser_screenshot_of_a_transformer(transformer_page, tmp_path):
    shot = tmp_path / "transformer.png"
    command = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               "--virtual-time-budget=5000", f"--screenshot={shot}", transformer_page.as_uri()]
    done = subprocess.run(command, capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000  # more than a blank page


@needs_browser
def test_browser_lays_out_a_graph_too_large_for_dagre_in_rows(tmp_path):
    count = 2500  # above the viewer's DAGRE_NODES
    nodes = {0: Node(0, "input", "x", "external", outputs=[TensorType("x", "scalar", (1, 8))])}
    edges = []
    for i in range(1, count):
        nodes[i] = Node(i, "operation", f"t{i}", "add" if i % 3 == 0 else "relu",
                        outputs=[TensorType(f"t{i}", "scalar", (1, 8))])
        edges.append(Edge(i - 1, i, "x"))
        if i % 3 == 0:
            edges.append(Edge(i - 2, i, "y"))
    path = tmp_path / "large.html"
    path.write_text(html_page(Scene("large", nodes, edges)), encoding="utf-8")
    dom = browse(path, "", tmp_path)
    assert 'data-layout="rows"' in dom
    boxes = node_boxes(dom)
    assert len(boxes) == count and overlapping(boxes) == []
    assert all(boxes[f"n{edge.source}"][1] < boxes[f"n{edge.target}"][1] for edge in edges)  # drawn downwards
    scale, tx, ty, width, height = view_state(dom)
    x, y, w, h = boxes["n0"]
    assert LABEL_PX * scale >= 10 and 0 <= tx + x * scale <= width and 0 <= ty + y * scale <= height


@needs_browser
def test_browser_boxes_fragment_invocations_around_their_nodes(tmp_path):
    scene = scene_of(read_graph(FRAGMENTS_TEXT))
    path = tmp_path / "fragments.html"
    path.write_text(html_page(scene), encoding="utf-8")
    index = json.loads(INDEX.search(path.read_text(encoding="utf-8")).group(1))
    dom = browse(path, "", tmp_path)
    assert 'data-layout="dagre, fragments boxed"' in dom
    clusters = {key: (float(x), float(y), float(w), float(h)) for key, x, y, w, h in re.findall(
        r'<g id="(c\d+)" class="cluster" transform="translate\(([^,]+),([^)]+)\)"><rect width="([^"]+)" '
        r'height="([^"]+)"', dom)}
    wanted = {cluster for entry in index.values() for cluster, _ in entry["clusters"]}
    assert wanted and set(clusters) == wanted
    boxes = node_boxes(dom)
    for key, entry in index.items():
        x, y, w, h = boxes[key]
        for cluster, _ in entry["clusters"]:
            cx, cy, cw, ch = clusters[cluster]
            assert cx <= x and x + w <= cx + cw and cy <= y and y + h <= cy + ch
