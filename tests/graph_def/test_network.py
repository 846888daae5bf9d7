"""A loaded network's functions, variables, parameters, inputs and outputs, against the Khronos parser's reading of
the same model; running it against the Khronos executor."""
from __future__ import annotations

import nnef
import numpy as np
import pytest
import torch

from graph_def.twins import TINY, images, khronos_outputs
from nnef_torch import graph_def
from nnef_torch.graph_def import ACTIVATION, INPUT, PARAMETER


@pytest.fixture(scope="module")
def reference():
    graph = nnef.load_graph(str(TINY))
    nnef.infer_shapes(graph)
    return graph


def test_functions_are_the_operations_in_order(reference):
    network = graph_def.load(TINY).default_graph()
    ops = [op for op in reference.operations if op.name not in ("external", "variable")]
    assert [(f.type, f.inputs, f.outputs) for f in network.functions.values()] == \
        [(op.name, [str(v) for v in op.inputs.values() if isinstance(v, nnef.Identifier)],
          [str(v) for v in op.outputs.values()]) for op in ops]
    assert list(network.functions) == [str(next(iter(op.outputs.values()))) for op in ops]
    conv1 = network.functions["conv1"]
    assert conv1.attributes["padding"] == [(1, 1), (1, 1)] and conv1.location.line == 8


def test_variables_have_kinds_shapes_and_labels(reference):
    network = graph_def.load(TINY).default_graph()
    assert network.inputs == list(reference.inputs) and network.outputs == list(reference.outputs)
    assert set(network.variables) == set(reference.tensors)
    for name, tensor in reference.tensors.items():
        assert list(network.variables[name].shape) == list(tensor.shape), name
    labels = {op.outputs["output"]: op.attribs["label"] for op in reference.operations if op.name == "variable"}
    assert {name: v.label for name, v in network.parameters.items()} == labels
    assert all(v.kind == PARAMETER and v.need_grad for v in network.parameters.values())
    assert network.variables["image"].kind == INPUT and network.variables["relu1"].kind == ACTIVATION


def test_parameters_are_the_dat_values():
    g = graph_def.load(TINY)
    for label, value in g.parameters.items():
        with open(TINY / f"{label}.dat", "rb") as file:
            np.testing.assert_array_equal(np.asarray(value), nnef.read_tensor(file))


def test_calling_the_graph_runs_the_default_network_as_the_khronos_executor_does():
    g = graph_def.load(TINY)
    x = images()
    g.default_graph().module().set_quantization(False)  # the Khronos executor ignores graph.quant
    with torch.no_grad():
        found = g(torch.from_numpy(x))
    (expected,) = khronos_outputs(TINY, x)
    np.testing.assert_allclose(found.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_batch_size_re_declares_the_inputs():
    network = graph_def.load(TINY, batch_size=7).default_graph()
    assert network.variables["image"].shape == (7, 1, 16, 16)
    assert network.variables["probabilities"].shape == (7, 4)
    module = network.module(batch_size=5)
    assert module.nnef_graph.tensors["image"].shape == (5, 1, 16, 16)


def test_wrong_input_count_is_a_type_error():
    with pytest.raises(TypeError, match="takes 1 input"):
        graph_def.load(TINY)()
