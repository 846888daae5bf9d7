"""Each tract_core op read against tract (with tract_core) on a tiny hand-written graph.nnef, and the way back:
standard NNEF where the op has a standard form, tract_core text (dialect='tract_core') where it has none."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFError, NNEFUnsupportedError

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"
RNG = np.random.default_rng(0)
F = RNG.standard_normal((2, 3, 4)).astype(np.float32)
I = np.array([[2, 0, -1], [1, 1, 0]], dtype=np.int64)


def doc(inputs: list[tuple[str, np.ndarray]], body: str) -> str:
    names = ", ".join(name for name, _ in inputs)
    lines = [f"    {name} = tract_core_external(shape = {list(a.shape)}, datum_type = "
             f"'{'f32' if a.dtype == np.float32 else 'i64'}');" for name, a in inputs]
    return HEAD + f"graph g({names}) -> (y)\n{{\n" + "\n".join(lines) + f"\n    {body}\n}}\n"


# op, inputs, body
ROWS = [
    ("gather_input_indices", [("x", F), ("i", np.array([3, 0, 1], dtype=np.int64))],
     "y = tract_core_gather(x, i, axis = 2);"),
    ("gather_elements", [("x", F[0]), ("i", I)], "y = tract_core_gather_elements(x, i, axis = 1);"),
    ("gather_elements_axis0", [("x", F), ("i", np.array([[[1, 0, 1, 1]], [[0, -1, 0, 1]]], dtype=np.int64))],
     "y = tract_core_gather_elements(x, i, axis = 0);"),
    ("einsum", [("x", F), ("w", F)], "y = tract_core_einsum([x, w], expr = 'bij,bkj->bik', acc = 'f32');"),
    ("cast", [("x", F)], "y = tract_core_cast(tract_core_cast(x * 3.0, to = 'i64'), to = 'f32');"),
    ("shape_of", [("x", F)], "y = tract_core_cast(tract_core_shape_of(x), to = 'f32');"),
    ("range", [("x", F)], "y = tract_core_cast(tract_core_range(1, 9, 2), to = 'f32');"),
    ("erf", [("x", F * 2.0)], "y = tract_core_erf(x);"),
]


def _write(tmp_path, text: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "graph.nnef").write_text(text)
    return tmp_path


def _tract(folder, arrays, core=True):
    tract = pytest.importorskip("tract")
    loader = tract.nnef() if core else tract.nnef().without_tract_core()
    return loader.load(str(folder)).into_runnable().run(list(arrays))[0].to_numpy()


@pytest.mark.parametrize("op,inputs,body", ROWS, ids=[row[0] for row in ROWS])
def test_op_equals_tract(op, inputs, body, tmp_path):
    folder = _write(tmp_path / "in", doc(inputs, body))
    arrays = [a for _, a in inputs]
    expected = _tract(folder, arrays)
    module = nnef_torch.load(folder)
    got = module(*[torch.from_numpy(a) for a in arrays]).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,inputs,body", ROWS, ids=[row[0] for row in ROWS])
def test_op_saves_back(op, inputs, body, tmp_path):
    folder = _write(tmp_path / "in", doc(inputs, body))
    arrays = [a for _, a in inputs]
    torch_inputs = [torch.from_numpy(a) for a in arrays]
    expected = _tract(folder, arrays)
    module = nnef_torch.load(folder)
    module.save(tmp_path / "std")  # standard NNEF: the Khronos parser reads it, it loads strictly and equal
    assert "tract_" not in (tmp_path / "std" / "graph.nnef").read_text()
    pytest.importorskip("nnef").load_graph(str(tmp_path / "std"))
    again = nnef_torch.load(tmp_path / "std", lenient=False)
    np.testing.assert_allclose(again(*torch_inputs).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    tract = pytest.importorskip("tract")
    try:  # tract's standard mode has no `gather`, `cast` or `constant` (it reads tract_core ops instead)
        ran = _tract(tmp_path / "std", arrays, core=False)
    except tract.TractError:
        assert any(name in (tmp_path / "std" / "graph.nnef").read_text() for name in ("gather(", "cast<", "constant<"))
    else:
        np.testing.assert_allclose(ran, expected, rtol=1e-5, atol=1e-6)
    module.save(tmp_path / "dialect", dialect="tract_core")  # tract's form: tract runs it
    assert "extension tract_registry tract_core;" in (tmp_path / "dialect" / "graph.nnef").read_text()
    np.testing.assert_allclose(_tract(tmp_path / "dialect", arrays), expected, rtol=1e-5, atol=1e-6)
    again = nnef_torch.load(tmp_path / "dialect")
    np.testing.assert_allclose(again(*torch_inputs).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_save_in_tract_form_keeps_the_dialect_op(tmp_path):
    module = nnef_torch.load(_write(tmp_path / "in", doc([("x", F)], "y = tract_core_erf(x);")))
    nnef_torch.save(module, tmp_path / "out", dialect="tract_core")
    assert "tract_core_erf(" in (tmp_path / "out" / "graph.nnef").read_text()


def test_dialect_ops_give_gradients(tmp_path):
    body = "y = tract_core_erf(tract_core_einsum([x, x], expr = 'bij,bkj->bik', acc = 'f32'));"
    module = nnef_torch.load(_write(tmp_path, doc([("x", F)], body)))
    x = torch.from_numpy(F).requires_grad_()
    module(x).sum().backward()
    twin = torch.from_numpy(F).requires_grad_()  # a hand-written torch twin
    torch.erf(torch.einsum("bij,bkj->bik", twin, twin)).sum().backward()
    torch.testing.assert_close(x.grad, twin.grad)


BAD = [
    ("unknown_op", "y = tract_core_frobnicate(x);", "tract_core_frobnicate"),
    ("bad_cast", "y = tract_core_cast(x, to = 'x64');", "x64"),
    ("bad_expr", "y = tract_core_einsum([x], expr = 'ij', acc = 'f32');", "expr"),
    ("bad_axis", "y = tract_core_gather_elements(x, x, axis = 7);", "tract_core_gather_elements"),
]


@pytest.mark.parametrize("case,body,needle", BAD, ids=[row[0] for row in BAD])
def test_bad_input_located(case, body, needle, tmp_path):
    folder = _write(tmp_path, doc([("x", F)], body))
    with pytest.raises(NNEFError) as info:
        nnef_torch.load(folder)
    message = str(info.value)
    assert needle in message and "graph.nnef:" in message


def test_other_tract_registry_refused(tmp_path):
    text = doc([("x", F)], "y = tract_core_erf(x);").replace(
        HEAD, HEAD + "extension tract_registry tract_pulse;\n")
    with pytest.raises(NNEFUnsupportedError, match="tract_pulse"):
        nnef_torch.load(_write(tmp_path, text))
