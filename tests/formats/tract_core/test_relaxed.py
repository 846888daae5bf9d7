"""Standard ops read as tract reads them in a tract_core document (rank-1 conv bias, batched linear, pad's
`replicated` border, integer arithmetic and comparisons), against tract; the standard save of each is valid NNEF (Khronos parser, strict
re-import) and equal; and a standard document still reads them by the spec."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFShapeError, NNEFTypeError
from nnef_torch.format.tensor_file import encode

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"
RNG = np.random.default_rng(3)
A = RNG.integers(-5, 6, (2, 3)).astype(np.int64)
B = RNG.integers(-5, 6, (2, 3)).astype(np.int64)
X = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
S = RNG.standard_normal((2, 3, 4)).astype(np.float32)
WEIGHTS = {"w": RNG.standard_normal((3, 2, 3, 3)).astype(np.float32),
           "b": RNG.standard_normal(3).astype(np.float32),
           "b4": RNG.standard_normal((1, 3, 1, 1)).astype(np.float32),
           "f": RNG.standard_normal((5, 4)).astype(np.float32),
           "f3": RNG.standard_normal((1, 5, 4)).astype(np.float32),
           "lb": RNG.standard_normal((1, 1, 5)).astype(np.float32)}


def _type(a: np.ndarray) -> str:
    return "f32" if a.dtype == np.float32 else "i64"


def _folder(tmp_path, inputs, body, head=HEAD):
    names = ", ".join(name for name, _ in inputs)
    lines = [f"    {name} = tract_core_external(shape = {list(a.shape)}, datum_type = '{_type(a)}');"
             for name, a in inputs] if head == HEAD else \
        [f"    {name} = external<{'scalar' if a.dtype == np.float32 else 'integer'}>(shape = {list(a.shape)});"
         for name, a in inputs]
    tmp_path.mkdir(parents=True, exist_ok=True)
    for label, array in WEIGHTS.items():
        if f"'{label}'" in body:
            (tmp_path / f"{label}.dat").write_bytes(encode(array))
    (tmp_path / "graph.nnef").write_text(head + f"graph g({names}) -> (y)\n{{\n" + "\n".join(lines)
                                         + f"\n    {body}\n}}\n")
    return tmp_path


def _var(label: str) -> str:
    return f"variable<scalar>(label = '{label}', shape = {list(WEIGHTS[label].shape)})"


FLOAT_ROWS = [
    ("conv_rank1_bias", [("x", X)], f"w = {_var('w')}; b = {_var('b')}; "
                                    "y = conv(x, w, b, padding = [(1, 1), (1, 1)]);"),
    ("conv_rank4_bias", [("x", X)], f"w = {_var('w')}; b = {_var('b4')}; y = conv(x, w, b);"),
    ("linear_rank3_by_rank3", [("x", S)], f"f = {_var('f3')}; b = {_var('lb')}; y = linear(x, f, b);"),
]
INTEGER_OPS = ["add", "sub", "mul", "min", "max", "lt", "gt", "le", "ge", "eq", "ne"]


def _tract(folder, arrays, core=True):
    tract = pytest.importorskip("tract")
    loader = tract.nnef() if core else tract.nnef().without_tract_core()
    return loader.load(str(folder)).into_runnable().run(list(arrays))[0].to_numpy()


def _ours(folder, arrays, **options):
    return nnef_torch.load(folder, **options)(*[torch.from_numpy(a) for a in arrays]).detach().numpy()


def _save_standard(folder, tmp_path):
    module = nnef_torch.load(folder)
    module.save(tmp_path / "std")
    pytest.importorskip("nnef").load_graph(str(tmp_path / "std"))
    return tmp_path / "std"


@pytest.mark.parametrize("case,inputs,body", FLOAT_ROWS, ids=[row[0] for row in FLOAT_ROWS])
def test_relaxed_float_op_equals_tract(case, inputs, body, tmp_path):
    folder = _folder(tmp_path / "in", inputs, body)
    arrays = [a for _, a in inputs]
    expected = _tract(folder, arrays)
    np.testing.assert_allclose(_ours(folder, arrays), expected, rtol=1e-5, atol=1e-5)
    std = _save_standard(folder, tmp_path)
    np.testing.assert_allclose(_ours(std, arrays, lenient=False), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_tract(std, arrays, core=False), expected, rtol=1e-5, atol=1e-5)


def test_pad_replicated_border_equals_tract(tmp_path):
    """tract names NNEF's `replicate` border `replicated` (and refuses `replicate`): read as `replicate`, saved
    as standard NNEF with `replicate` (the Khronos parser reads it), and in tract's form with `replicated` again."""
    body = "y = pad(x, padding = [(0, 0), (0, 0), (1, 2), (2, 0)], border = 'replicated');"
    folder = _folder(tmp_path / "in", [("x", X)], body)
    expected = _tract(folder, [X])
    np.testing.assert_allclose(expected, np.pad(X, [(0, 0), (0, 0), (1, 2), (2, 0)], mode="edge"))
    np.testing.assert_array_equal(_ours(folder, [X]), expected)
    std = _save_standard(folder, tmp_path)
    assert "'replicate'" in (std / "graph.nnef").read_text()
    np.testing.assert_array_equal(_ours(std, [X], lenient=False), expected)
    nnef_torch.load(folder).save(tmp_path / "tract", dialect="tract_core")
    np.testing.assert_array_equal(_tract(tmp_path / "tract", [X]), expected)


@pytest.mark.parametrize("op", INTEGER_OPS)
def test_integer_op_equals_tract(op, tmp_path):
    folder = _folder(tmp_path / "in", [("a", A), ("b", B)], f"y = {op}(a, b);")
    expected = _tract(folder, [A, B])
    got = _ours(folder, [A, B])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    std = _save_standard(folder, tmp_path)  # on float32 casts: exact for these small integers
    again = _ours(std, [A, B], lenient=False)
    assert again.dtype == expected.dtype
    np.testing.assert_array_equal(again, expected)


def test_integer_op_with_literal_and_gradients_elsewhere(tmp_path):
    body = "y = tract_core_cast(gt(a, 2), to = 'f32') * tract_core_cast(add(a, 1), to = 'f32');"
    folder = _folder(tmp_path, [("a", A)], body)
    np.testing.assert_array_equal(_ours(folder, [A]), _tract(folder, [A]))


def test_linear_of_unequal_ranks_refused_as_tract_refuses(tmp_path):
    tract = pytest.importorskip("tract")
    folder = _folder(tmp_path, [("x", S)], f"f = {_var('f')}; b = {_var('lb')}; y = linear(x, f, b);")
    with pytest.raises(tract.TractError):
        _tract(folder, [S])
    with pytest.raises(NNEFShapeError, match="linear"):
        nnef_torch.load(folder)


STANDARD_ROWS = [
    ("conv_rank1_bias", [("x", X)], f"w = {_var('w')}; b = {_var('b')}; y = conv(x, w, b);", NNEFShapeError),
    ("linear_rank3", [("x", S)], f"f = {_var('f3')}; b = {_var('lb')}; y = linear(x, f, b);", NNEFShapeError),
    ("gt_integer", [("a", A), ("b", B)], "y = gt(a, b);", NNEFTypeError),
]


@pytest.mark.parametrize("case,inputs,body,error", STANDARD_ROWS, ids=[row[0] for row in STANDARD_ROWS])
def test_standard_document_not_relaxed(case, inputs, body, error, tmp_path):
    folder = _folder(tmp_path, inputs, body, head="version 1.0;\n")
    with pytest.raises(error) as info:
        nnef_torch.load(folder)
    assert "graph.nnef:" in str(info.value)
