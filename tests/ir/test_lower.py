"""Lowering (text -> flat IR) against the Khronos parser, which builds the same flat graph independently."""
from __future__ import annotations

import pytest
from khronos import canonical_khronos, canonical_ours, conformance_cases, khronos, require_conformance

from nnef_torch.errors import NNEFSemanticError, NNEFShapeError
from nnef_torch.format.parser import parse_document
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.lower import lower
from nnef_torch.stdlib import standard_fragments, stdlib_text

HEADER = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"

# One invocation per compound standard operation: (op, graph body after `x` [1,4,8,8] and `w` [4,4,3,3]).
COMPOUND_CALLS = [
    ("sqr", "y = sqr(x);"), ("sqrt", "y = sqrt(x);"), ("rsqr", "y = rsqr(x);"), ("rsqrt", "y = rsqrt(x);"),
    ("log2", "y = log2(x);"), ("min", "y = min(x, 0.5);"), ("max", "y = max(x, 0.5);"),
    ("clamp", "y = clamp(x, -1.0, 1.0);"), ("relu", "y = relu(x);"), ("sigmoid", "y = sigmoid(x);"),
    ("softabs", "y = softabs(x, epsilon = 0.01);"), ("softplus", "y = softplus(x);"), ("elu", "y = elu(x, alpha = 0.5);"),
    ("selu", "y = selu(x);"), ("gelu", "y = gelu(x);"), ("silu", "y = silu(x);"),
    ("prelu", "y = prelu(x, 0.25);"), ("leaky_relu", "y = leaky_relu(x, alpha = 0.1);"),
    ("softmax", "y = softmax(x, axes = [1, 2]);"), ("mean_reduce", "y = mean_reduce(x, axes = [2, 3]);"),
    ("moments", "y, v = moments(x, axes = [1]);"),
    ("max_pool", "y = max_pool(x, size = [1, 1, 3, 3], padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');"),
    ("max_pool_with_index", "y, i = max_pool_with_index(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);"),
    ("avg_pool", "y = avg_pool(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);"),
    ("rms_pool", "y = rms_pool(x, size = [1, 1, 3, 3], dilation = [1, 1, 2, 2]);"),
    ("linear", "f = reshape(x, shape = [1, -1]); y = linear(f, constant(shape = [3, 256], value = [0.5]), 1.0);"),
    ("separable_conv", "y = separable_conv(x, constant(shape = [4, 1, 3, 3], value = [1.0]), "
                       "constant(shape = [6, 4, 1, 1], value = [0.5]), stride = [2, 2]);"),
    ("separable_deconv", "y = separable_deconv(x, constant(shape = [2, 1, 3, 3], value = [1.0]), "
                         "constant(shape = [4, 2, 1, 1], value = [0.5]));"),
    ("nearest_downsample", "y = nearest_downsample(x, factor = [2, 2]);"),
    ("area_downsample", "y = area_downsample(x, factor = [2, 4]);"),
    ("nearest_upsample", "y = nearest_upsample(x, factor = [2, 3]);"),
    ("local_response_normalization", "y = local_response_normalization(x, size = [1, 3, 1, 1], alpha = 0.1);"),
    ("local_mean_normalization", "y = local_mean_normalization(x, size = [1, 1, 3, 3]);"),
    ("local_variance_normalization", "y = local_variance_normalization(x, size = [1, 1, 3, 3], epsilon = 0.001);"),
    ("local_contrast_normalization", "y = local_contrast_normalization(x, size = [1, 1, 3, 3], bias = 1.0);"),
    ("l1_normalization", "y = l1_normalization(x, axes = [1]);"),
    ("l2_normalization", "y = l2_normalization(x, axes = [1], epsilon = 0.000001);"),
    ("batch_normalization", "y = batch_normalization(x, 0.5, 2.0, 0.1, 1.5, epsilon = 0.001);"),
    ("max_roi_align", "r = constant(shape = [2, 4], value = [0.0, 0.0, 4.0, 4.0, 1.0, 1.0, 6.0, 7.0]); "
                      "b = constant<integer>(shape = [2], value = [0, 0]); "
                      "y = max_roi_align(x, r, b, output_size = [2, 2], sampling_rate = [2, 2]);"),
    ("avg_roi_align", "r = constant(shape = [1, 4], value = [0.0, 0.0, 4.0, 4.0]); "
                      "b = constant<integer>(shape = [1], value = [0]); "
                      "y = avg_roi_align(x, r, b, output_size = [3, 3], sampling_rate = [1, 2]);"),
    ("min_max_linear_quantize", "y = min_max_linear_quantize(x, -1.0, 1.0, bits = 8, signed = true, symmetric = true);"),
    ("zero_point_linear_quantize", "y = zero_point_linear_quantize(x, 3, 0.05, bits = 8, signed = true, "
                                   "symmetric = true);"),
    ("linear_quantize", "y = linear_quantize(x, 0.0, 1.0, bits = 4);"),
    ("logarithmic_quantize", "y = logarithmic_quantize(x, 4.0, bits = 5);"),
    ("copy_n", "[y, z] = copy_n(x, times = 2);"),
    ("add_n", "y = add_n([x, x, x]);"),
]


def _document(body: str) -> str:
    return (HEADER + "graph G( x ) -> ( y )\n{\n    x = external(shape = [1, 4, 8, 8]);\n"
            + "".join(f"    {statement.strip()};\n" for statement in body.split(";") if statement.strip()) + "}\n")


def _khronos_graph(text: str, lowered: list[str], stdlib: str | None = None):
    nnef = khronos()
    graph = nnef.parse_string(text, lowered=lowered, stdlib=stdlib)
    nnef.infer_shapes(graph)
    return graph


def _ours(text: str, lowered: set[str]):
    standard = standard_fragments()
    return lower(parse_document(text), atomic=lambda name: name in standard and name not in lowered, text=text)


def test_compound_table_covers_every_compound_standard_op():
    compound = {name for name, fragment in standard_fragments().items() if fragment.body is not None}
    assert compound == {name for name, _ in COMPOUND_CALLS}


@pytest.mark.parametrize("op,body", COMPOUND_CALLS, ids=[name for name, _ in COMPOUND_CALLS])
def test_compound_op_kept_atomic_matches_khronos(op, body):
    text = _document(body)
    assert canonical_ours(_ours(text, set())) == canonical_khronos(_khronos_graph(text, []))


# Khronos' own shape rule for `sample` wants the index shaped like the input, so it rejects its own expansion of
# max_pool_with_index (the spec shapes the index like the output); those rows are compared one level up.
_KHRONOS_SAMPLE_BUG = {"max_pool", "max_pool_with_index", "max_roi_align"}
# The spec's roi_align bodies pool with spatial-only sizes, which no pool accepts; ours prefix [1, 1] (stdlib.nnef).
_SPEC_ROI_ALIGN_BUG = {"avg_roi_align", "max_roi_align"}


@pytest.mark.parametrize("op,body", COMPOUND_CALLS, ids=[name for name, _ in COMPOUND_CALLS])
def test_compound_op_expanded_fully_matches_khronos(op, body):
    text = _document(body)
    lowered = [name for name, fragment in standard_fragments().items() if fragment.body is not None]
    if op in _KHRONOS_SAMPLE_BUG:
        lowered.remove("max_pool_with_index")
    if op in _SPEC_ROI_ALIGN_BUG:
        lowered.remove(op)
    assert canonical_ours(_ours(text, set(lowered))) == canonical_khronos(_khronos_graph(text, lowered))


@pytest.mark.parametrize("op,body", COMPOUND_CALLS, ids=[name for name, _ in COMPOUND_CALLS])
def test_our_stdlib_expands_like_khronos_stdlib_in_the_khronos_parser(op, body):
    """The Khronos parser given OUR stdlib text builds the same graph as with its own stdlib."""
    text = _document(body)
    lowered = [op] if op not in _KHRONOS_SAMPLE_BUG | _SPEC_ROI_ALIGN_BUG else []
    theirs = canonical_khronos(_khronos_graph(text, lowered))
    with_ours = canonical_khronos(_khronos_graph(text, lowered, stdlib=stdlib_text()))
    assert with_ours == theirs


def test_every_conformance_case_lowers_like_khronos():
    require_conformance()
    cases = conformance_cases()
    assert len(cases) == 74
    for case in cases:
        text = (case / "graph.nnef").read_text()
        assert canonical_ours(_ours(text, set())) == canonical_khronos(_khronos_graph(text, [])), case.name


COMPOSITIONAL = HEADER + """
fragment block( x: tensor<scalar>, w: tensor<scalar>, k: integer = 3 ) -> ( y: tensor<scalar> )
{
    pads = [for i in range_of([k, k]) yield (k / 2, k / 2)];
    c = conv(x, w, padding = pads);
    y = relu(c + 1.0) * 2.0 if k > 1 else c;
}
fragment pick<?>( a: tensor<?>, b: tensor<?>, first: logical ) -> ( c: tensor<?> )
{
    c = copy<?>(a) if first else b;
}
graph G( input ) -> ( output, idx, n )
{
    input = external(shape = [1, 4, 16, 16]);
    w = variable(shape = [4, 4, 3, 3], label = 'w');
    a = block(input, w);
    b = pick(-a, a, first = length_of([1, 2]) == 2 && !false);
    [s1, s2] = split(b, axis = 1, ratios = [1, 1]);
    m, idx = max_pool_with_index(s1, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);
    output = softmax(m, axes = [1]) + sigmoid(m) ^ 2.0;
    n = reshape(s2, shape = [1, -1], axis_start = 0);
}
"""


@pytest.mark.parametrize("lowered", [[], ["softmax", "sigmoid", "relu"], ["softmax", "sigmoid", "relu", "max", "sqr"]])
def test_compositional_document_matches_khronos(lowered):
    ours = _ours(COMPOSITIONAL, set(lowered))
    theirs = _khronos_graph(COMPOSITIONAL, lowered + ["block", "pick"])
    assert canonical_ours(ours) == canonical_khronos(theirs)
    assert set(ours.outputs) == {"output", "idx", "n"}
    assert ours.tensors["n"].shape == (1, 512)


def test_graph_identifiers_name_their_tensors_and_temporaries_do_not_clash():
    graph = _ours(COMPOSITIONAL, set())
    assert {"input", "w", "a", "b", "s1", "s2", "m", "idx", "output", "n"} <= set(graph.tensors)
    produced = [ref.name for op in graph.operations for ref in op.output_refs()]
    assert len(produced) == len(set(produced))


def test_custom_fragment_can_stay_atomic_and_is_recorded():
    graph = lower(parse_document(COMPOSITIONAL), atomic=lambda name: name in standard_fragments() or name == "block")
    assert [op.name for op in graph.operations].count("block") == 1
    assert [fragment.name for fragment in graph.custom_fragments] == ["block"]


def test_custom_op_without_body_has_unknown_shapes_unless_a_rule_is_given():
    text = HEADER + """fragment my_op( x: tensor<scalar>, k: integer ) -> ( y: tensor<scalar> );
graph G( x ) -> ( z ) { x = external(shape = [2, 3]); y = my_op(x, k = 2); z = relu(y); }"""
    graph = lower(parse_document(text))
    assert graph.tensors["z"].shape is None
    shaped = lower(parse_document(text), custom_shapes={"my_op": lambda x, *, k: (x[0] * k, x[1])})
    assert shaped.tensors["z"].shape == (4, 3)


def test_updates_and_shared_labels_make_the_signature():
    text = """version 1.0;
graph G( x ) -> ( y )
{
    x = external(shape = [1, 4]);
    state = variable(shape = [1, 4], label = 'rnn/state');
    again = variable(shape = [1, 4], label = 'RNN/State');
    s = add(state, x);
    y = mul(s, again);
    new = update(state, s);
}"""
    graph = lower(parse_document(text))
    signature = graph.signature
    assert [e.name for e in signature.externals] == ["x"]
    assert [v.name for v in signature.variables] == ["state", "again"]
    assert list(graph.shared_variables()) == ["rnn/state"]
    assert [(u.variable, u.value, u.result) for u in signature.updates] == [("state", "s", "new")]


def test_shared_label_with_different_shape_is_rejected():
    text = """version 1.0;
graph G( x ) -> ( y ) { x = external(shape = [1]); a = variable(shape = [2], label = 'w');
b = variable(shape = [3], label = 'W'); y = add(a, x); }"""
    with pytest.raises(NNEFShapeError, match="share label"):
        lower(parse_document(text))


def test_update_of_a_non_variable_is_rejected():
    text = """version 1.0;
graph G( x ) -> ( y ) { x = external(shape = [1]); y = update(x, x); }"""
    with pytest.raises(NNEFSemanticError, match="not a variable"):
        lower(parse_document(text))


def test_input_shapes_replace_external_shapes_and_propagate():
    require_conformance()
    text = (conformance_cases()[0].parent / "conv3x3" / "graph.nnef").read_text()
    graph = lower(parse_document(text), input_shapes={"input": [2, 8, 17, 9]})
    assert graph.signature.externals[0].shape == (2, 8, 17, 9)
    assert graph.tensors["output"].shape == (2, 16, 17, 9)
    theirs = _khronos_graph(text, [])
    khronos().infer_shapes(theirs, external_shapes={"input": [2, 8, 17, 9]})
    assert {n: t.shape for n, t in graph.tensors.items()} == {n: tuple(t.shape) for n, t in theirs.tensors.items()}


def test_literal_inputs_stay_literals_and_defaults_are_filled():
    graph = _ours(_document("y = conv(x, constant(shape = [2, 4, 1, 1], value = [1.0]));"), set())
    conv = next(op for op in graph.operations if op.name == "conv")
    assert conv.inputs["bias"] == 0.0 and isinstance(conv.inputs["input"], Ref)
    assert conv.attribs == {"border": "constant", "padding": [], "stride": [], "dilation": [], "groups": 1}


def test_roi_align_expands_to_a_spatial_pool():
    body = dict(COMPOUND_CALLS)["avg_roi_align"]
    graph = _ours(_document(body), {"avg_roi_align"})
    pool = next(op for op in graph.operations if op.name == "avg_pool")
    assert pool.attribs["size"] == [1, 1, 1, 2] and pool.attribs["stride"] == [1, 1, 1, 2]
    assert graph.tensors["y"].shape == (1, 4, 3, 3)


def test_unary_minus_binds_tighter_than_binary_minus_unlike_khronos():
    """zero_point_linear_quantize clamps signed asymmetric 8-bit codes to [-r - 1, r] = [-128, 127]. The Khronos
    parser (nnef 1.0.10) folds `-r - 1.0` to +126, so its expansion clamps from below at 126."""
    text = _document("y = zero_point_linear_quantize(x, 0, 0.1, bits = 8, signed = true, symmetric = false);")
    ours = _ours(text, {"zero_point_linear_quantize", "clamp", "max"})
    assert any(op.name == "gt" and op.inputs["y"] == -128.0 for op in ours.operations)
    theirs = _khronos_graph(text, ["zero_point_linear_quantize", "clamp", "max"])
    assert any(op.name == "gt" and op.inputs["y"] == 126.0 for op in theirs.operations)


def test_shape_of_reads_the_inferred_shape():
    text = _document("s = slice(x, axes = [2], begin = [1], end = [5]); y = reshape(s, shape = [shape_of(s)[2], -1]);")
    assert _ours(text, set()).tensors["y"].shape == (4, 32)


def test_tensor_typed_literals_become_operations_like_their_static_type_says():
    """Inside batch_normalization, `variance + epsilon` is a tensor expression even when both are literals."""
    graph = _ours(_document("y = batch_normalization(x, 0.5, 2.0, 0.1, 1.5, epsilon = 0.001);"),
                  {"batch_normalization"})
    add = next(op for op in graph.operations if op.name == "add")
    assert add.inputs == {"x": 2.0, "y": 0.001}
