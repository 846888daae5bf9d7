"""Write the ScatterND / ScatterElements / GatherND fixtures of tests/formats/onnx/fixtures/scatter/: small seeded
torch modules exported by torch.onnx legacy (dynamo=False) at opsets 13 and 17 (`<name>13.onnx`, `<name>17.onnx`:
slice assignment, index_put with constant indices, scatter / scatter_add, advanced indexing), and graphs written
with onnx.helper for what torch does not write (`hand_*.onnx`: reduction add, duplicate indices, batch_dims 1,
indices computed from the inputs; `refused_*.onnx`: what the converter must refuse). onnxruntime, run on the same
files, is the tests' reference. Run from the repository root: `python tests/formats/onnx/make_scatter_fixtures.py`."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures" / "scatter"
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


class Fn(nn.Module):
    """A module whose forward is `fn`."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor):
        return self.fn(*xs)


def _slice_assign(x, v):
    y = x.clone()
    y[:, 1:3] = v
    return y * 2


def _index_put(x, v):
    y = x.clone()
    y[torch.tensor([0, 2])] = v
    return y + 1


def _index_put_accumulate(x, v):
    return x.clone().index_put_((torch.tensor([3, 0, 1]),), v, accumulate=True)  # no duplicates: test_scatter.py


def torch_cases() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    index = torch.tensor([[2, 0, 4], [1, 1, 3]])
    rows, cols = torch.tensor([0, 2, 2, 1]), torch.tensor([3, 0, 1, 3])
    return {
        "slice_assign": (Fn(_slice_assign), (torch.randn(3, 5), torch.randn(3, 2))),
        "index_put": (Fn(_index_put), (torch.randn(4, 3), torch.randn(2, 3))),
        "index_put_accumulate": (Fn(_index_put_accumulate), (torch.randn(4, 3), torch.randn(3, 3))),
        "scatter": (Fn(lambda x, s: torch.scatter(x, 1, torch.tensor([[2, 0, 4], [1, 3, 0]]), s)),
                    (torch.randn(2, 5), torch.randn(2, 3))),
        "scatter_add": (Fn(lambda x, s: torch.scatter_add(x, 1, index, s)), (torch.randn(2, 5), torch.randn(2, 3))),
        "advanced_index": (Fn(lambda x: x[rows, cols] * 3), (torch.randn(3, 4, 2),)),
    }


def _model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    """A checked model; outputs given as names get the shapes ONNX's shape inference gives them."""
    graph = helper.make_graph(nodes, "g", inputs, [], [numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.value_info}
    model.graph.output.extend(inferred[name] for name in outputs)
    onnx.checker.check_model(model, full_check=True)
    return model


def _io(name, shape, dtype=FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _scatter_nd(indices, reduction=None, opset=16, data=(4, 3), updates=(3, 3)):
    attrs = {} if reduction is None else {"reduction": reduction}
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], **attrs)
    return _model([node], [_io("x", list(data)), _io("u", list(updates))], ["y"],
                  [("i", np.array(indices, np.int64))], opset)


def hand_cases() -> dict[str, onnx.ModelProto]:
    cases = {
        "hand_scatternd_add": _scatter_nd([[1], [3], [1]], "add"),
        "hand_scatternd_duplicates": _scatter_nd([[1], [3], [1]]),
        "hand_scatternd_items": _scatter_nd([[0, 2], [3, -1], [1, 0]], opset=13, updates=(3,)),
        "hand_scatternd_mul": _scatter_nd([[1], [3], [1]], "mul"),
        "hand_scatternd_max": _scatter_nd([[2], [0], [2]], "max", opset=18),
        "refused_scatternd_reduction": _scatter_nd([[1], [3], [1]], "sum", opset=18),
        "hand_scatter_elements_min": _model(
            [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="min")],
            [_io("x", [2, 4]), _io("u", [2, 3])], ["y"],
            [("i", np.array([[3, 3, 0], [1, 2, 1]], np.int64))], 18),
        "hand_scatter_elements_add": _model(
            [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction="add")],
            [_io("x", [3, 4]), _io("u", [2, 4])], ["y"],
            [("i", np.array([[2, 0, 2, 1], [2, -3, 1, 1]], np.int64))], 16),
        "hand_gathernd_batch": _model(
            [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
            [_io("x", [2, 3, 4])], ["y"], [("i", np.array([[[2, 1], [0, 3]], [[1, -1], [2, 0]]]))]),
        "hand_gathernd_slices": _model(
            [helper.make_node("GatherND", ["x", "i"], ["y"])],
            [_io("x", [3, 4, 2])], ["y"], [("i", np.array([[[2], [0]], [[1], [-1]]]))], 13),
    }
    # indices computed from the inputs: argmax of `k` (keepdims) picks the rows / items to read or write
    argmax = helper.make_node("ArgMax", ["k"], ["i"], axis=1, keepdims=1)
    cases["hand_gathernd_computed"] = _model(
        [argmax, helper.make_node("GatherND", ["x", "i"], ["y"])],
        [_io("x", [5, 3]), _io("k", [4, 5])], ["y"])
    cases["hand_gathernd_computed_batch"] = _model(
        [argmax, helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
        [_io("x", [4, 5, 2]), _io("k", [4, 5])], ["y"])
    cases["hand_scatter_elements_computed"] = _model(
        [helper.make_node("ArgMax", ["k"], ["i"], axis=1, keepdims=1),
         helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
        [_io("x", [3, 5]), _io("k", [3, 5]), _io("u", [3, 1])], ["y"])
    cases["refused_scatter_elements_computed_add"] = _model(
        [helper.make_node("ArgMax", ["k"], ["i"], axis=1, keepdims=1),
         helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")],
        [_io("x", [3, 5]), _io("k", [3, 5]), _io("u", [3, 1])], ["y"], opset=16)
    cases["refused_scatternd_computed"] = _model(
        [helper.make_node("ArgMax", ["k"], ["i"], axis=1, keepdims=1),
         helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
        [_io("x", [5, 3]), _io("k", [4, 5]), _io("u", [4, 3])], ["y"])
    return cases


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (module, args) in torch_cases().items():
            for opset in (13, 17):
                torch.onnx.export(module, args, str(FIXTURES / f"{name}{opset}.onnx"), opset_version=opset,
                                  dynamo=False)
    for name, model in hand_cases().items():
        onnx.save(model, str(FIXTURES / f"{name}.onnx"))


if __name__ == "__main__":
    main()
