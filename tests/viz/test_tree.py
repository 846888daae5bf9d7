"""The terminal tree, checked against the IR graph: one line per node in the graph's order, with the output types
from graph.tensors, fragment invocations nesting their operations, and nothing a name holds can add a line."""
from __future__ import annotations

import re

import pytest

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.reader import read_graph
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.scene import BIND, FUNCTION, GET_ITEM, IF, LET, TUPLE, Edge, Node, Scene, TensorType
from nnef_torch.viz.tree import tree_text

NESTED = """version 1.0;
extension KHR_enable_fragment_definitions;
fragment inner( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { t = relu(x); y = add(t, x); }
fragment outer( x: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar> ) { a = inner(x); y = mul(a, w); }
graph nested( input ) -> ( out, mean, variance )
{
    input = external<scalar>(shape = [1, 3]);
    w = variable<scalar>(shape = [1, 3], label = 'w');
    h = outer(input, w);
    out = inner(h);
    mean, variance = moments(out, axes = [1]);
}
"""
LINE = re.compile(r"^((?:│   |    )*)(?:├── |└── )(.*)$")
DECLARATIONS = ("external", "variable")


def parse(text):
    """(depth, text) of every line below the header."""
    lines = text.rstrip("\n").split("\n")
    parsed = []
    for line in lines[1:]:
        match = LINE.match(line)
        assert match, line
        parsed.append((len(match.group(1)) // 4, match.group(2)))
    return lines[0], parsed


def type_text(graph, name):
    tensor = graph.tensors[name]
    return f"{tensor.dtype}[{','.join(map(str, tensor.shape))}]"


def operation_lines(parsed):
    """The lines of the operations section (depth >= 1 until the next section)."""
    start = parsed.index((0, "operations"))
    end = next((i for i in range(start + 1, len(parsed)) if parsed[i][0] == 0), len(parsed))
    return parsed[start + 1:end]


@pytest.fixture(scope="module")
def demo():
    return nnef_torch.read_model(demo_model_path()).graph


def test_one_line_per_node_in_graph_order(demo):
    header, parsed = parse(tree_text(scene_of(demo)))
    assert header == "graph tiny_cnn( image ) -> ( probabilities )"
    assert len(parsed) == 4 + len(demo.operations) + len(demo.outputs)
    assert [text for depth, text in parsed if depth == 0] == ["inputs", "variables", "operations", "outputs"]
    ops = [op for op in demo.operations if op.name not in DECLARATIONS]
    lines = operation_lines(parsed)
    assert len(lines) == len(ops)
    for (depth, text), op in zip(lines, ops):
        name = next(iter(op.outputs.values())).name
        assert depth == 1
        assert text.startswith(f"{name} = {op.name}(")
        assert text.split("  [")[0].endswith(f") -> {type_text(demo, name)}")


def test_operation_line_format(demo):
    _, parsed = parse(tree_text(scene_of(demo)))
    texts = {text.split(" = ")[0]: text for _, text in parsed}
    assert texts["conv1"] == ("conv1 = conv(image, conv1_filter, conv1_bias; padding = [(1, 1), (1, 1)]) "
                              "-> scalar[1,8,16,16]")
    assert texts["logits"] == "logits = linear(flat, fc_weight, fc_bias) -> scalar[1,4]"
    assert texts["pool1"] == ("pool1 = max_pool(relu1; size = [1, 1, 2, 2], border = 'ignore', "
                              "stride = [1, 1, 2, 2]) -> scalar[1,8,8,8]")


def test_quantization_appended(demo):
    _, parsed = parse(tree_text(scene_of(demo)))
    for name, spec in demo.quantization.items():
        quant = f"  [{spec.op}({', '.join(f'{k} = {v}' for k, v in spec.args.items())})]"
        owners = [text for _, text in parsed if text.startswith((f"{name} = ", f"{name}: "))]
        assert owners and all(text.endswith(quant) for text in owners)
    assert sum("  [linear_quantize(" in text for _, text in parsed) == len(demo.quantization)


def test_declarations(demo):
    _, parsed = parse(tree_text(scene_of(demo)))
    texts = [text for _, text in parsed]
    assert "conv1_filter: scalar[8,1,3,3]  'conv1/filter'" in texts
    assert parsed[-1] == (1, f"probabilities: {type_text(demo, 'probabilities')}")


def test_fragment_invocations_nest():
    graph = read_graph(NESTED)
    text = tree_text(scene_of(graph))
    _, parsed = parse(text)
    invocations = {scope for op in graph.operations for scope in op.scope}
    assert len(parsed) == 4 + len(graph.operations) + len(graph.outputs) + len(invocations)
    lines = operation_lines(parsed)
    expected, opened = [], ()
    for op in graph.operations:
        if op.name in DECLARATIONS:
            continue
        common = 0
        while common < min(len(op.scope), len(opened)) and op.scope[common] == opened[common]:
            common += 1
        for depth in range(common, len(op.scope)):
            expected.append((depth + 1, op.scope[depth]))
        opened = op.scope
        expected.append((len(op.scope) + 1, ", ".join(ref.name for ref in op.outputs.values())))
    assert [(depth, text.split(" ")[0].rstrip(",")) for depth, text in lines] == \
           [(depth, name.split(",")[0]) for depth, name in expected]
    assert "mean, variance = moments(out; axes = [1]) -> (scalar[1,1], scalar[1,1])" in text
    # box drawing: the last entry of each list starts with └── (lists: the sections, each section, each invocation)
    assert text.count("└── ") == 1 + 4 + len(invocations)
    for line in text.split("\n"):
        assert "└──" not in line or not line.split("└──")[0].endswith("│")


def test_collapsed_fragments_are_one_line_each():
    graph = read_graph(NESTED)
    _, parsed = parse(tree_text(scene_of(graph, collapse=True)))
    lines = operation_lines(parsed)
    assert [text.split(" = ")[1].split("(")[0] for _, text in lines] == ["outer", "inner", "moments"]
    assert all(depth == 1 for depth, _ in lines)


def test_relayviz_kinds_name_their_fields():
    kinds = [FUNCTION, TUPLE, GET_ITEM, LET, IF, BIND]
    nodes = {0: Node(0, "input", "x", outputs=[TensorType("x", "float32", (2,))])}
    nodes.update({i + 1: Node(i + 1, kind, f"{kind}_{i + 1}", None, {"index": 0} if kind == GET_ITEM else {})
                  for i, kind in enumerate(kinds)})
    edges = [Edge(0, 5, "cond", "x"), Edge(0, 5, "then"), Edge(0, 2, "fields[0]", "x")]
    _, parsed = parse(tree_text(Scene("relay", nodes, edges)))
    texts = [text for _, text in parsed]
    assert "if_5 = if(cond: x, then: x)" in texts
    assert "tuple_2 = tuple(fields[0]: x)" in texts
    assert "get_item_3 = get_item(index = 0)" in texts
    assert len(parsed) == 2 + len(nodes)


def test_names_cannot_break_lines():
    name = "two\nlines\r"
    scene = Scene("g\n", {0: Node(0, "input", name, "external", outputs=[TensorType(name, "scalar", (1,))]),
                          1: Node(1, "operation", "r", "relu", outputs=[TensorType("r", "scalar", (1,))],
                                  scope=("f\n#1",))}, [Edge(0, 1, "x", name)], {"f\n#1": "f\n: r"})
    text = tree_text(scene)
    assert len(text.rstrip("\n").split("\n")) == 1 + 2 + 3
    assert "two\\x0alines\\x0d" in text


def test_twenty_thousand_operations():
    count = 20_000
    lines = ["version 1.0;", f"graph chain( x ) -> ( t{count - 1} )", "{", "    x = external<scalar>(shape = [1, 8]);",
             "    t0 = relu(x);"]
    lines.extend(f"    t{i} = add(t{i - 1}, x);" if i % 2 else f"    t{i} = relu(t{i - 1});" for i in range(1, count))
    graph = read_graph("\n".join(lines + ["}"]))
    _, parsed = parse(tree_text(scene_of(graph)))
    assert len(parsed) == 3 + count + 2
    assert parsed[-3] == (1, f"t{count - 1} = add(t{count - 2}, x) -> scalar[1,8]")
