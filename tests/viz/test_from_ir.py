"""Scenes of a corpus of models: node and edge counts, arguments, fragment scopes and graph.quant entries, checked
against the Khronos parser's reading of the same NNEF text."""
from __future__ import annotations

from pathlib import Path

import nnef
import pytest
import torch

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.reader import read_graph
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.scene import CONSTANT, FRAGMENT, INPUT, OPERATION, OUTPUT, VARIABLE
from viz.corpus import FRAGMENTS_TEXT, torch_models


def _exported(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[str, str | None]:
    model = nnef_torch.export(module, inputs)
    return model.text, model.quant_text


def _corpus() -> dict[str, tuple[str, str | None]]:
    demo = Path(demo_model_path())
    models = {name: _exported(*model) for name, model in torch_models().items()}
    return {"quantized_cnn": ((demo / "graph.nnef").read_text(), (demo / "graph.quant").read_text()), **models,
            "fragments": (FRAGMENTS_TEXT, None)}


@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple[str, str | None]]:
    return _corpus()


NAMES = ["quantized_cnn", "cnn", "transformer", "lstm", "fragments"]


def _defined(text: str) -> list[str]:
    return [line.split()[1].split("(")[0] for line in text.splitlines() if line.startswith("fragment ")]


def _identifiers(value) -> list[str]:
    if isinstance(value, nnef.Identifier):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in _identifiers(item)]
    return []


def _khronos(text: str, *, expanded: bool):
    return nnef.parse_string(text, lowered=_defined(text) if expanded else [])


@pytest.mark.parametrize("name", NAMES)
def test_nodes_and_edges_match_the_khronos_reading(corpus, name):
    text, quant = corpus[name]
    scene = scene_of(read_graph(text, quant_text=quant))
    reference = _khronos(text, expanded=True)
    kinds = {"external": INPUT, "variable": VARIABLE, "constant": CONSTANT}
    expected_kinds = [kinds.get(op.name, OPERATION) for op in reference.operations] + [OUTPUT] * len(reference.outputs)
    assert [node.kind for node in scene.nodes.values()] == expected_kinds
    ops = [node.op for node in scene.nodes.values() if node.kind == OPERATION]
    assert ops == [op.name for op in reference.operations if op.name not in kinds]
    arguments = sum(len(_identifiers(op.inputs[key])) for op in reference.operations for key in op.inputs)
    assert len(scene.edges) == arguments + len(reference.outputs)


@pytest.mark.parametrize("name", NAMES)
def test_edges_are_labelled_with_the_argument_they_feed_in_order(corpus, name):
    text, quant = corpus[name]
    scene = scene_of(read_graph(text, quant_text=quant))
    reference = [op for op in _khronos(text, expanded=True).operations]
    for node, op in zip(list(scene.nodes.values()), reference):
        labels = [edge.label for edge in scene.edges if edge.target == node.id]
        expected = []
        for key, value in op.inputs.items():
            names = _identifiers(value)
            if isinstance(value, list):
                expected += [f"{key}[{i}]" for i, item in enumerate(value) if _identifiers(item)]
            elif names:
                expected.append(key)
        assert labels == expected, (node.op, op.name)


@pytest.mark.parametrize("name", NAMES)
def test_output_shapes_are_the_khronos_inferred_shapes(corpus, name):
    text, quant = corpus[name]
    scene = scene_of(read_graph(text, quant_text=quant))
    reference = _khronos(text, expanded=True)
    nnef.infer_shapes(reference)
    for node, op in zip(list(scene.nodes.values()), reference.operations):
        outputs = [n for value in op.outputs.values() for n in _identifiers(value)]
        assert [tuple(t.shape) for t in node.outputs] == [tuple(reference.tensors[n].shape) for n in outputs]


def test_graph_quant_entries_are_on_their_tensors():
    reference = nnef.load_graph(str(demo_model_path()))
    quantized = {name for name, tensor in reference.tensors.items() if tensor.quantization}
    scene = nnef_torch.viz.scene(demo_model_path())
    marked = {t.name for node in scene.nodes.values() for t in node.outputs if t.quant}
    assert marked == quantized and len(quantized) == 3
    for edge in scene.edges:
        assert (edge.quant is not None) == (edge.tensor in quantized)
        if edge.quant:
            spec = reference.tensors[edge.tensor].quantization
            assert edge.quant.startswith(spec["op-name"] + "(") and f"max = {float(spec['max'])}" in edge.quant


def test_fragment_invocations_are_scoped_outermost_first():
    scene = scene_of(read_graph(FRAGMENTS_TEXT))
    scopes = {node.name: node.scope for node in scene.nodes.values() if node.kind == OPERATION}
    assert scopes["b"] == () and scopes["y"] == ()
    pair = scopes["a"][0]
    assert pair.startswith("pair#") and scopes["a"][1].startswith("unit#")
    inner = {scope[1] for scope in scopes.values() if len(scope) == 2}
    assert len(inner) == 2  # the two units inside pair are two invocations
    assert scene.scopes[pair] == "pair: a"


@pytest.mark.parametrize("name", ["fragments", "transformer"])
def test_collapsed_fragments_are_the_khronos_unlowered_invocations(corpus, name):
    text, quant = corpus[name]
    scene = scene_of(read_graph(text, quant_text=quant), collapse=True)
    reference = _khronos(text, expanded=False)
    kinds = {"external": INPUT, "variable": VARIABLE, "constant": CONSTANT}
    defined = set(_defined(text))
    expected = [FRAGMENT if op.name in defined else kinds.get(op.name, OPERATION) for op in reference.operations]
    assert [node.kind for node in scene.nodes.values() if node.kind != OUTPUT] == expected
    assert [node.op for node in scene.nodes.values() if node.kind == FRAGMENT] == \
        [op.name for op in reference.operations if op.name in defined]
    arguments = {}
    for node, op in zip(scene.nodes.values(), reference.operations):
        arguments[node.id] = sorted(set(_identifiers(list(op.inputs.values()))))
    for node_id, names in arguments.items():
        feeding = sorted({edge.tensor for edge in scene.edges if edge.target == node_id})
        assert len(feeding) == len(names), (scene.nodes[node_id].op, feeding, names)
