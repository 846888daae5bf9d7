"""tract's typing of a tract_core document (formats/tract_core/by_value.py): numbers typed by value, attributes
given as tensors whose values are folded when lowering (one row per folding rule, the folded attribute checked and
the model run against tract), arrays read for tuples; what cannot be folded refused at its statement; a standard
document still typed by the spec."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFSemanticError, NNEFShapeError, NNEFTypeError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.formats.tract_core.by_value import TractTyping
from nnef_torch.ops import registry
from nnef_torch.reader import read_graph

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"
X = np.random.default_rng(5).standard_normal((2, 3, 5)).astype(np.float32)
# n = 3 (the extent of axis 1 of x), computed as torch_to_nnef computes it
SHAPE = ["s = tract_core_shape_of(x);",
         "n = squeeze(slice(s, axes = [0], begin = [1], end = [2], stride = [1]), axes = [0]);"]


def document(*statements: str, definitions: str = "", head: str = HEAD, external: str | None = None) -> str:
    external = external or "x = tract_core_external(shape = [2, 3, 5], datum_type = 'f32');"
    lines = ["graph g(x) -> (y)", "{", "    " + external] + ["    " + s for s in statements] + ["}", ""]
    return head + definitions + "\n".join(lines)


def _write(tmp_path, text: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "graph.nnef").write_text(text)
    return tmp_path


def _tract(folder, *arrays: np.ndarray) -> np.ndarray:
    tract = pytest.importorskip("tract")
    return tract.nnef().load(str(folder)).into_runnable().run(list(arrays))[0].to_numpy()


def _op(graph, name: str):
    return next(op for op in graph.operations if op.name == name)


# rule, the expression of k (from n = 3), k's value: each folded into `tile`'s repeats [1, 1, k]
FOLDED = [
    ("add", "add(n, 1)", 4),
    ("sub", "sub(n, 1)", 2),
    ("mul", "mul(n, 2)", 6),
    ("min", "min(n, 2)", 2),
    ("max", "max(n, 4)", 4),
    ("lt", "select(lt(n, 4), 2, 1)", 2),
    ("gt", "select(gt(n, 4), 2, 1)", 1),
    ("le", "select(le(n, 3), 2, 1)", 2),
    ("ge", "select(ge(n, 4), 2, 1)", 1),
    ("eq", "select(eq(n, 3), 2, 1)", 2),
    ("ne", "select(ne(n, 3), 2, 1)", 1),
    ("select", "select(ge(n, 0), n, 1)", 3),
    ("cast", "tract_core_cast(n, to = 'tdim')", 3),
    ("operators", "n * 2 - 1", 5),
]


@pytest.mark.parametrize("rule,expr,value", FOLDED, ids=[row[0] for row in FOLDED])
def test_integer_arithmetic_on_shapes_folds_into_an_attribute(rule, expr, value, tmp_path):
    text = document(*SHAPE, f"k = {expr};", "y = tile(x, repeats = [1, 1, k]);")
    assert _op(read_graph(text), "tile").attribs["repeats"] == [1, 1, value]
    folder = _write(tmp_path, text)
    got = nnef_torch.load(folder)(torch.from_numpy(X)).numpy()
    np.testing.assert_array_equal(got, _tract(folder, X))


def test_shape_of_given_whole_for_an_array_attribute(tmp_path):
    text = document(*SHAPE, "y = tile(x, repeats = tract_core_shape_of(x));")
    assert _op(read_graph(text), "tile").attribs["repeats"] == [2, 3, 5]
    folder = _write(tmp_path, text)
    np.testing.assert_array_equal(nnef_torch.load(folder)(torch.from_numpy(X)).numpy(), _tract(folder, X))


def test_shape_items_in_reshape_and_slice(tmp_path):
    text = document(*SHAPE, "r = reshape(x, shape = [n, 2, 5]);", "y = slice(r, axes = [0], begin = [n - 2], end = [n]);")
    graph = read_graph(text)
    assert _op(graph, "reshape").attribs["shape"] == [3, 2, 5]
    cut = graph.operations[-1]
    assert cut.name == "slice" and cut.attribs["begin"] == [1] and cut.attribs["end"] == [3]
    folder = _write(tmp_path, text)
    np.testing.assert_array_equal(nnef_torch.load(folder)(torch.from_numpy(X)).numpy(), _tract(folder, X))


DYN_SLICE = """fragment bounded( index: tensor<scalar>, size: tensor<scalar> ) -> ( bounded: tensor<scalar> )
{
    offset = select(ge(index, 0), 0, size);
    bounded = tract_core_cast(min(max(0, offset + index), size), to = "tdim");
}
fragment cut( input: tensor<scalar>, axis: tensor<scalar>, end: tensor<scalar> ) -> ( output: tensor<scalar> )
{
    size = squeeze(slice(tract_core_shape_of(input), axes = [0], begin = [axis], end = [axis + 1]), axes = [0]);
    output = slice(input, axes = [axis], begin = [0], end = [bounded(end, size)]);
}
"""


@pytest.mark.parametrize("end,kept", [(-2, 3), (2, 2), (-4, 1), (9, 5)])
def test_numbers_typed_by_value_in_a_document_fragment(end, kept, tmp_path):
    """torch_to_nnef's dyn_slice: parameters declared tensor<scalar> given integers, compared with integers, and
    the bound it computes passed to `slice`."""
    text = document(f"y = cut(x, axis = 2, end = {end});", definitions=DYN_SLICE)
    folder = _write(tmp_path, text)
    got = nnef_torch.load(folder)(torch.from_numpy(X)).numpy()
    np.testing.assert_array_equal(got, _tract(folder, X))
    assert got.shape[2] == kept


def test_a_slice_end_computed_as_zero_is_refused(tmp_path):
    """tract reads the bound 0 as an empty slice (x[..., :-9] on an axis of 5); NNEF's slice reads 0 as the end of
    the axis and has no empty result: refused rather than read as the whole axis."""
    text = document("y = cut(x, axis = 2, end = -9);", definitions=DYN_SLICE)
    assert _tract(_write(tmp_path, text), X).shape == (2, 3, 0)
    with pytest.raises(NNEFUnsupportedError, match="'end' of 'slice' is computed as 0") as info:
        read_graph(text)
    assert info.value.location.line == 11  # the fragment's statement


@pytest.mark.parametrize("padding", ["[[0, 0], [1, 0], [2, 1]]", "[(0, 0), (1, 0), (2, 1)]"])
def test_pad_reads_arrays_and_tuples_alike(padding, tmp_path):
    text = document(f"y = pad(x, padding = {padding}, value = 1.5);")
    assert _op(read_graph(text), "pad").attribs["padding"] == [(0, 0), (1, 0), (2, 1)]
    folder = _write(tmp_path, text)
    np.testing.assert_array_equal(nnef_torch.load(folder)(torch.from_numpy(X)).numpy(), _tract(folder, X))


def test_an_array_for_a_tuple_must_have_its_length():
    with pytest.raises(NNEFTypeError, match=r"'padding' of 'pad' must be \(integer, integer\)\[\]: an item has 3") \
            as info:
        read_graph(document("y = pad(x, padding = [[0, 0], [1, 0, 1], [2, 1]]);"))
    assert info.value.location.line == 6


BAD = [
    ("depends_on_inputs", "y = tile(x, repeats = tract_core_cast(i, to = 'tdim'));", NNEFSemanticError,
     "'repeats' of 'tile' must be known when the model is read, but tensor"),
    ("one_value_from_inputs", "y = reshape(x, shape = [2, sum_reduce(i, axes = [0]), 5]);", NNEFSemanticError,
     "'shape' of 'reshape' must be a compile-time constant"),
    ("float_values", "y = tile(x, repeats = tract_core_cast(tract_core_shape_of(x), to = 'f32'));", NNEFTypeError,
     r"'repeats' of 'tile' must be integer\[\], but tensor"),
    ("rank_2", "y = tile(x, repeats = unsqueeze(tract_core_shape_of(x), axes = [0]));", NNEFShapeError,
     "is an array, but tensor"),
    ("several_for_one", "y = squeeze(unsqueeze(x, axes = [0]), axes = [tract_core_shape_of(x)]);", NNEFShapeError,
     "'axes' of 'squeeze' is one integer, but tensor"),
]


@pytest.mark.parametrize("case,statement,error,needle", BAD, ids=[row[0] for row in BAD])
def test_an_attribute_not_known_when_read_is_refused_at_its_statement(case, statement, error, needle):
    text = document(statement, head=HEAD + "").replace("graph g(x)", "graph g(x, i)").replace(
        "    y =", "    i = tract_core_external(shape = [3], datum_type = 'i64');\n    y =")
    with pytest.raises(error, match=needle) as info:
        read_graph(text)
    assert info.value.location is not None and info.value.location.line == 7


STANDARD = [
    ("nested_padding", "y = pad(x, padding = [[0, 0], [1, 0], [2, 1]]);", "must be (integer, integer)[]"),
    ("tensor_repeats", "y = tile(x, repeats = [1, 1, sum_reduce(x, axes = [0, 1, 2])]);", "have no common type"),
    ("mixed_numbers", "y = add(x, 1);", "must be tensor<scalar>, found integer"),
]


@pytest.mark.parametrize("case,statement,needle", STANDARD, ids=[row[0] for row in STANDARD])
def test_a_standard_document_is_typed_by_the_spec(case, statement, needle):
    head = "version 1.0;\nextension KHR_enable_operator_expressions;\n"
    text = document(statement, head=head, external="x = external<scalar>(shape = [2, 3, 5]);")
    with pytest.raises(NNEFTypeError, match=re.escape(needle)):
        read_graph(text, lenient=False)


def _t(item: str | None) -> ast.TensorType:
    return ast.TensorType(ast.PrimitiveType(item) if item is not None else None)


P = ast.PrimitiveType
CASTS = [  # source, target, read by tract's typing
    (P("integer"), _t("scalar"), True),
    (_t("integer"), _t("scalar"), True),
    (_t("scalar"), _t("integer"), True),
    (_t("?"), _t("scalar"), True),
    (_t("logical"), _t("scalar"), False),
    (P("string"), _t("scalar"), False),
    (_t("integer"), P("integer"), True),
    (_t("scalar"), P("integer"), True),
    (_t("logical"), P("integer"), False),
    (_t("integer"), P("string"), False),
    (_t("integer"), ast.ArrayType(P("integer")), True),
    (ast.ArrayType(_t("scalar")), ast.ArrayType(P("integer")), True),
    (ast.ArrayType(P("integer")), ast.TupleType((P("integer"), P("integer"))), True),
    (ast.ArrayType(P("integer")), ast.TupleType((P("string"), P("integer"))), False),
    (ast.ArrayType(P("integer")), ast.TupleType((P("integer"), _t("scalar"))), False),
    (P("integer"), P("scalar"), False),  # literals keep their kind for primitive attributes
    (P("scalar"), P("integer"), False),
]


@pytest.mark.parametrize("source,target,read", CASTS, ids=[f"{s}->{t}" for s, t, _ in CASTS])
def test_tract_casts(source, target, read):
    assert TractTyping().can_cast(source, target) is read


def test_generic_of_integer_and_scalar_is_scalar_and_logical_stays_an_error():
    typing = TractTyping()
    assert typing.generic({"integer", "scalar"}) == "scalar"
    assert typing.generic({"integer", "?"}) == "?"
    assert typing.generic({"integer", "logical"}) is None


def test_the_typing_is_the_tract_core_tables_only():
    assert isinstance(registry.typing_of("tract_core"), TractTyping)
    assert registry.typing_of(None) is None
    with pytest.raises(RuntimeError, match="already has a typing"):
        registry.dialect_typing("tract_core")(TractTyping)
