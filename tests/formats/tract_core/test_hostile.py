"""tract_core documents built as an attacker would: each is read, or refused at its statement with a located
`NNEFError`, in linear work and without Python recursion. Cases that would hang or run out of memory before
their fix run in a child process with a generous timeout (a hang, not a time bound); linearity is checked by
counting function calls at n and 4n (cProfile), not by timing. The memory cases of the dialect are rows of
tests/test_hostile_inputs.py's COSTLY table."""
from __future__ import annotations

import cProfile
import os
import pstats
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import (
    NNEFDeviationWarning,
    NNEFError,
    NNEFSemanticError,
    NNEFShapeError,
    NNEFUnsupportedError,
)
from nnef_torch.reader import read_graph

pytestmark = pytest.mark.slow

HEAD = "version 1.0;\nextension tract_registry tract_core;\n"
FIXTURES = Path(__file__).parent / "fixtures"
PACKAGE_ROOT = Path(nnef_torch.__file__).parents[1]  # where the child imports the package from


def graph(*statements: str, definitions: str = "", params: str = "input", results: str = "output") -> str:
    """A tract_core document: `definitions` from line 3 on, then the graph (its statements one a line)."""
    lines = [f"graph G( {params} ) -> ( {results} )", "{"] + ["    " + s for s in statements] + ["}", ""]
    return HEAD + textwrap.dedent(definitions).strip("\n") + ("\n" if definitions else "") + "\n".join(lines)


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def calls(text: str) -> int:
    """The function calls reading `text` takes: a measure of work that does not depend on the machine."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        read_graph(text)
    finally:
        profile.disable()
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values())


def in_child(code: str, timeout: int = 120) -> str:
    """Run `code` in a child Python (a hang ends at `timeout`); its standard output."""
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)})
    assert child.returncode == 0, child.stderr[-3000:]
    return child.stdout


# ---- gathers whose indices are known when the model is read --------------------------------------------------

GATHERS = [
    ("index_past_the_end", "i = constant<integer>(shape = [2], value = [0, 3]);",
     "output = tract_core_gather(input, i, axis = 0);", "index 3"),
    ("index_before_the_start", "i = constant<integer>(shape = [1], value = [-4]);",
     "output = tract_core_gather(input, i, axis = 0);", "index -4"),
    ("index_from_shape_arithmetic", "i = tract_core_shape_of(input);",
     "output = tract_core_gather(input, i, axis = 0);", "index 3"),
    ("elements_index_past_the_end", "i = constant<integer>(shape = [3], value = [0, 1, 5]);",
     "output = tract_core_gather_elements(input, i, axis = 0);", "index 5"),
]


@pytest.mark.parametrize("case,indices,statement,needle", GATHERS, ids=[row[0] for row in GATHERS])
def test_constant_gather_index_out_of_range_is_refused_when_loading(case, indices, statement, needle, tmp_path):
    """Regression: the index was met at the first forward, as an IndexError (or RuntimeError) of torch."""
    text = graph("input = tract_core_external(shape = [3], datum_type = 'f32');", indices, statement)
    (tmp_path / "graph.nnef").write_text(text)
    with pytest.raises(NNEFShapeError, match=needle) as info:
        nnef_torch.load(tmp_path)
    location = info.value.location
    assert (location.line, location.column) == (line_of(text, statement), 14)
    assert "out of range" in info.value.message and "[3]" in info.value.message


def test_constant_gather_indices_in_range_load_and_run(tmp_path):
    text = graph("input = tract_core_external(shape = [3], datum_type = 'f32');",
                 "i = constant<integer>(shape = [3], value = [2, -3, 0]);",
                 "output = tract_core_gather(input, i, axis = 0);")
    (tmp_path / "graph.nnef").write_text(text)
    module = nnef_torch.load(tmp_path)
    torch.testing.assert_close(module(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([3.0, 1.0, 1.0]))


def test_positions_past_the_table_are_refused_when_loading():
    """The `positions` fixture gathers rows 0..S-1 of a 16-row table: S = 17 is refused at that gather (before,
    it loaded and failed at the first forward with an IndexError)."""
    folder = FIXTURES / "positions"
    nnef_torch.load(folder, input_shapes={"input": [1, 16]})
    with pytest.raises(NNEFShapeError, match="index 16 is out of range") as info:
        nnef_torch.load(folder, input_shapes={"input": [1, 17]})
    text = (folder / "graph.nnef").read_text()
    assert info.value.location.line == line_of(text, "pos__embedding0 = tract_core_gather(")


# ---- folding shape arithmetic -------------------------------------------------------------------------------

def folded_range(n: int, diamond: bool = False) -> str:
    """A range whose end is folded through `n` operations: a chain (`a_i = max(a_i-1, 0)`, end 3) or a diamond
    chain (`a_i = add(a_i-1, a_i-1)` from 0, end 0 + 3) that has 2^n paths."""
    lines = ["input = tract_core_external(shape = [2, 3], datum_type = 'f32');",
             "s = tract_core_shape_of(input);",
             "d = squeeze(slice(s, axes = [0], begin = [1], end = [2], stride = [1]), axes = [0]);",
             "a0 = sub(d, d);" if diamond else "a0 = copy(d);"]
    lines += [f"a{i} = add(a{i - 1}, a{i - 1});" if diamond else f"a{i} = max(a{i - 1}, 0);" for i in range(1, n + 1)]
    lines += [f"r = tract_core_range(0, add(a{n}, 3), 1);" if diamond else f"r = tract_core_range(0, a{n}, 1);",
              "output = tract_core_cast(r, to = 'f32');"]
    return graph(*lines)


def test_range_end_folded_through_a_long_chain():
    """Regression: folding recursed once per operation, and a chain of 2000 was refused as too deep."""
    g = read_graph(folded_range(2000))
    assert g.tensors[g.outputs[0]].shape == (3,)


def test_folding_a_diamond_chain_is_linear():
    """Regression: each path of the chain was folded again (2^n work); each tensor is folded once now."""
    assert read_graph(folded_range(4, diamond=True)).tensors["output"].shape == (3,)
    small, large = calls(folded_range(4, diamond=True)), calls(folded_range(16, diamond=True))
    assert large < 5 * small, (small, large)  # about 2^12 times the work before


def test_folding_is_charged_to_the_budget(monkeypatch):
    """Each operation folded is charged to the compile-time budget: with none left, the range's end is refused
    at the statement that folds it, with the budget's error."""
    from nnef_torch.ir import evaluate

    monkeypatch.setattr(evaluate.Budget, "BASE_STEPS", 0)
    monkeypatch.setattr(evaluate.Budget, "STEPS_PER_STATEMENT", 35)  # each statement here takes about 23
    text = folded_range(200)
    read_graph(text.replace("tract_core_range(0, a200, 1)", "tract_core_range(0, 3, 1)"))  # fits, unfolded
    with pytest.raises(NNEFSemanticError, match="compile-time evaluation takes more than") as info:
        read_graph(text)
    assert info.value.location.line == line_of(text, "r = tract_core_range(")


def test_range_bound_past_64_bits_is_not_folded():
    text = graph("input = tract_core_external(shape = [2, 3], datum_type = 'f32');",
                 "s = tract_core_shape_of(input);",
                 "big = mul(s, 4611686018427387904);",
                 "end = squeeze(slice(big, axes = [0], begin = [0], end = [1], stride = [1]), axes = [0]);",
                 "r = tract_core_range(0, end, 1);", "output = tract_core_cast(r, to = 'f32');")
    with pytest.raises(NNEFError, match="tract_core_range reads start, end and step known") as info:
        read_graph(text)  # before: folded as it wrapped around, to an empty range
    assert info.value.location.line == line_of(text, "r = tract_core_range(")


def test_range_of_more_items_than_the_limit_is_refused_before_it_is_built():
    text = graph("input = tract_core_external(shape = [2], datum_type = 'f32');",
                 "r = tract_core_range(0, 5000000, 1);", "output = tract_core_cast(r, to = 'f32');")
    with pytest.raises(NNEFShapeError, match="5,000,000, more than the limit") as info:
        read_graph(text)
    assert (info.value.location.line, info.value.location.column) == (line_of(text, "r = "), 9)


# ---- expressions and scans of any size ---------------------------------------------------------------------

def test_operator_chain_in_a_tract_document_is_read_without_recursion():
    """Regression: the dialect's rewriting of each statement recursed once per link (RecursionError)."""
    text = graph("input = tract_core_external(shape = [2], datum_type = 'f32');",
                 "output = tract_core_cast(input, to = 'i64') + 1" + " + 1" * 3000 + ";")
    g = read_graph(text)
    assert g.tensors[g.outputs[0]].dtype == "integer"


SCAN_BODY = """
fragment body( s: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = s * w;
}
"""


def test_scan_parameter_bound_twice_is_refused():
    """Regression: a body parameter bound by two items was read with the last one."""
    text = graph("input = tract_core_external(shape = [4, 2], datum_type = 'f32');",
                 '(output, last) = tract_core_scan(body = "body", scan = [("s", input, 0, 1)], '
                 'full = [("w", input), ("s", input)], state = [], output = [("y", "full", 0, 1), ("y", "last", 0, 1)]);',
                 definitions=SCAN_BODY, results="output, last")
    with pytest.raises(NNEFSemanticError, match="'s' is bound more than once") as info:
        read_graph(text)
    assert info.value.location.line == line_of(text, "(output, last)")


def _scan_with_full_bindings(count: int, steps: int) -> str:
    params = "".join(f", p{i}: tensor<scalar>" for i in range(count))
    definitions = f"fragment body( s: tensor<scalar>{params} ) -> ( y: tensor<scalar> )\n{{\n    y = copy(s);\n}}\n"
    full = ", ".join(f'("p{i}", input)' for i in range(count))
    return graph(f"input = tract_core_external(shape = [{steps}], datum_type = 'f32');",
                 f'(output, last) = tract_core_scan(body = "body", scan = [("s", input, 0, 1)], full = [{full}], '
                 'state = [], output = [("y", "full", 0, 1), ("y", "last", 0, 1)]);',
                 definitions=definitions, results="output, last")


def test_scan_unrolling_is_charged_to_the_budget_before_it_starts(tmp_path):
    """Regression: 4096 steps of a body of 2000 parameters (8 million bindings) were unrolled, with no budget;
    the unrolling is charged before its first step now, and refused at the scan."""
    text = _scan_with_full_bindings(2000, 4096)
    (tmp_path / "graph.nnef").write_text(text)
    out = in_child(f"""
        from nnef_torch.errors import NNEFError
        from nnef_torch.reader import read_graph
        try:
            read_graph(open({str(tmp_path / 'graph.nnef')!r}).read())
            print("accepted")
        except NNEFError as error:
            print(type(error).__name__, error.location.line, error.message)
    """)
    assert out.startswith(f"NNEFSemanticError {line_of(text, '(output, last)')} compile-time evaluation takes more"), out


def test_scan_of_no_step_is_refused():
    """Regression: a scanned input empty along its axis (a zero ratio of `split`, read leniently) gave no step,
    and its 'last' output an IndexError."""
    text = graph("input = tract_core_external(shape = [4], datum_type = 'f32');",
                 "[a, b] = split(input, axis = 0, ratios = [1, 0]);",
                 '(output, last) = tract_core_scan(body = "body", scan = [("s", b, 0, 1)], full = [("w", input)], '
                 'state = [], output = [("y", "last", 0, 1), ("y", "full", 0, 1)]);',
                 definitions=SCAN_BODY, results="output, last")
    with pytest.raises(NNEFShapeError, match="empty along their axis") as info:
        with pytest.warns(NNEFDeviationWarning, match="split-zero-ratio"):
            read_graph(text)
    assert info.value.location.line == line_of(text, "(output, last)")


def test_scan_of_a_few_steps_and_bindings_is_read():
    g = read_graph(_scan_with_full_bindings(3, 5))
    assert g.tensors[g.outputs[0]].shape == (5,) and g.tensors[g.outputs[1]].shape == (1,)


def test_scan_bindings_are_checked_in_linear_time():
    """Regression: each binding was looked up in a list of the others (45k bindings took minutes). 200k here, on
    the rule itself (a document that size takes seconds to parse): a quadratic check would not end in the
    timeout."""
    out = in_child("""
        from types import SimpleNamespace
        from nnef_torch.formats.tract_core import declarations
        from nnef_torch.errors import Location, NNEFSemanticError
        from nnef_torch.format import ast
        from nnef_torch.ops.registry import lowering_rule_of

        declarations()
        n, loc, scalar = 200_000, Location("graph.nnef", 9, 5), ast.TensorType(ast.PrimitiveType("scalar"))
        params = tuple(ast.Param(f"p{i}", scalar) for i in range(n))
        body = ast.Fragment("body", False, None, params, (ast.Result("y", scalar),), ())
        args = {"body": "body", "scan": [], "full": [(f"p{i}", 0.0) for i in range(n)], "state": [],
                "output": [("z", "full", 0, 1)], "skip": 0, "reset_every_turn": 0, "external_state": 0}
        try:
            rule = lowering_rule_of("tract_core_scan", "tract_core")
            rule(SimpleNamespace(fragments={"body": body}), args, None, loc, None)
        except NNEFSemanticError as error:
            print(error.location, error.message[:60])
    """, timeout=60)
    assert out.startswith("graph.nnef:9:5 tract_core_scan: output ('z', 'full') must name a result"), out


def test_fixture_scan_results_are_unchanged():
    """The LSTM fixture (a scan with state) still reads as tract computes it, at another sequence length too."""
    folder = FIXTURES / "lstm"
    x, expected = np.load(folder / "input.npy"), np.load(folder / "output.npy")
    module = nnef_torch.load(folder)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-4, atol=1e-5)
    longer = nnef_torch.load(folder, input_shapes={"input": [1, 64, x.shape[2]]})
    assert longer(torch.zeros(1, 64, x.shape[2])).shape[0] == 1


def test_standard_save_of_gather_elements_counts_its_indices_first(tmp_path):
    """The standard form of tract_core_gather_elements is a constant of linear offsets, one per index: past the
    limit of computed items it is refused before it is built (before: 4M offsets computed and written as text)."""
    text = graph("input = tract_core_external(shape = [2049, 2048], datum_type = 'f32');",
                 "i = tract_core_external(shape = [2049, 2048], datum_type = 'i64');",
                 "output = tract_core_gather_elements(input, i, axis = 1);", params="input, i")
    (tmp_path / "graph.nnef").write_text(text)
    module = nnef_torch.load(tmp_path)
    with pytest.raises(NNEFUnsupportedError, match="linear indices of its standard form") as info:
        module.save(tmp_path / "out")
    assert info.value.location.line == line_of(text, "output = ")
