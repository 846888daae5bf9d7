"""ONNX Einsum read from one-node models made with onnx.helper: outputs compared with onnxruntime running the same
file, input gradients with torch.einsum on the same inputs, one model saved as NNEF and run by the Khronos
executor; equations outside what the rule writes are refused naming the node."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime_oracle import assert_saved_nnef_runs  # noqa: E402  (this folder)

# equation, operand shapes
CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: "ik"
    ("ba,ca", [(3, 4), (5, 4)]),  # implicit output, sorted: "bc"
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    ("...ij,...jk->...ik", [(2, 1, 4, 5), (1, 3, 5, 6)]),  # ellipsis axes of extent 1 broadcast
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("bxj,byj->bxy", [(2, 1, 4), (2, 3, 4)]),  # a letter of extent 1 against the other operand's 3
    ("bij,Bjk->bBik", [(1, 3, 4), (2, 4, 5)]),
    ("abc,cd->dba", [(2, 3, 4), (4, 5)]),  # the output in an order of its own
    ("abc,bd->ad", [(2, 3, 4), (3, 5)]),  # c only in the first operand, summed before the product
    ("ij,ij->ij", [(3, 4), (1, 4)]),  # element-wise, broadcasting
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
]


def model_of(equation: str, shapes: list[tuple[int, ...]], opset: int = 13):
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def saved(tmp_path, model):
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path)
    return path


def seeded(shapes):
    state = np.random.RandomState(0)
    return [state.randn(*s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("equation, shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_onnxruntime_and_torch_gradients(tmp_path, equation, shapes):
    path = saved(tmp_path, model_of(equation, shapes))
    xs = seeded(shapes)
    (expected,) = ort.InferenceSession(str(path)).run(None, {f"x{i}": x for i, x in enumerate(xs)})
    module = nnef_torch.load(path)
    mine = [torch.from_numpy(x).requires_grad_() for x in xs]
    got = module(*mine)
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-4, atol=1e-5)
    theirs = [torch.from_numpy(x).requires_grad_() for x in xs]
    reference = torch.einsum(equation, *theirs)
    weight = torch.randn(reference.shape, generator=torch.Generator().manual_seed(1))
    (got * weight).sum().backward()
    (reference * weight).sum().backward()
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_contraction_is_a_matmul_without_the_outer_product(tmp_path):
    path = saved(tmp_path, model_of("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]))
    nnef_torch.save(nnef_torch.load(path), tmp_path / "out", tuple(torch.from_numpy(x) for x in
                                                                  seeded([(2, 3, 4, 8), (2, 3, 5, 8)])))
    text = (tmp_path / "out" / "graph.nnef").read_text()
    assert "matmul(" in text and "mul(" not in text.replace("matmul(", "")


@pytest.mark.parametrize("equation, shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("...ij,...jk->...ik", [(2, 1, 4, 5), (1, 3, 5, 6)]),  # batch axes tiled: the executor does not broadcast them
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(4,), (4,)]),
    ("bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 6)]),
], ids=lambda value: value if isinstance(value, str) else "")
def test_saved_nnef_runs_in_the_khronos_executor(tmp_path, equation, shapes):
    pytest.importorskip("nnef")
    path = saved(tmp_path, model_of(equation, shapes))
    assert_saved_nnef_runs(path, tmp_path / "out")


def test_known_operands_fold_with_numpy(tmp_path):
    weight = np.random.RandomState(2).randn(4, 5).astype(np.float32)
    inputs = [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [3, 4])]
    nodes = [helper.make_node("Einsum", ["w", "w"], ["ww"], equation="ij,kj->ik"),
             helper.make_node("Einsum", ["x0", "ww"], ["y"], equation="ij,jk->ik")]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w")])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    path = saved(tmp_path, model)
    (x,) = seeded([(3, 4)])
    (expected,) = ort.InferenceSession(str(path)).run(None, {"x0": x})
    np.testing.assert_allclose(nnef_torch.load(path)(torch.from_numpy(x)).detach().numpy(), expected,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("equation, shapes, message", [
    ("ii->i", [(3, 3)], "diagonal"),
    ("ij,jj->i", [(3, 4), (4, 4)], "diagonal"),
    ("ij,jk->ik", [(3, 4)], "operands"),
    ("ij->ik", [(3, 4)], "names one no operand has"),
    ("ijk->i", [(3, 4)], "does not fit"),
    ("...ij->ij", [(2, 3, 4)], "ellipsis"),
])
def test_refused_equations_name_the_node(tmp_path, equation, shapes, message):
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)]
    node = helper.make_node("Einsum", names, ["y"], equation=equation, name="the_einsum")
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])  # the checker wants a shape; any will do
    graph = helper.make_graph([node], "g", inputs, [output])
    path = saved(tmp_path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    with pytest.raises(ForeignFormatError, match=message) as error:
        nnef_torch.load(path)
    assert "the_einsum" in str(error.value) or "Einsum" in str(error.value)
