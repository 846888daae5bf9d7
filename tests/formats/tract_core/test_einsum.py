"""tract_core_einsum saved as standard operations (transpose, reshape, sum_reduce, matmul): each common form
against numpy and tract, through the Khronos parser and a strict re-import; the forms without one are refused
on a standard save with the equation named, and kept for tract with dialect='tract_core'."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFUnsupportedError

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"
RNG = np.random.default_rng(5)
LETTERS = {"b": 2, "h": 2, "i": 3, "j": 4, "k": 5, "l": 2, "q": 3, "d": 4}


def _operands(expr: str) -> list[np.ndarray]:
    return [RNG.standard_normal([LETTERS[c] for c in part]).astype(np.float32)
            for part in expr.split("->")[0].split(",")]


def _folder(tmp_path, expr: str, arrays: list[np.ndarray]):
    names = [f"x{i}" for i in range(len(arrays))]
    lines = [f"    {name} = tract_core_external(shape = {list(a.shape)}, datum_type = 'f32');"
             for name, a in zip(names, arrays)]
    body = f"    y = tract_core_einsum([{', '.join(names)}], expr = '{expr}', acc = 'f32');"
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "graph.nnef").write_text(HEAD + f"graph g({', '.join(names)}) -> (y)\n{{\n" + "\n".join(lines)
                                         + "\n" + body + "\n}\n")
    return tmp_path


def _ours(folder, arrays, **options):
    return nnef_torch.load(folder, **options)(*[torch.from_numpy(a) for a in arrays]).detach().numpy()


WRITTEN = ["ij,jk->ik", "bij,bkj->bik", "bhqd,bhkd->bhqk", "bij,jk->bik", "bij,bj->bi", "ijk,ikl->jl",
           "ij,ij->ij", "i,j->ij", "ij->ji", "ij->i", "ijk->kj"]


@pytest.mark.parametrize("expr", WRITTEN)
def test_einsum_standard_form(expr, tmp_path):
    arrays = _operands(expr)
    expected = np.einsum(expr, *arrays)
    folder = _folder(tmp_path / "in", expr, arrays)
    tract = pytest.importorskip("tract")
    live = tract.nnef().load(str(folder)).into_runnable().run(arrays)[0].to_numpy()
    np.testing.assert_allclose(live, expected, rtol=1e-5, atol=1e-5)
    nnef_torch.load(folder).save(tmp_path / "std")
    text = (tmp_path / "std" / "graph.nnef").read_text()
    assert "tract_" not in text and "einsum" not in text.split("graph ", 1)[1].split("=", 1)[1]
    pytest.importorskip("nnef").load_graph(str(tmp_path / "std"))
    np.testing.assert_allclose(_ours(tmp_path / "std", arrays, lenient=False), expected, rtol=1e-5, atol=1e-5)
    ran = tract.nnef().without_tract_core().load(str(tmp_path / "std")).into_runnable().run(arrays)[0].to_numpy()
    np.testing.assert_allclose(ran, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("expr,why", [("ij,jk,kl->il", "3 operands"), ("ii->i", "repeated")])
def test_einsum_without_standard_form(expr, why, tmp_path):
    shapes = {"ii->i": [(3, 3)]}
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes[expr]] if expr in shapes \
        else _operands(expr)
    expected = np.einsum(expr, *arrays)
    module = nnef_torch.load(_folder(tmp_path / "in", expr, arrays))
    np.testing.assert_allclose(module(*[torch.from_numpy(a) for a in arrays]).detach().numpy(), expected,
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(NNEFUnsupportedError) as info:
        module.save(tmp_path / "std")
    assert f"'{expr}'" in str(info.value) and why in str(info.value) and "dialect='tract_core'" in str(info.value)
    assert not (tmp_path / "std").exists()
    module.save(tmp_path / "dialect", dialect="tract_core")
    tract = pytest.importorskip("tract")
    ran = tract.nnef().load(str(tmp_path / "dialect")).into_runnable().run(arrays)[0].to_numpy()
    np.testing.assert_allclose(ran, expected, rtol=1e-5, atol=1e-5)
