"""The HTML viewer page: self-contained (nothing fetched), the SVG inline, a node index that cannot end its script
early, and, in a headless browser, a `#search=` that marks exactly the matching node groups."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.viz.dot import dot_text
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.html import html_page
from nnef_torch.viz.render import render
from nnef_torch.viz.scene import Node, Scene, TensorType

DOT = shutil.which("dot")
BROWSER = next((found for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                if (found := shutil.which(name))), None)
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
needs_browser = pytest.mark.skipif(DOT is None or BROWSER is None,
                                   reason="needs Graphviz's dot and a headless chromium/chrome to run the page")
INDEX = re.compile(r'<script type="application/json" id="node-index">(.*?)</script>', re.DOTALL)
FETCHES = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)|@import|url\(\s*["']?"""
                     r"""\s*(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def demo():
    graph = nnef_torch.read_model(demo_model_path()).graph
    return graph, scene_of(graph)


def fake_svg(scene):
    groups = "".join(f'<g id="{node.key}" class="node"><title>{node.key}</title></g>' for node in scene.nodes.values())
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n'
            ' "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns="http://www.w3.org/2000/svg">'
            f"{groups}</svg>\n")


def test_page_embeds_svg_and_index(demo):
    graph, scene = demo
    page = html_page(scene, fake_svg(scene))
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "<?xml" not in page and "svg11.dtd" not in page  # the SVG's own prologue is dropped
    index = json.loads(INDEX.search(page).group(1))
    assert len(index) == len(graph.operations) + len(graph.outputs)
    for i, op in enumerate(graph.operations):
        entry = index[f"n{i}"]
        outputs = [ref.name for ref in op.outputs.values()]
        assert entry["name"] == outputs[0] and [o[0] for o in entry["outputs"]] == outputs
        assert entry["op"] == op.name
    quantized = {entry["outputs"][0][0] for entry in index.values() if entry["outputs"] and entry["outputs"][0][2]}
    assert quantized == set(graph.quantization)


def test_page_fetches_nothing(demo):
    _, scene = demo
    page = html_page(scene, fake_svg(scene))
    assert FETCHES.search(page) is None
    assert "<link" not in page and "<iframe" not in page and "<img" not in page
    assert re.search(r"<script[^>]*\bsrc=", page) is None


def test_hostile_names_cannot_escape_the_index_script():
    name = '</script><script>alert("x")</script><!--'
    scene = Scene("</title><b>", {0: Node(0, "input", name, "external", outputs=[TensorType(name, "scalar", (1,))]),
                                  1: Node(1, "operation", "r\ud800", "relu", outputs=[TensorType("r", None, None)])}, [])
    page = html_page(scene, fake_svg(scene), title="<i>t</i> & \ud800")
    page.encode("utf-8")  # no lone surrogate left
    script = INDEX.search(page).group(1)
    assert "<" not in script and ">" not in script
    assert json.loads(script)["n0"]["name"] == name
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<title>&lt;i&gt;t&lt;/i&gt; &amp; \ufffd</title>" in page


def demo_page(demo, tmp_path):
    _, scene = demo
    path = tmp_path / "page.html"
    path.write_text(html_page(scene, render(dot_text(scene), None, "svg")), encoding="utf-8")
    return path


def browse(path, fragment, tmp_path):
    """The DOM after the page's script ran, as a headless browser dumps it."""
    command = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000", "--dump-dom",
               f"{path.as_uri()}#{fragment}"]
    done = subprocess.run(command, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode("utf-8")


def node_classes(dom):
    return {key: set(classes.split()) for key, classes in re.findall(r'<g id="(n\d+)" class="([^"]*)"', dom)}


def count_text(dom):
    return html.unescape(re.search(r'<span id="count"[^>]*>(.*?)</span>', dom).group(1))


def producer_keys(graph, *names):
    return {f"n{i}" for i, op in enumerate(graph.operations) for ref in op.outputs.values() if ref.name in names}


@needs_browser
def test_browser_search_from_hash_marks_the_node(demo, tmp_path):
    graph, _ = demo
    classes = node_classes(browse(demo_page(demo, tmp_path), "search=relu1", tmp_path))
    assert len(classes) == len(graph.operations) + len(graph.outputs)
    assert {key for key, names in classes.items() if "hit" in names} == producer_keys(graph, "relu1")


@needs_browser
def test_browser_search_is_case_insensitive_and_counts(demo, tmp_path):
    graph, _ = demo
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
