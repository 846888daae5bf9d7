"""`validate` and `info`: reports and compiler-style errors."""
from __future__ import annotations

from khronos import conformance_cases, require_conformance

from cli.helpers import cli


def test_validate_ok_and_info_report(capsys):
    require_conformance()
    case = conformance_cases()[0].parent / "mnist"
    status, out, _ = cli(capsys, "validate", case)
    assert status == 0 and "valid NNEF" in out
    status, out, _ = cli(capsys, "info", case)
    assert status == 0
    # the graph reads at any batch size: shown as B, the counts at the batch it declares
    assert "input: scalar[B, 1, 28, 28]" in out and "output: scalar[B, 10]" in out and "at B = 3" in out
    assert "conv" in out and "5,994 parameters" in out  # 200 + 8 + 3200 + 16 + 10 + 2560


def test_validate_reports_errors_compiler_style(tmp_path, capsys):
    (tmp_path / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n"
                                         "    y = relu(z);\n}\n")
    status, _, err = cli(capsys, "validate", tmp_path)
    assert status == 1
    assert "graph.nnef:5:14: error: 'z' is used before it is assigned" in err
    assert "    y = relu(z);" in err and "^" in err


def test_input_shape_option(capsys):
    require_conformance()
    case = conformance_cases()[0].parent / "relu"
    status, out, _ = cli(capsys, "info", case, "--input-shape", "input=2,16,5,5")
    assert status == 0 and "output: scalar[2, 16, 5, 5]" in out


def test_malformed_input_shape_is_a_usage_error(capsys):
    status, _, err = cli(capsys, "info", "model", "--input-shape", "input=2,x")
    assert status == 2 and "D0,D1" in err


def test_missing_path_exits_1(tmp_path, capsys):
    status, _, err = cli(capsys, "validate", tmp_path / "nope")
    assert status == 1 and "error" in err and "Traceback" not in err
