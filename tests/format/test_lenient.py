"""The lenient reading of what real NNEF producers write (nnef_torch.ir.deviations): each deviation loads with one
warning naming the file, line and rule, and gives what the producer's consumer computes; strict reading and
`validate --strict` refuse it with a location; deviations with no sound meaning stay errors.

The fixtures under producers/ were written by nnef_tools' ONNX converter and torch_to_nnef's KhronosNNEF target
(producers/make_fixtures.py); their expected outputs by the nnef_tools interpreter, tract, or (tract 0.23 has no
`erf`) the exported torch module.
"""
from __future__ import annotations

import cProfile
import pstats
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import main
from nnef_torch.errors import NNEFDeviationWarning, NNEFError, NNEFSemanticError
from nnef_torch.reader import read_graph, read_model

PRODUCERS = Path(__file__).parent / "producers"

# fixture -> {rule: pattern of the text where it is met (its line is the warning's)}
EXPECTED = {
    "khronos_rotary": {"split-zero-ratio": r"ratios = \[8, 0\]"},
    "khronos_dot": {"matmul-1d": r"= matmul\("},
    "t2n_softmax": {"positional-attribute": r"softmax\(", "item-for-array": r"softmax\("},
    "t2n_block": {"redefined-standard-op": r"^fragment gelu", "erf": r"erf\(", "tensor-attribute": r"eps = var",
                  "positional-attribute": r"= softmax\(", "item-for-array": r"= softmax\(",
                  "surplus-argument": r"= gelu\("},
}


def line_of(folder: Path, pattern: str) -> int:
    text = (folder / "graph.nnef").read_text()
    return text.count("\n", 0, re.search(pattern, text, flags=re.M).start()) + 1


def deviations(caught: list[warnings.WarningMessage]) -> list[NNEFDeviationWarning]:
    return [w.message for w in caught if isinstance(w.message, NNEFDeviationWarning)]


def recorded(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, deviations(caught)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_loads_with_its_warnings_and_the_consumers_output(name):
    folder = PRODUCERS / name
    module, found = recorded(lambda: nnef_torch.load(folder))
    graph_file = str(folder / "graph.nnef")
    expected = {(rule, line_of(folder, pattern)) for rule, pattern in EXPECTED[name].items()}
    assert {(w.rule, w.location.line) for w in found} == expected
    assert len(found) == len(expected)  # one warning each
    for w in found:
        assert w.location.file == graph_file and w.location.column is not None
        assert str(w).startswith(f"{graph_file}:{w.location.line}:{w.location.column}: warning:")
        assert f"[{w.rule}]" in str(w)
    inputs = [torch.from_numpy(np.load(path)) for path in sorted(folder.glob("input_*.npy"))]
    with torch.no_grad():
        output = module(*inputs)
    output = output[0] if isinstance(output, (tuple, list)) else output
    expected_output = np.load(folder / "expected_0.npy")
    assert tuple(output.shape) == expected_output.shape
    np.testing.assert_allclose(output.numpy(), expected_output, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_strict_reading_refuses_the_fixture_at_its_first_deviation(name):
    folder = PRODUCERS / name
    first = min(line_of(folder, pattern) for pattern in EXPECTED[name].values())
    with pytest.raises(NNEFError) as caught:
        read_model(folder, lenient=False)
    assert caught.value.location.file == str(folder / "graph.nnef")
    assert caught.value.location.line == first and caught.value.location.column is not None
    with pytest.raises(NNEFError):
        nnef_torch.load(folder, lenient=False)


def test_validate_is_lenient_and_strict_on_request(capsys):
    folder = str(PRODUCERS / "t2n_block")
    assert main(["validate", folder]) == 0
    out, err = capsys.readouterr()
    assert "read leniently, 6 deviations" in out and "--strict refuses them" in out
    assert len(re.findall(r"graph\.nnef:\d+:\d+: warning: .*\[[a-z0-9-]+\]", err)) == 6
    assert main(["validate", "--strict", folder]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "note: without --strict this is read with a warning" in err


def test_fixtures_hold_their_deviations():
    """The producers really wrote what each fixture is for (its strict reading fails on that rule too)."""
    for name, rules in EXPECTED.items():
        text = (PRODUCERS / name / "graph.nnef").read_text()
        for pattern in rules.values():
            assert re.search(pattern, text, flags=re.M), (name, pattern)


def _graph(body: str, head: str = "") -> str:
    return f"version 1.0;\n{head}\ngraph G(x) -> (y)\n{{\n    x = external<scalar>(shape = [2, 3]);\n{body}}}\n"


def _load_text(tmp_path: Path, text: str, **options):
    (tmp_path / "graph.nnef").write_text(text)
    return nnef_torch.load(tmp_path, **options)


def test_nested_invocation_without_extension(tmp_path):
    text = _graph("    y = relu(neg(x));\n")
    module, found = recorded(lambda: _load_text(tmp_path, text))
    assert [(w.rule, w.location.line, w.location.column) for w in found] == [("operator-expressions", 6, 14)]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(module(torch.from_numpy(x)).numpy(), np.maximum(-x, 0))
    with pytest.raises(NNEFError, match="operator expressions need") as caught:
        read_graph(text, lenient=False)
    assert (caught.value.location.line, caught.value.location.column) == (6, 14)
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    nnef.parse_string(text)  # the Khronos parser takes it as it is


def test_duplicate_assignment_with_identical_right_hand_side(tmp_path):
    text = _graph("    y = tanh(x);\n    y = tanh(x);\n")
    module, found = recorded(lambda: _load_text(tmp_path, text))
    assert [(w.rule, w.location.line) for w in found] == [("duplicate-assignment", 7)]
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(module(torch.from_numpy(x)).numpy(), np.tanh(x), rtol=1e-6)
    assert [op.name for op in module.nnef.graph.operations] == ["external", "tanh"]
    with pytest.raises(NNEFError, match="assigned more than once"):
        read_graph(text, lenient=False)


def test_duplicate_assignment_with_another_right_hand_side_is_an_error():
    text = _graph("    y = tanh(x);\n    y = relu(x);\n")
    with pytest.raises(NNEFError, match="'y' is assigned more than once") as caught:
        read_graph(text)
    assert caught.value.location.line == 7


def test_duplicate_assignment_of_a_long_chain_is_compared_without_recursion():
    """Regression: the two right-hand sides were compared recursively, and a chain of 3000 links ended in
    RecursionError."""
    chain = "x" + " + 1.0" * 3000
    text = _graph(f"    y = {chain};\n    y = {chain};\n", "extension KHR_enable_operator_expressions;\n")
    graph, found = recorded(lambda: read_graph(text))
    assert [(w.rule, w.location.line) for w in found] == [("duplicate-assignment", 8)]
    assert len(graph.operations) == 3001  # the external and one chain


def test_external_declared_twice_is_refused_even_leniently():
    """Regression: a repeated `external` was read as an identical duplicate; declaring an input twice is an
    error in both readings, at the second declaration."""
    text = _graph("    x = external<scalar>(shape = [2, 3]);\n    y = tanh(x);\n")
    for lenient in (True, False):
        with pytest.raises(NNEFSemanticError, match="graph input 'x' is declared by external more than once") \
                as caught:
            read_graph(text, lenient=lenient)
        assert (caught.value.location.line, caught.value.location.column) == (6, 5)


def _calls(text: str) -> int:
    """The function calls reading `text` takes (a measure of work that does not depend on the machine)."""
    profile = cProfile.Profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NNEFDeviationWarning)
        profile.enable()
        try:
            read_graph(text)
        finally:
            profile.disable()
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values())


def _epsilon_uses(n: int, copies: int) -> str:
    """`n` statements passing the constant tensor `e` (at the end of a chain of `copies` copies) as epsilon."""
    lines = ["    e0 = constant<scalar>(shape = [], value = [0.5]);\n"]
    lines += [f"    e{i} = copy(e{i - 1});\n" for i in range(1, copies + 1)]
    lines += ["    h0 = copy(x);\n"] + [f"    h{i} = batch_normalization(h{i - 1}, 0.0, 1.0, 0.0, 1.0, "
                                         f"epsilon = e{copies});\n" for i in range(1, n + 1)]
    return _graph("".join(lines) + f"    y = copy(h{n});\n")


@pytest.mark.parametrize("n, copies", [(300, 0), (50, 50)], ids=["constant", "through_copies"])
def test_tensor_attribute_uses_take_linear_work(n, copies):
    """Regression: each use looked for the tensor's producer among every operation written so far (and along
    its copies), so 16k uses took minutes. Work counted at n and 4n uses (and copies): about 4 times, not 16
    (or 64 along copies)."""
    small, large = _calls(_epsilon_uses(n, copies)), _calls(_epsilon_uses(4 * n, 4 * copies))
    assert large < 6 * small, (small, large)


def test_constant_tensor_epsilon_is_its_value(tmp_path):
    head = ""
    text = _graph("    e = constant<scalar>(shape = [], value = [0.5]);\n"
                  "    y = batch_normalization(x, 0.0, 1.0, 0.0, 1.0, epsilon = e);\n", head)
    module, found = recorded(lambda: _load_text(tmp_path, text))
    assert [(w.rule, w.location.line) for w in found] == [("tensor-attribute", 7)]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(module(torch.from_numpy(x)).numpy(), x / np.sqrt(1.0 + 0.5), rtol=1e-6)


def test_tensor_epsilon_that_is_not_a_constant_is_an_error():
    text = _graph("    e = abs(x);\n    y = batch_normalization(x, 0.0, 1.0, 0.0, 1.0, epsilon = e);\n")
    with pytest.raises(NNEFError, match="must be a compile-time constant") as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NNEFDeviationWarning)
            read_graph(text)
    assert caught.value.location.line == 7


def test_tensor_epsilon_of_several_items_is_refused_before_its_data_is_read(tmp_path):
    """The variable's .dat is absent: the declared shape alone refuses it (no read, whatever its size)."""
    text = _graph("    e = variable<scalar>(shape = [1000, 1000], label = 'e');\n"
                  "    y = batch_normalization(x, 0.0, 1.0, 0.0, 1.0, epsilon = e);\n")
    with pytest.raises(NNEFError, match="a variable of several items") as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NNEFDeviationWarning)
            _load_text(tmp_path, text)
    assert caught.value.location.line == 7


def test_surplus_tensor_argument_is_an_error():
    with pytest.raises(NNEFError, match="takes at most 1 arguments"):
        read_graph(_graph("    y = relu(x, x);\n"))


def test_strict_reading_refuses_erf_and_a_redefined_standard_op():
    erf = _graph("    y = erf(x);\n")
    with pytest.raises(NNEFError, match="undefined operation 'erf'"):
        read_graph(erf, lenient=False)
    graph, found = recorded(lambda: read_graph(erf))
    assert [w.rule for w in found] == ["erf"] and graph.operations[-1].name == "erf"
    head = ("extension KHR_enable_fragment_definitions;\n"
            "fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = abs(x); }\n")
    redefined = _graph("    y = relu(x);\n", head)
    with pytest.raises(NNEFError, match="redefines a standard operation"):
        read_graph(redefined, lenient=False)
    graph, found = recorded(lambda: read_graph(redefined))
    assert [w.rule for w in found] == ["redefined-standard-op"]
    assert [op.name for op in graph.operations] == ["external", "abs"]  # the document's definition


@pytest.mark.parametrize("a_shape, b_shape", [((3,), (3,)), ((3,), (3, 4)), ((4, 3), (3,))])
def test_1d_matmul_follows_numpy(tmp_path, a_shape, b_shape):
    text = ("version 1.0;\ngraph G(a, b) -> (y)\n{\n"
            f"    a = external<scalar>(shape = {list(a_shape)});\n"
            f"    b = external<scalar>(shape = {list(b_shape)});\n"
            "    y = matmul(a, b);\n}\n")
    module, found = recorded(lambda: _load_text(tmp_path, text))
    assert [(w.rule, w.location.line) for w in found] == [("matmul-1d", 6)]
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    expected = np.matmul(a, b)
    assert module.nnef.graph.tensors["y"].shape == expected.shape
    np.testing.assert_allclose(module(torch.from_numpy(a), torch.from_numpy(b)).numpy(), expected, rtol=1e-5)


def test_zero_ratio_is_an_empty_chunk():
    text = _graph("    [a, b] = split(x, axis = 1, ratios = [3, 0]);\n    y = concat([b, a], axis = 1);\n")
    graph, found = recorded(lambda: read_graph(text))
    assert [(w.rule, w.location.line) for w in found] == [("split-zero-ratio", 6)]
    assert graph.tensors["b"].shape == (2, 0) and graph.tensors["y"].shape == (2, 3)
    with pytest.raises(NNEFError, match="strictly positive"):
        read_graph(_graph("    [a, b] = split(x, axis = 1, ratios = [0, 0]);\n    y = concat([b, a], axis = 1);\n"))
