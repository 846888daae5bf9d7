"""graph.quant: read, print, round trip, and agreement with the Khronos parser's reading."""
from __future__ import annotations

import pytest

from khronos import khronos
from nnef_torch.errors import NNEFQuantizationError
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


@pytest.mark.parametrize("text,message,column", [
    ('"input": foo(bits = 8);', "unknown quantization operation 'foo'", 10),
    ('"input": linear_quantize(min = 0.0, max = 1.0);', "needs 'bits'", 10),
    ('"input": linear_quantize(0.0, max = 1.0, bits = 8);', "must be named", 26),
    ('"input": linear_quantize(min = 0.0, max = 1.0, bits = 8, gain = 2.0);', "no parameter 'gain'", 58),
    ('"input": linear_quantize(min = x, max = 1.0, bits = 8);', "literal", 32),
    ('"input": linear_quantize(min = 0.0, max = 1.0, bits = 8.0);', "must be integer", 55),
    ('"input": linear_quantize(min = 0.0, max = 1.0, bits = 8)', "expected ';'", 57),
    ('input: linear_quantize(min = 0.0, max = 1.0, bits = 8);', "expected a string", 1),
    ('"input": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n"input": linear_quantize(min = 0.0, max = 1.0, '
     'bits = 8);', "quantized twice", 1),
    ('"input": relu();', "unknown quantization operation 'relu'", 10),
])
def test_bad_quantization_is_reported_with_position(text, message, column):
    with pytest.raises(NNEFQuantizationError, match=message) as info:
        read_quantization(text, standard_fragments())
    assert info.value.location.file == "graph.quant"
    assert info.value.location.column == column
    assert "^" in str(info.value)


def test_keys_must_name_graph_tensors_not_labels():
    with pytest.raises(NNEFQuantizationError, match="not a tensor of the graph") as info:
        read_graph(GRAPH, quant_text='"conv/filter": linear_quantize(min = 0.0, max = 1.0, bits = 8);')
    assert info.value.location.line == 1


def test_document_fragment_may_serve_as_quantization():
    graph = "version 1.0;\nextension KHR_enable_fragment_definitions;\n" \
            "fragment my_quant( x: tensor<scalar>, step: scalar ) -> ( y: tensor<scalar> );\n" + GRAPH.split("\n", 1)[1]
    specs = read_graph(graph, quant_text='"conv": my_quant(step = 0.5);').quantization
    assert specs["conv"] == QuantSpec("my_quant", {"step": 0.5})
