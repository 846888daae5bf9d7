"""Export failures are one `ExportError` listing every problem, each at the user's source line; nothing escapes as
a bare traceback. Line numbers are found in this file's own text, not written down."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import nnef_torch
from exporter.consumers import export_and_check
from nnef_torch.exporter import convert
from nnef_torch.exporter.trace import trace

HERE = str(Path(__file__).resolve())


def line_of(owner: type, code: str) -> int:
    """The line of this file holding `code` (exactly once) inside the source of `owner`."""
    lines, start = inspect.getsourcelines(owner)
    found = [start + offset for offset, text in enumerate(lines) if code in text]
    assert len(found) == 1, f"{code!r} is on lines {found}"
    return found[0]


def export_error(module: nn.Module, inputs) -> nnef_torch.ExportError:
    with pytest.raises(nnef_torch.ExportError) as caught:
        nnef_torch.export(module, inputs)
    return caught.value


class ManyUnmappable(nn.Module):
    def forward(self, x, i):
        a = F.pad(x, (1, 1), mode="circular")
        b = torch.prod(x, 1)
        c = F.dropout(x, 0.5, training=True)
        d = torch.bitwise_xor(i, i)
        e = torch.cumprod(x, -1)
        f = torch.kthvalue(x, 2)[0]
        return a, b, c, d, e, f


# the ATen operation each problem names, the code on its line, a word its reason must hold ("": any reason, as
# a rule may be added that explains it better than "no export rule")
UNMAPPABLE = [
    ("aten.pad", 'mode="circular"', "circular"),
    ("aten.prod", "torch.prod(x, 1)", ""),
    ("aten.native_dropout", "F.dropout(x, 0.5, training=True)", "module.eval()"),
    ("aten.bitwise_xor", "torch.bitwise_xor(i, i)", ""),
    ("aten.cumprod", "torch.cumprod(x, -1)", ""),
    ("aten.kthvalue", "torch.kthvalue(x, 2)", ""),
]


def test_every_unmappable_operation_in_one_error_at_its_line():
    error = export_error(ManyUnmappable(), (torch.randn(2, 3, 4), torch.ones(2, 3, dtype=torch.int32)))
    assert isinstance(error, nnef_torch.NNEFError) and isinstance(error, ValueError)
    assert len(error.problems) == len(UNMAPPABLE), error
    for op, code, word in UNMAPPABLE:
        found = [problem for problem in error.problems if problem.startswith(op)]
        assert len(found) == 1, (op, error.problems)
        problem = found[0]
        assert word in problem.reason and problem.reason.split(": ", 1)[1], problem
        line = line_of(ManyUnmappable, code)
        assert problem.location.file == HERE and problem.location.line == line, problem
        assert code in problem.code and f"{HERE}:{line}" in str(error)


class BooleanMask(nn.Module):
    def forward(self, x):
        return x[x > 0]


class NonZero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x)


class ItemAsSize(nn.Module):
    def forward(self, x):
        return torch.zeros(int(x.sum().item()))


class BranchOnValue(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


@pytest.mark.parametrize("module, code", [
    (BooleanMask(), "return x[x > 0]"),
    (NonZero(), "return torch.nonzero(x)"),
    (ItemAsSize(), "torch.zeros(int(x.sum().item()))"),
    (BranchOnValue(), "if x.sum() > 0:"),
], ids=["mask", "nonzero", "item_as_size", "branch"])
def test_value_dependent_shapes_explained(module, code):
    error = export_error(module, (torch.ones(4),))
    assert len(error.problems) == 1
    problem = error.problems[0]
    assert "static shapes" in problem and "torch.where" in problem, problem
    assert problem.location.file == HERE and problem.location.line == line_of(type(module), code), problem


class Scale(nn.Module):
    def forward(self, x, *rest):
        return x * 2


class ComplexWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3, dtype=torch.complex64))

    def forward(self, x):
        return torch.view_as_real(x * self.w)


class Spectrum(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


class ChangesInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class ReturnsNone(nn.Module):
    def forward(self, x):
        return x * 2, None


# module, example inputs, words the error must hold
BAD_INPUTS = [
    ("int argument", Scale(), (torch.ones(2), 3), ["is 3, not a tensor"]),
    ("str argument", Scale(), (torch.ones(2), "mode"), ["'mode', not a tensor"]),
    ("None argument", Scale(), (torch.ones(2), None), ["None, not a tensor"]),
    ("inputs None", Scale(), None, ["example_inputs", "NoneType"]),
    ("inputs str", Scale(), "abc", ["example_inputs", "str"]),
    ("inputs int", Scale(), 3, ["example_inputs", "int"]),
    ("not a module", lambda x: x, (torch.ones(2),), ["torch.nn.Module", "function"]),
    ("empty input", Scale(), (torch.ones(0, 3),), ["shape [0, 3]", "positive extents"]),
    ("complex input", Scale(), (torch.ones(2, dtype=torch.complex64),), ["complex64"]),
    ("complex parameter", ComplexWeight(), (torch.ones(3),), ["parameter 'w'", "complex64"]),
    ("complex result", Spectrum(), (torch.ones(8),), ["_fft_r2c", "complex64"]),
    ("input changed in place", ChangesInput(), (torch.ones(2),), ["input 'x' in place", "read-only"]),
    ("None output", ReturnsNone(), (torch.ones(2),), ["output 1 is None, not a tensor"]),
]


@pytest.mark.parametrize("module, inputs, words", [row[1:] for row in BAD_INPUTS], ids=[row[0] for row in BAD_INPUTS])
def test_bad_inputs_and_types_are_export_errors(module, inputs, words):
    error = export_error(module, inputs)
    for word in words:
        assert word in str(error), error


@pytest.mark.parametrize("module, inputs, cause", [
    (nn.Linear(3, 2), (torch.ones(2),), RuntimeError),  # shapes disagree: torch's check fails
    (nn.Linear(3, 2), (torch.ones(3), torch.ones(3)), TypeError),  # one argument too many
], ids=["shape_mismatch", "arity"])
def test_torch_export_failure_wrapped_with_cause(module, inputs, cause):
    error = export_error(module, inputs)
    assert "torch.export cannot trace Linear" in str(error)
    assert isinstance(error.__cause__, cause)
    assert error.problems[0].location is None  # the failure is inside torch's Linear, not in this file


class Branches(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda y: y + 1, lambda y: y - 1, (x,))


def test_control_flow_reported_at_its_line():
    error = export_error(Branches(), (torch.ones(3),))
    assert len(error.problems) == 1 and "torch.where" in error.problems[0]
    assert error.problems[0].location.line == line_of(Branches, "torch.cond(x.sum() > 0")


def test_failing_rule_is_an_export_error_with_cause(monkeypatch):
    def broken(emit, *args, **kwargs):
        raise KeyError("oops")
    rules = {**convert.export_rules(), "aten.relu.default": broken}
    monkeypatch.setattr(convert, "export_rules", lambda: rules)
    error = export_error(nn.ReLU(), (torch.ones(2),))
    assert "a bug in nnef_torch" in str(error) and isinstance(error.__cause__, KeyError)


class Checked(nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] == 2)
        with torch.autograd.profiler.record_function("block"):
            y = x.double() + 1
        return y.to(torch.float32)


def test_checks_and_annotations_are_ignored(tmp_path):
    inputs = (torch.randn(2, 3),)
    targets = {str(node.target) for node in trace(Checked(), inputs).graph.nodes}
    assert "aten._assert_tensor_metadata.default" in targets  # the harmless node is really there
    report = export_and_check(Checked(), inputs, tmp_path, consumers=("nnef_torch",))
    assert report.passed == ["nnef_torch"], report.failures


@pytest.mark.parametrize("inputs", [torch.ones(2, 3), [torch.ones(2, 3)], (torch.ones(2, 3),)],
                         ids=["tensor", "list", "tuple"])
def test_example_inputs_forms_give_one_graph(inputs):
    assert nnef_torch.export(nn.Softmax(-1), inputs).text == nnef_torch.export(nn.Softmax(-1), (torch.ones(2, 3),)).text


def test_problems_print_and_compare_as_text():
    problem = export_error(NonZero(), (torch.ones(4),)).problems[0]
    assert isinstance(problem, str) and problem.startswith("aten.nonzero") and problem.code in problem
    assert f"{HERE}:{line_of(NonZero, 'return torch.nonzero(x)')}" in problem
