"""`viz.draw` and friends on every kind of source the Python API takes: torch modules (traced), imported modules
(their current weights), exported models, paths; outputs by suffix; errors; the README's picture."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nnef
import numpy as np
import pydot
import pytest
import torch

import nnef_torch
from nnef_torch import viz
from nnef_torch.cli import demo_model_path

TINY = Path(demo_model_path())
README = Path(__file__).resolve().parents[2] / "README.md"


def _operations(path: Path) -> list[str]:
    """The operation names of a DOT file's operation nodes (pydot's reading), in file order."""
    (graph,) = pydot.graph_from_dot_file(str(path))
    nodes = []
    pending = [graph]
    while pending:
        current = pending.pop(0)
        nodes += current.get_nodes()
        pending += current.get_subgraphs()
    return [node for node in nodes if "operation" in (node.get("class") or "")]


def _khronos_operations(text: str) -> int:
    graph = nnef.parse_string(text, lowered=[line.split()[1].split("(")[0] for line in text.splitlines()
                                             if line.startswith("fragment ")])
    return sum(1 for op in graph.operations if op.name not in ("external", "variable", "constant"))


def test_torch_module_is_traced(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.LayerNorm(5)).eval()
    x = torch.randn(2, 6)
    viz.draw(module, tmp_path / "net.dot", example_inputs=(x,))
    expected = _khronos_operations(nnef_torch.export(module, (x,)).text)
    assert len(_operations(tmp_path / "net.dot")) == expected


def test_torch_module_needs_example_inputs(tmp_path):
    with pytest.raises(nnef_torch.NNEFOptionError, match="example_inputs"):
        viz.draw(torch.nn.ReLU(), tmp_path / "net.dot")


def test_imported_module_is_drawn_with_its_current_weights(tmp_path):
    module = nnef_torch.load(TINY)
    with torch.no_grad():
        module.conv1.filter.mul_(3.0)
    viz.draw(module, tmp_path / "tuned.json", embed_weights=True)
    document = json.loads((tmp_path / "tuned.json").read_text())
    filters = [node for node in document["nodes"] if node["node_kind"] == "Const"
               and isinstance(node["value"], dict) and node["value"]["array_shape"] == [8, 1, 3, 3]]
    (node,) = filters
    original = nnef_torch.read_model(TINY).tensors["conv1/filter"].array
    np.testing.assert_allclose(np.array(node["value"]["array_value"]).reshape(8, 1, 3, 3), 3.0 * original,
                               rtol=1e-6)


def _tree_operations(path: Path) -> list[str]:
    found = (re.match(r"^[│├└─ ]+\w+ = (\w+)\(", line) for line in path.read_text().splitlines())
    return [match.group(1) for match in found if match]


def test_exported_model_and_paths_are_drawn_in_the_khronos_order(tmp_path):
    model = nnef_torch.export(nnef_torch.load(TINY), (torch.zeros(1, 1, 16, 16),))
    viz.draw(model, tmp_path / "exported.txt")
    viz.draw(TINY, tmp_path / "folder.txt")
    for drawn, graph in [("exported.txt", nnef.parse_string(model.text)), ("folder.txt", nnef.load_graph(str(TINY)))]:
        expected = [op.name for op in graph.operations if op.name not in ("external", "variable")]
        assert _tree_operations(tmp_path / drawn) == expected


def test_tree_and_scene_take_reader_options(tmp_path):
    text = viz.tree(TINY, input_shapes={"image": [5, 1, 16, 16]})
    assert "image: scalar[5,1,16,16]" in text and "-> scalar[5,4]" in text


def test_collapse_and_highlight(tmp_path):
    source = """version 1.0;
extension KHR_enable_fragment_definitions;
fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    a = relu(x);
    y = relu(a);
}
graph G( x ) -> ( y )
{
    x = external(shape = [1]);
    y = twice(x);
}
"""
    (tmp_path / "g.nnef").write_text(source)
    viz.draw(tmp_path / "g.nnef", tmp_path / "collapsed.dot", collapse_fragments=True,
             highlight=lambda node: node.op == "twice")
    (graph,) = pydot.graph_from_dot_file(str(tmp_path / "collapsed.dot"))
    fragments = [node for node in graph.get_nodes() if "fragment" in (node.get("class") or "")]
    assert len(fragments) == 1 and fragments[0].get("penwidth") is not None
    viz.draw(tmp_path / "g.nnef", tmp_path / "expanded.dot")
    assert len(_operations(tmp_path / "expanded.dot")) == 2


def test_unknown_suffix_is_refused(tmp_path):
    with pytest.raises(nnef_torch.NNEFOptionError, match=r"\.svg"):
        viz.draw(TINY, tmp_path / "graph.bmp")


def test_without_dot_the_dot_is_written_and_the_error_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(viz.RenderError, match="apt-get install graphviz"):
        viz.draw(TINY, tmp_path / "tiny.svg")
    assert not (tmp_path / "tiny.svg").exists() and (tmp_path / "tiny.dot").exists()


def test_html_needs_no_graphviz(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    viz.draw(TINY, tmp_path / "tiny.html")
    page = (tmp_path / "tiny.html").read_text(encoding="utf-8")
    assert "dagre" in page and 'id="node-index"' in page and not (tmp_path / "tiny.dot").exists()


def test_loading_relayviz_says_to_draw_it(tmp_path):
    viz.draw(TINY, tmp_path / "tiny.json")
    with pytest.raises(nnef_torch.ForeignFormatError, match="nnef-torch viz"):
        nnef_torch.load(tmp_path / "tiny.json")


def test_relayviz_source_round_trips_through_draw(tmp_path):
    viz.draw(TINY, tmp_path / "tiny.json")
    viz.draw(tmp_path / "tiny.json", tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads((tmp_path / "tiny.json").read_text())


def test_readme_picture_is_the_demo_model_drawn_by_the_tool():
    match = re.search(r"!\[[^\]]*\]\((docs/[^)]+\.svg)\)", README.read_text())
    assert match, "the README shows a picture of the demo model"
    svg = (README.parent / match.group(1)).read_text()
    graph = nnef.load_graph(str(TINY))
    operations = [op for op in graph.operations if op.name not in ("external", "variable")]
    drawn = re.findall(r'<g id="(n\d+)" class="node operation', svg)
    assert len(drawn) == len(operations)
    for op in operations:
        (output,) = op.outputs.values()
        assert f"{output} = {op.name}" in svg


def test_module_loaded_with_a_batch_size_is_drawn_at_that_batch(tmp_path):
    module = nnef_torch.load(TINY, batch_size=8)
    produced = module(torch.randn(8, 1, 16, 16)).shape  # what the module computes, by torch
    viz.draw(module, tmp_path / "batch.json")
    document = json.loads((tmp_path / "batch.json").read_text())
    (image,) = [node for node in document["nodes"] if node.get("name") == "image"]
    assert image["shape"] == [8, 1, 16, 16]
    function = document["nodes"][-1]
    assert function["node_kind"] == "Function" and function["ret_type"]["shape"] == list(produced)
