"""The nnef-torch command line: exit codes and reports."""
from __future__ import annotations

import subprocess
import sys

from khronos import conformance_cases, require_conformance
from nnef_torch.cli import main


def test_validate_ok_and_info_report(capsys):
    require_conformance()
    case = conformance_cases()[0].parent / "mnist"
    assert main(["validate", str(case)]) == 0
    assert "valid NNEF" in capsys.readouterr().out
    assert main(["info", str(case)]) == 0
    out = capsys.readouterr().out
    assert "input: scalar[3, 1, 28, 28]" in out and "output: scalar[3, 10]" in out
    assert "conv" in out and "5,994 parameters" in out  # 200 + 8 + 3200 + 16 + 10 + 2560


def test_validate_reports_errors_compiler_style(tmp_path, capsys):
    (tmp_path / "graph.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n"
                                         "    y = relu(z);\n}\n")
    assert main(["validate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "graph.nnef:5:14: error: 'z' is used before it is assigned" in err
    assert "    y = relu(z);" in err and "^" in err


def test_input_shape_option(capsys):
    require_conformance()
    case = conformance_cases()[0].parent / "relu"
    assert main(["info", str(case), "--input-shape", "input=2,16,5,5"]) == 0
    assert "output: scalar[2, 16, 5, 5]" in capsys.readouterr().out


def test_demo_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "nnef_torch", "demo"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "tiny_cnn" in result.stdout and "quantized tensors: 3" in result.stdout


def test_missing_path_exits_1(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope")]) == 1
    assert "error" in capsys.readouterr().err
