"""The verbs agree: one reading policy (lenient, each deviation one warning; --strict refuses), --input-shape named or
in the graph's order, one operation count, shapes with their symbols in `info`, --version, a closed pipe."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import nnef_torch
from cli.helpers import cli
from nnef_torch.cli import demo_model_path
from nnef_torch.cli.export import forward_shapes

ROOT = Path(__file__).parents[2]
PRODUCERS = ROOT / "tests" / "format" / "producers"
TRACT_DYNAMIC = ROOT / "tests" / "formats" / "tract_core" / "fixtures" / "dynamic"
WARNING = re.compile(r"^\S*graph\.nnef:\d+:\d+: warning: .*\[([a-z0-9-]+)\]$", re.M)
T2N_BLOCK_RULES = ["redefined-standard-op", "erf", "tensor-attribute", "positional-attribute", "item-for-array",
                   "surplus-argument"]


def two_inputs(folder: Path) -> Path:
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( a, b ) -> ( y )\n{\n    a = external<scalar>(shape = [4, 1]);\n"
        "    b = external<scalar>(shape = [1, 3]);\n    y = add(a, b);\n}\n")
    return folder


@pytest.mark.parametrize("verb", ["validate", "info", "run"])
def test_torch_to_nnef_file_is_read_by_every_verb_with_one_warning_per_deviation(capsys, verb):
    status, out, err = cli(capsys, verb, PRODUCERS / "t2n_block")
    assert status == 0, err
    assert sorted(WARNING.findall(err)) == sorted(T2N_BLOCK_RULES)  # each once, in our format only
    assert "NNEFDeviationWarning" not in err and len(err.splitlines()) == len(T2N_BLOCK_RULES)


@pytest.mark.parametrize("verb", ["validate", "info", "run"])
def test_strict_refuses_a_deviation_on_every_verb_and_names_the_way_back(capsys, verb):
    status, out, err = cli(capsys, verb, "--strict", PRODUCERS / "t2n_softmax")
    assert status == 1 and out == ""
    assert re.search(r"graph\.nnef:6:20: error: attribute 'axes' of 'softmax' must be passed by name", err)
    assert "note: without --strict this is read with a warning" in err and "[positional-attribute]" in err
    assert "Traceback" not in err


def test_strict_and_lenient_exclude_each_other(capsys):
    assert cli(capsys, "info", "--strict", "--lenient", PRODUCERS / "t2n_softmax")[0] == 2


@pytest.mark.parametrize("verb", ["validate", "info", "run"])
def test_unnamed_input_shape_is_the_one_input_of_the_graph(capsys, verb):
    status, out, err = cli(capsys, verb, PRODUCERS / "t2n_softmax", "--input-shape", "4,5")
    assert status == 0, err
    named = cli(capsys, verb, PRODUCERS / "t2n_softmax", "--input-shape", "x=4,5")
    assert named[0] == 0 and named[1] == out
    if verb == "info":
        assert "x: scalar[4, 5]" in out and "y: scalar[4, 5]" in out
    if verb == "run":
        assert "y: shape [4, 5]" in out


def test_unnamed_input_shapes_follow_the_graph_order(tmp_path, capsys):
    model = two_inputs(tmp_path / "two")
    status, out, err = cli(capsys, "info", model, "--input-shape", "5,1", "--input-shape", "1,2")
    assert status == 0, err
    assert "a: scalar[5, 1]" in out and "b: scalar[1, 2]" in out and "y: scalar[5, 2]" in out
    status, _, err = cli(capsys, "run", model, "--input-shape", "5,1")
    assert status == 1 and "1 --input-shape value(s) D0,D1,... for a graph of 2 input(s) ['a', 'b']" in err
    status, _, err = cli(capsys, "validate", model, "--input-shape", "5,1", "--input-shape", "b=1,2")
    assert status == 1 and "not both" in err


def test_export_takes_input_shapes_by_name_or_in_order():
    class Two(torch.nn.Module):
        def forward(self, image, mask=None):
            return image

    module = Two()
    assert forward_shapes([(None, [1, 3]), (None, [2])], None, module) == [[1, 3], [2]]
    assert forward_shapes([("mask", [2]), ("image", [1, 3])], None, module) == [[1, 3], [2]]
    assert forward_shapes([("image", [1, 3])], None, module) == [[1, 3]]
    assert forward_shapes([("b", [2]), ("a", [1, 3])], ["a", "b"], module) == [[1, 3], [2]]
    with pytest.raises(Exception, match=r"gives no shape for input\(s\) \['image'\]"):
        forward_shapes([("mask", [2])], None, module)
    with pytest.raises(Exception, match=r"\['pixels'\], which are not inputs of forward"):
        forward_shapes([("pixels", [2])], None, module)


def test_validate_info_and_export_count_operations_alike(capsys):
    _, validated, _ = cli(capsys, "validate", PRODUCERS / "t2n_block")
    _, described, _ = cli(capsys, "info", PRODUCERS / "t2n_block")
    count = int(re.search(r"^operations: (\d+)$", described, re.M).group(1))
    listed = sum(int(n) for n in re.findall(r"^  \S+\s+(\d+)$", described, re.M))
    assert count == listed and f"({count} operations, 5 variables" in validated
    assert not re.search(r"^  (external|variable|constant)\s", described, re.M)


def test_info_shows_the_variable_batch_of_a_dynamic_batch_export(tmp_path, capsys):
    path = tmp_path / "net"
    nnef_torch.save(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), path, torch.randn(2, 4),
                    dynamic_batch=True)
    status, out, err = cli(capsys, "info", path)
    assert status == 0, err
    assert "variable batch size B" in out
    assert re.search(r"^  \w+: scalar\[B, 4\]$", out, re.M) and re.search(r"^  \w+: scalar\[B, 3\]$", out, re.M)
    _, bound, _ = cli(capsys, "info", path, "--batch-size", "6")
    assert "variable batch" not in bound and re.search(r"scalar\[6, 3\]", bound)


def test_info_shows_a_fixed_batch_as_its_number(tmp_path, capsys):
    folder = tmp_path / "fixed"
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [2, 3, 4]);\n"
        "    y = reshape(x, shape = [2, 12]);\n}\n")
    status, out, _ = cli(capsys, "info", folder)
    assert status == 0 and "variable batch" not in out
    assert "x: scalar[2, 3, 4]" in out and "y: scalar[2, 12]" in out


def test_info_shows_the_symbols_of_a_tract_model(capsys):
    model = TRACT_DYNAMIC / "mlp"
    status, out, err = cli(capsys, "info", model)
    assert status == 0, err
    assert "dynamic dimension(s) B not bound" in out
    assert "x: scalar[B, 16]" in out and "output: scalar[B, 8]" in out
    _, bound, _ = cli(capsys, "info", model, "--input-shape", "3,16")
    assert "x: scalar[3, 16]" in bound and "output: scalar[3, 8]" in bound and "not bound" not in bound


def test_version_names_the_package_and_torch(capsys):
    status, out, _ = cli(capsys, "--version")
    assert status == 0
    assert re.fullmatch(r"nnef-torch \S+ \(torch \S+\)\n", out)


def test_closed_pipe_ends_quietly_with_141():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-m", "nnef_torch", "info", demo_model_path()],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    child.stdout.close()  # as `| head -0` does: before the first line is written
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141
    assert err == ""  # no "Broken pipe", no traceback
