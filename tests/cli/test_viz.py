"""`viz`: every kind of source (folders, archives, graph files, factories, other formats, RelayViz written by
others) to every output, checked against the Khronos parser's reading of the model; bad input exits with 1."""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import textwrap
from pathlib import Path

import nnef
import pydot
import pytest

from cli.helpers import cli
from nnef_torch.cli import demo_model_path

TINY = Path(demo_model_path())
TRAINING = Path(__file__).resolve().parents[1] / "formats" / "nnvm" / "fixtures" / "training"
LIGHTNET = Path(__file__).resolve().parents[1] / "formats" / "lightnet" / "fixtures"
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed "
                                                                   "(apt-get install graphviz)")


def _operation_count(graph) -> int:
    return sum(1 for op in graph.operations if op.name not in ("external", "variable", "constant"))


def _dot_operations(path: Path) -> int:
    """Operation nodes of a DOT file: those with an `op` class (pydot's reading)."""
    (graph,) = pydot.graph_from_dot_file(str(path))
    nodes = [node for sub in [graph, *_subgraphs(graph)] for node in sub.get_nodes()]
    return sum(1 for node in nodes if "operation" in (node.get("class") or ""))


def _subgraphs(graph):
    for sub in graph.get_subgraphs():
        yield sub
        yield from _subgraphs(sub)


@pytest.fixture
def archive(tmp_path) -> Path:
    path = tmp_path / "tiny.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for item in TINY.iterdir():
            tar.add(item, arcname=item.name)
    return path


@pytest.mark.parametrize("source", ["folder", "graph_file", "archive"])
def test_nnef_models_to_dot(tmp_path, capsys, archive, source):
    path = {"folder": TINY, "graph_file": TINY / "graph.nnef", "archive": archive}[source]
    status, out, err = cli(capsys, "viz", path, "-o", tmp_path / "tiny.dot")
    assert status == 0, err
    assert out.strip() == f"wrote {tmp_path / 'tiny.dot'}"
    assert _dot_operations(tmp_path / "tiny.dot") == _operation_count(nnef.load_graph(str(TINY)))


def test_tree_on_standard_output(capsys):
    status, out, err = cli(capsys, "viz", TINY, "-o", "-")
    assert status == 0, err
    graph = nnef.load_graph(str(TINY))
    nnef.infer_shapes(graph)
    for op in graph.operations:
        if op.name in ("external", "variable"):
            continue
        (output,) = op.outputs.values()
        line = next(line for line in out.splitlines() if f" {output} = {op.name}(" in line)
        assert ",".join(str(d) for d in graph.tensors[output].shape) in line


def test_relayviz_with_embedded_weights(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "tiny.json", "--embed-weights")
    assert status == 0, err
    document = json.loads((tmp_path / "tiny.json").read_text())
    consts = {node["value"]["array_shape"].__len__() for node in document["nodes"]
              if node["node_kind"] == "Const" and isinstance(node["value"], dict)}
    assert consts  # the variables became Const nodes with values
    assert not [node for node in document["nodes"] if node["node_kind"] == "Var" and node["name"] != "image"]


def test_embed_weights_refused_for_other_outputs(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "tiny.dot", "--embed-weights")
    assert status == 1 and "applies to .json output only" in err


@pytest.fixture
def factories(tmp_path, monkeypatch):
    name = f"cli_viz_nets_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent('''
        import torch

        def build():
            return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                       torch.nn.Linear(4 * 6 * 6, 2))
    '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name
    sys.modules.pop(name, None)


def test_factory_traced_and_drawn(tmp_path, capsys, factories):
    status, _, err = cli(capsys, "viz", f"{factories}:build", "-o", tmp_path / "net.dot", "--input-shape", "1,3,8,8")
    assert status == 0, err
    assert _dot_operations(tmp_path / "net.dot") == 4  # conv, relu, reshape and linear (biases declared as read)


def test_factory_needs_positional_shapes(tmp_path, capsys, factories):
    status, _, err = cli(capsys, "viz", f"{factories}:build", "-o", tmp_path / "net.dot")
    assert status == 1 and "--input-shape D0,D1" in err


def test_mxnet_symbol_drawn(tmp_path, capsys):
    for name in ("cnn-symbol.json", "cnn-0000.params"):
        shutil.copy(TRAINING / name, tmp_path / name)
    status, out, err = cli(capsys, "viz", tmp_path / "cnn-symbol.json", "-o", "-", "--input-shape", "data=4,3,8,8")
    assert status == 0, err
    nodes = json.loads((TRAINING / "cnn-symbol.json").read_text())["nodes"]
    assert "Convolution" in {node["op"] for node in nodes}
    assert " = conv(" in out and "[4,3,8,8]" in out


def test_lightnet_model_drawn(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", LIGHTNET / "net_il2json.json", "-o", tmp_path / "net.dot", "--inputs", "input")
    assert status == 0, err
    assert _dot_operations(tmp_path / "net.dot") > 0


RELAYVIZ = {"format": "relayviz", "version": [1, 0], "nodes": [
    {"node_kind": "Var", "name": "x", "dtype": "float32", "shape": [2]},
    {"node_kind": "Var", "name": "t", "dtype": "float32", "shape": [2]},
    {"node_kind": "Op", "name": "add", "attrs": {}},
    {"node_kind": "Call", "op": 2, "args": [0, 0]},
    {"node_kind": "Let", "variable": 1, "value": 3, "body": 1},
    {"node_kind": "Const", "value": True, "dtype": "bool"},
    {"node_kind": "If", "cond": 5, "true_branch": 4, "false_branch": 0},
    {"node_kind": "Bind", "expr": 6, "binds": {"x": 0}},
    {"node_kind": "Function", "params": [0], "body": 7, "ret_type": {"dtype": "float32", "shape": [2]}},
]}


def test_relayviz_of_others_with_let_if_bind(tmp_path, capsys):
    (tmp_path / "graph.json").write_text(json.dumps(RELAYVIZ, indent=1))
    status, out, err = cli(capsys, "viz", tmp_path / "graph.json", "-o", tmp_path / "graph.dot")
    assert status == 0, err
    (graph,) = pydot.graph_from_dot_file(str(tmp_path / "graph.dot"))
    classes = " ".join(node.get("class") or "" for node in graph.get_nodes())
    for kind in ("let", "if", "bind", "function"):
        assert kind in classes


@NEEDS_DOT
def test_relayviz_of_others_rendered_as_svg(tmp_path, capsys):
    (tmp_path / "graph.json").write_text(json.dumps(RELAYVIZ))
    status, _, err = cli(capsys, "viz", tmp_path / "graph.json", "-o", tmp_path / "graph.svg")
    assert status == 0, err
    assert "<svg" in (tmp_path / "graph.svg").read_text()


def test_bad_relayviz_exits_with_1_and_a_location(tmp_path, capsys):
    bad = json.loads(json.dumps(RELAYVIZ))
    bad["nodes"][3]["args"] = [0, 42]
    (tmp_path / "graph.json").write_text(json.dumps(bad, indent=1))
    status, _, err = cli(capsys, "viz", tmp_path / "graph.json", "-o", tmp_path / "graph.dot")
    assert status == 1
    assert "nodes[3].args[1]" in err and "42" in err and "graph.json:" in err
    assert not (tmp_path / "graph.dot").exists()


def test_around_draws_a_neighbourhood(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "part.dot", "--around", "relu1", "--radius", "1")
    assert status == 0, err
    assert _dot_operations(tmp_path / "part.dot") == 3  # conv1 -> relu1 -> pool1


def test_unknown_around_name_exits_with_1(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "part.dot", "--around", "relu9")
    assert status == 1 and "no tensor or operation 'relu9'" in err and "relu1" in err


def test_unknown_suffix_exits_with_1(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "graph.bmp")
    assert status == 1 and ".svg" in err


def test_svg_without_dot_writes_the_dot_and_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    status, _, err = cli(capsys, "viz", TINY, "-o", tmp_path / "tiny.svg")
    assert status == 1 and "apt-get install graphviz" in err
    assert not (tmp_path / "tiny.svg").exists()
    assert _dot_operations(tmp_path / "tiny.dot") == _operation_count(nnef.load_graph(str(TINY)))
