"""graph.quant: read, print, round trip, and agreement with the Khronos parser's reading."""
from __future__ import annotations

import pytest
from khronos import khronos
from test_bad_inputs import Bad, _check, body

from nnef_torch.errors import NNEFError, NNEFQuantizationError
from nnef_torch.format.quant_file import QuantSpec, print_quantization, read_quantization
from nnef_torch.reader import read_graph
from nnef_torch.stdlib import standard_fragments

GRAPH = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 3, 8, 8]);
    filter = variable(shape = [4, 3, 3, 3], label = 'conv/filter');
    conv = conv(input, filter);
    output = relu(conv);
}
"""
QUANT = """"input": linear_quantize(min = -1.0, max = 1.0, bits = 8);
"filter": zero_point_linear_quantize(zero_point = [0, 1, 2, 3], scale = [0.5, 0.25, 0.125, 1.0], bits = 8, signed = true, symmetric = false);
"conv": min_max_linear_quantize(min = 0.0, max = 6.0, bits = 4, signed = false, symmetric = false);
"output": logarithmic_quantize(max = 8.0, bits = 5);
"""


def test_read_gives_each_entry_with_all_arguments():
    specs = read_quantization(QUANT, standard_fragments())
    assert specs["input"] == QuantSpec("linear_quantize", {"min": -1.0, "max": 1.0, "bits": 8})
    assert specs["filter"].args["zero_point"] == [0, 1, 2, 3]
    assert specs["filter"].args["scale"] == [0.5, 0.25, 0.125, 1.0]
    assert specs["output"] == QuantSpec("logarithmic_quantize", {"max": 8.0, "bits": 5})


def test_print_read_round_trip():
    specs = read_quantization(QUANT, standard_fragments())
    text = print_quantization(specs)
    assert read_quantization(text, standard_fragments()) == specs
    assert print_quantization(read_quantization(text, standard_fragments())) == text


def test_khronos_reads_the_same_quantization():
    nnef = khronos()
    ours = read_graph(GRAPH, quant_text=QUANT).quantization
    for text in (QUANT, print_quantization(ours)):
        graph = nnef.parse_string(GRAPH, text)
        theirs = {name: tensor.quantization for name, tensor in graph.tensors.items() if tensor.quantization}
        assert set(theirs) == set(ours)
        for name, spec in ours.items():
            assert theirs[name]["op-name"] == spec.op
            for key, value in spec.args.items():
                assert theirs[name][key] == pytest.approx(value)


# ---- graph.quant (spec 5.3) --------------------------------------------------------------------------------

# A graph whose tensors the quantization rows name, for the Khronos check.
QUANT_GRAPH = body("output = relu(input);")
LQ = "linear_quantize(min = 0.0, max = 1.0, bits = 8)"

QUANT_ROWS = [
    Bad("quant_missing_semicolon", f'"output": {LQ}\n"input": {LQ};\n', NNEFQuantizationError, 1, 58,
        "expected ';'"),
    Bad("quant_missing_colon", f'"output" {LQ};\n', NNEFQuantizationError, 1, 10, "expected ':'"),
    Bad("quant_bad_character", f'"output": {LQ}; $\n', NNEFQuantizationError, 1, 60, "unexpected character '$'"),
    Bad("quant_unknown_operation", '"output": fancy_quantize(bits = 8);\n', NNEFQuantizationError, 1, 11,
        "unknown quantization operation 'fancy_quantize'"),
    Bad("quant_positional_argument", '"output": linear_quantize(0.0, max = 1.0, bits = 8);\n',
        NNEFQuantizationError, 1, 27, "must be named"),
    Bad("quant_unknown_parameter", '"output": linear_quantize(min = 0.0, max = 1.0, bits = 8, signed = true);\n',
        NNEFQuantizationError, 1, 59, "no parameter 'signed'"),
    Bad("quant_duplicate_parameter", '"output": linear_quantize(min = 0.0, min = 1.0, bits = 8);\n',
        NNEFQuantizationError, 1, 38, "'min' is given twice"),
    Bad("quant_missing_parameter", '"output": linear_quantize(min = 0.0, max = 1.0);\n', NNEFQuantizationError,
        1, 11, "needs 'bits'"),
    Bad("quant_wrong_type", '"output": linear_quantize(min = 0.0, max = 1.0, bits = 8.5);\n', NNEFQuantizationError,
        1, 56, "'bits' must be integer, found scalar 8.5"),
    Bad("quant_identifier_value", '"output": linear_quantize(min = x, max = 1.0, bits = 8);\n',
        NNEFQuantizationError, 1, 33, "must be a literal"),
    Bad("quant_tensor_twice", f'"output": {LQ};\n"output": {LQ};\n', NNEFQuantizationError, 2, 1,
        "'output' is quantized twice"),
    Bad("quant_standard_op_that_is_not_a_quantizer", '"output": relu();\n', NNEFQuantizationError, 1, 11,
        "unknown quantization operation 'relu'"),
]


@pytest.mark.parametrize("row", QUANT_ROWS, ids=[row.id for row in QUANT_ROWS])
def test_bad_quantization_is_rejected_at_its_position(row: Bad):
    with pytest.raises(NNEFError) as info:
        read_quantization(row.text, standard_fragments())
    _check(info.value, row, "graph.quant")



# A file that does not begin as graph.quant does (a quoted tensor name) may be no quantization file at all: the
# error quotes nothing of it (neither a token nor the line).
NOT_QUANT = {"key_not_a_string": f'output: {LQ};\n', "unterminated_key": f'"output: {LQ};\n',
             "password_file": "root:x:0:0:root:/root:/bin/bash\n", "binary": "\x00\x01secret"}


@pytest.mark.parametrize("name", sorted(NOT_QUANT))
def test_file_not_beginning_as_graph_quant_is_refused_quoting_nothing(name):
    text = NOT_QUANT[name]
    with pytest.raises(NNEFQuantizationError, match="start of a quantization file") as info:
        read_quantization(text, standard_fragments(), "x.quant")
    shown = str(info.value)
    assert info.value.location.file == "x.quant" and "\n" not in shown
    assert not any(word in shown for word in ("output", "root", "secret", "linear"))


@pytest.mark.parametrize("row", QUANT_ROWS, ids=[row.id for row in QUANT_ROWS])
def test_khronos_rejects_bad_quantization(row: Bad):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    with pytest.raises(nnef.Error):
        nnef.parse_string(QUANT_GRAPH, row.text)


def test_keys_must_name_graph_tensors_not_labels():
    with pytest.raises(NNEFQuantizationError, match="not a tensor of the graph") as info:
        read_graph(GRAPH, quant_text='"conv/filter": linear_quantize(min = 0.0, max = 1.0, bits = 8);')
    assert info.value.location.line == 1


def test_document_fragment_may_serve_as_quantization():
    graph = "version 1.0;\nextension KHR_enable_fragment_definitions;\n" \
            "fragment my_quant( x: tensor<scalar>, step: scalar ) -> ( y: tensor<scalar> );\n" + GRAPH.split("\n", 1)[1]
    specs = read_graph(graph, quant_text='"conv": my_quant(step = 0.5);').quantization
    assert specs["conv"] == QuantSpec("my_quant", {"step": 0.5})
