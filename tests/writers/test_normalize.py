"""Saving a module whose document was read with deviations from the spec writes standard NNEF
(nnef_torch.writers.normalize): the Khronos parser reads the saved copy, `nnef-torch validate` and a strict
reading accept it with no warning, and it computes what the original module does (and what the Khronos
interpreter and tract compute from it); an empty chunk that something other than `concat` reads is refused."""
from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import main
from nnef_torch.errors import NNEFDeviationWarning, NNEFUnsupportedError
from tests.exporter.consumers import khronos_parse, run_khronos, run_tract

PRODUCERS = Path(__file__).parents[1] / "format" / "producers"
FIXTURES = ["khronos_dot", "khronos_rotary", "t2n_block", "t2n_softmax"]


def _graph(body: str, head: str = "") -> str:
    return f"version 1.0;\n{head}\ngraph G(x) -> (y)\n{{\n    x = external<scalar>(shape = [2, 3]);\n{body}}}\n"


def _matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> str:
    return ("version 1.0;\ngraph G(a, b) -> (y)\n{\n"
            f"    a = external<scalar>(shape = {list(a_shape)});\n"
            f"    b = external<scalar>(shape = {list(b_shape)});\n"
            "    y = matmul(a, b);\n}\n")


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


X = np.linspace(-2.5, 2.5, 6, dtype=np.float32).reshape(2, 3)
R = np.random.default_rng(3)
A3, B34, A43 = (R.standard_normal(shape).astype(np.float32) for shape in ((3,), (3, 4), (4, 3)))

# the hand-written deviation documents of tests/format/test_lenient.py: case -> (rule, text, inputs, numpy twin)
DOCUMENTS = {
    "nested": ("operator-expressions", _graph("    y = relu(neg(x));\n"), [X], lambda x: np.maximum(-x, 0)),
    "duplicate": ("duplicate-assignment", _graph("    y = tanh(x);\n    y = tanh(x);\n"), [X], np.tanh),
    "epsilon": ("tensor-attribute", _graph("    e = constant<scalar>(shape = [], value = [0.5]);\n"
                                           "    y = batch_normalization(x, 0.0, 1.0, 0.0, 1.0, epsilon = e);\n"),
                [X], lambda x: x / np.sqrt(1.5)),
    "erf": ("erf", _graph("    y = erf(x);\n"), [X], _erf),
    "redefined": ("redefined-standard-op",
                  _graph("    y = relu(x);\n", "extension KHR_enable_fragment_definitions;\nfragment relu( x: "
                         "tensor<scalar> ) -> ( y: tensor<scalar> ) { y = abs(x); }\n"), [X], np.abs),
    "matmul-1d-1d": ("matmul-1d", _matmul((3,), (3,)), [A3, A3[::-1].copy()], np.matmul),
    "matmul-1d-2d": ("matmul-1d", _matmul((3,), (3, 4)), [A3, B34], np.matmul),
    "matmul-2d-1d": ("matmul-1d", _matmul((4, 3), (3,)), [A43, A3], np.matmul),
    "split": ("split-zero-ratio",
              _graph("    [a, b] = split(x, axis = 1, ratios = [3, 0]);\n    y = concat([b, a], axis = 1);\n"),
              [X], lambda x: x),
}


def _quiet_load(folder: Path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NNEFDeviationWarning)
        return nnef_torch.load(folder, **options)


def _strict_load(folder: Path):
    """Load with lenient=False; any deviation warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNEFDeviationWarning)
        return nnef_torch.load(folder, lenient=False)


def _run(module, inputs: list[np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        output = module(*(torch.from_numpy(x) for x in inputs))
    return (output[0] if isinstance(output, (tuple, list)) else output).numpy()


def _check_saved(original, saved: Path, inputs: list[np.ndarray], expected: np.ndarray, capsys) -> None:
    """The saved copy is standard NNEF and computes `expected` (what the original module computes)."""
    khronos_parse(saved)
    again = _strict_load(saved)
    assert again.nnef.deviations == ()
    np.testing.assert_allclose(_run(again, inputs), _run(original, inputs), rtol=1e-5, atol=1e-6)
    assert main(["validate", str(saved)]) == 0
    assert "warning" not in capsys.readouterr().err
    for run in (run_khronos, run_tract):  # independent consumers of the saved copy
        found = run(saved, inputs)[0]
        assert found.shape == expected.shape, run.__name__
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-5, err_msg=run.__name__)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_saves_as_standard_nnef(name, tmp_path, capsys):
    folder = PRODUCERS / name
    module = _quiet_load(folder)
    assert module.nnef.deviations  # recorded when read
    module.save(tmp_path / "saved")
    inputs = [np.load(path) for path in sorted(folder.glob("input_*.npy"))]
    _check_saved(module, tmp_path / "saved", inputs, np.load(folder / "expected_0.npy"), capsys)


@pytest.mark.parametrize("case", sorted(DOCUMENTS))
def test_document_with_a_deviation_saves_as_standard_nnef(case, tmp_path, capsys):
    rule, text, inputs, twin = DOCUMENTS[case]
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "graph.nnef").write_text(text)
    module = _quiet_load(tmp_path / "read")
    assert module.nnef.deviations == (rule,)
    expected = twin(*inputs).astype(np.float32)
    np.testing.assert_allclose(_run(module, inputs), expected, rtol=1e-5, atol=1e-6)
    nnef_torch.save(module, tmp_path / "saved")
    saved = (tmp_path / "saved" / "graph.nnef").read_text()
    assert saved != text
    if case == "erf":  # the rational approximation, float32-accurate
        assert "erf_rational(" in saved and not re.search(r"\berf\(", saved)
    _check_saved(module, tmp_path / "saved", inputs, expected, capsys)


def test_trained_weight_is_saved(tmp_path):
    module = _quiet_load(PRODUCERS / "t2n_block")
    x = torch.from_numpy(np.load(PRODUCERS / "t2n_block" / "input_0.npy"))
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    optimizer.zero_grad()
    module(x).square().sum().backward()
    optimizer.step()
    weight = module.get_parameter(next(path for path, _ in module.named_parameters()
                                       if module.label_of(path) == "fc.weight"))
    before = np.fromfile(PRODUCERS / "t2n_block" / "fc.weight.dat", dtype=np.uint8)
    module.save(tmp_path / "saved")
    stored = nnef_torch.read_tensor(tmp_path / "saved" / "fc.weight.dat")
    assert np.array_equal(stored, weight.detach().numpy())
    assert not np.array_equal(np.fromfile(tmp_path / "saved" / "fc.weight.dat", dtype=np.uint8), before)
    again = _strict_load(tmp_path / "saved")
    with torch.no_grad():
        np.testing.assert_allclose(again(x).numpy(), module(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("body, line", [
    ("    [a, b] = split(x, axis = 1, ratios = [3, 0]);\n    c = abs(b);\n    y = concat([a, c], axis = 1);\n", 6),
    ("    [a, b] = split(x, axis = 1, ratios = [3, 0]);\n    y = concat([b], axis = 1);\n", 6),
])
def test_empty_chunk_read_otherwise_has_no_standard_form(body, line, tmp_path):
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "graph.nnef").write_text(_graph(body))
    module = _quiet_load(tmp_path / "read")
    with pytest.raises(NNEFUnsupportedError, match=r"'split' writes the empty tensor 'b'") as caught:
        module.save(tmp_path / "saved")
    assert caught.value.location.line == line
    assert caught.value.location.file == str(tmp_path / "read" / "graph.nnef")
    assert not (tmp_path / "saved").exists()


def test_module_read_without_deviations_keeps_its_text(tmp_path):
    text = ("version 1.0;\n\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [2, 3]);  # as written\n"
            "  y = relu(x);\n}\n")
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "graph.nnef").write_text(text)
    module = _strict_load(tmp_path / "read")
    assert module.nnef.deviations == ()
    module.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "graph.nnef").read_text() == text


def test_graph_quant_is_saved_with_the_standard_text(tmp_path):
    _, text, inputs, _ = DOCUMENTS["epsilon"]
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "graph.nnef").write_text(text)
    (tmp_path / "read" / "graph.quant").write_text('"y": linear_quantize(min = -2.0, max = 2.0, bits = 4);\n')
    module = _quiet_load(tmp_path / "read")
    module.save(tmp_path / "saved")
    khronos_parse(tmp_path / "saved")
    assert (tmp_path / "saved" / "graph.quant").read_text() == (tmp_path / "read" / "graph.quant").read_text()
    again = _strict_load(tmp_path / "saved")
    x = inputs[0] * 2
    step = 4 / 15  # 4 bits over [-2, 2]
    levels = np.round((np.clip(x / np.sqrt(1.5), -2, 2) + 2) / step) * step - 2
    np.testing.assert_allclose(_run(again, [x]), levels.astype(np.float32), atol=1e-6)


def test_declared_custom_operation_keeps_its_declaration(tmp_path):
    head = ("extension KHR_enable_fragment_definitions;\n"
            "fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n")
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "graph.nnef").write_text(_graph("    t = twice(x);\n    y = softmax(t, 1);\n", head))
    twice = {"twice": lambda x: 2 * x}
    module = _quiet_load(tmp_path / "read", custom_ops=twice)
    module.save(tmp_path / "saved")
    saved = (tmp_path / "saved" / "graph.nnef").read_text()
    assert "fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> );" in saved
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    nnef.infer_shapes(nnef.load_graph(str(tmp_path / "saved")), custom_shapes={"twice": lambda x: x})
    with warnings.catch_warnings():
        warnings.simplefilter("error", NNEFDeviationWarning)
        again = nnef_torch.load(tmp_path / "saved", lenient=False, custom_ops=twice)
    e = np.exp(2 * X - (2 * X).max(axis=1, keepdims=True))
    np.testing.assert_allclose(_run(again, [X]), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
