"""forward_sequence: from the outputs, each function once its inputs are ready, dead functions never visited, two
writers of one variable refused; execute_on_proto calls back in that order."""
from __future__ import annotations

import pytest

from nnef_torch import graph_def
from nnef_torch.errors import NNEFSemanticError

BRANCHY = """version 1.0;
graph G( x ) -> ( y )
{
    x = external(shape = [1, 4]);
    dead = exp(x);
    deader = log(dead);
    b = relu(x);
    a = sigmoid(x);
    c = add(a, b);
    y = mul(c, b);
}
"""


@pytest.fixture
def network(tmp_path):
    (tmp_path / "g.nnef").write_text(BRANCHY)
    return graph_def.load(tmp_path / "g.nnef").default_graph()


def test_each_function_after_the_writers_of_its_inputs(network):
    order = [f.name for f in network.forward_sequence()]
    assert order == ["b", "a", "c", "y"]
    position = {name: i for i, name in enumerate(order)}
    for function in network.forward_sequence():
        for name in function.inputs:
            if name in network.functions:
                assert position[name] < position[function.name]


def test_functions_reaching_no_output_are_not_visited(network):
    assert {"dead", "deader"} <= set(network.functions)
    assert not {"dead", "deader"} & {f.name for f in network.forward_sequence()}


def test_execute_on_proto_calls_back_in_order(network):
    seen = []
    network.execute_on_proto(lambda f: seen.append((f.name, f.type)))
    assert seen == [("b", "relu"), ("a", "sigmoid"), ("c", "add"), ("y", "mul")]


def test_two_writers_of_one_variable_are_refused(network):
    network.functions["a"].outputs = ["b"]
    with pytest.raises(NNEFSemanticError, match="'b' is written by two functions"):
        list(network.forward_sequence())


def test_updates_are_visited(tmp_path):
    (tmp_path / "g.nnef").write_text("""version 1.0;
graph G( x ) -> ( y )
{
    x = external(shape = [1, 2]);
    s = variable(shape = [1, 2], label = 's');
    t = add(s, x);
    y = relu(x);
    s1 = update(s, t);
}
""")
    network = graph_def.load(tmp_path / "g.nnef", exclude_parameter=True).default_graph()
    assert [f.type for f in network.forward_sequence()] == ["add", "relu", "update"]
    assert network.parameters["s"].kind == "buffer"
