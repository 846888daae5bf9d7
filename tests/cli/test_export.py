"""`export`: a factory in a module file of the current folder, checked by the Khronos parser and re-imported; bad
specs and modules that cannot be exported."""
from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest
import torch
from exporter.consumers import khronos_parse

import nnef_torch
from cli.helpers import cli

MODULE_TEXT = '''
import torch
import torch.nn as nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.table = nn.Embedding(10, 3)

    def forward(self, x, index):
        return x * self.table(index)


class Spectrum(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real


instance = Lookup()
number = 42


def text():
    return "not a module"


def broken():
    raise RuntimeError("boom")
'''


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """The name of a module file written into a fresh current folder (sys.path and sys.modules restored after)."""
    name = f"cli_export_nets_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE_TEXT))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name
    sys.modules.pop(name, None)


def test_factory_exported_parsed_by_khronos_and_reimported_equal(tmp_path, capsys, factories):
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "1,3,8,8")
    assert status == 0, err
    assert out.startswith(f"exported {factories}:build (Sequential, eval mode) to net: valid NNEF")
    graph = khronos_parse(tmp_path / "net")
    assert [list(graph.tensors[name].shape) for name in graph.inputs] == [[1, 3, 8, 8]]
    module = importlib.import_module(factories).build().eval()
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(nnef_torch.load(tmp_path / "net")(x), module(x), rtol=1e-5, atol=1e-5)


def test_factory_exported_as_lightnet_and_reimported_equal(tmp_path, capsys, factories):
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "net.json", "--input-shape", "1,3,8,8")
    assert status == 0, err
    assert "to net.json: valid lightnet model" in out and "inputs input[1, 3, 8, 8]" in out
    assert (tmp_path / "net.wts").is_file()
    module = importlib.import_module(factories).build().eval()
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(nnef_torch.load(tmp_path / "net.json", inputs=["input"])(x), module(x), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("output", ["net", "net.json"])
def test_fold_batch_norm_folds_into_the_convolution(tmp_path, capsys, factories, output):
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", output, "--input-shape", "1,3,8,8",
                           "--fold-batch-norm")
    assert status == 0, err
    if output == "net":
        assert "batch_normalization" not in (tmp_path / "net" / "graph.nnef").read_text()
    module = importlib.import_module(factories).build().eval()
    x = torch.randn(1, 3, 8, 8)
    options = {"inputs": ["input"]} if output.endswith(".json") else {}
    with torch.no_grad():
        torch.testing.assert_close(nnef_torch.load(tmp_path / output, **options)(x), module(x), rtol=1e-5,
                                   atol=1e-5)


def test_module_object_with_two_inputs_and_dtypes_to_an_archive(tmp_path, capsys, factories):
    status, out, err = cli(capsys, "export", f"{factories}:instance", "-o", "lookup.tgz", "--input-shape", "2,3",
                           "--input-shape", "2", "--input-dtype", "float32", "--input-dtype", "int64")
    assert status == 0, err
    assert "inputs x[2, 3], index[2]" in out
    module = importlib.import_module(factories).instance
    x, index = torch.randn(2, 3), torch.tensor([7, 2])
    torch.testing.assert_close(nnef_torch.load(tmp_path / "lookup.tgz")(x, index), module(x, index))


def test_unexportable_module_prints_the_export_error(capsys, factories):
    status, _, err = cli(capsys, "export", f"{factories}:Spectrum", "-o", "spectrum", "--input-shape", "4")
    assert status == 1
    assert "Spectrum cannot be exported as NNEF" in err and "complex64" in err and "Traceback" not in err


@pytest.mark.parametrize("attribute, message", [
    (None, "is not a factory spec: expected package.module:factory"),
    ("missing", "has no attribute 'missing'"),
    ("number", "is of type int: expected an nn.Module or a callable returning one"),
    ("text", "returned a str, not a torch.nn.Module"),
    ("broken", "failed: RuntimeError: boom"),
])
def test_bad_specs_exit_1_with_a_message(capsys, factories, attribute, message):
    spec = factories if attribute is None else f"{factories}:{attribute}"
    status, _, err = cli(capsys, "export", spec, "-o", "out", "--input-shape", "1")
    assert status == 1 and message in err and err.startswith("nnef-torch: error:")


def test_missing_module_exits_1(capsys, factories):
    status, _, err = cli(capsys, "export", "no_such_module_here:build", "-o", "out", "--input-shape", "1")
    assert status == 1 and "cannot import 'no_such_module_here'" in err


def test_input_shape_is_required(capsys, factories):
    assert cli(capsys, "export", f"{factories}:build", "-o", "out")[0] == 2


def test_dynamic_batch_export_runs_and_reports_at_another_batch(tmp_path, capsys, factories):
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "2,3,8,8",
                           "--dynamic-batch")
    assert status == 0, err
    assert "inputs input[2, 3, 8, 8]" in out and "variable batch size (axis 0 of every input)" in out
    text = (tmp_path / "net" / "graph.nnef").read_text()
    assert "shape = [0, 144]" in text and text.count("2, 3, 8, 8") == 1
    graph = khronos_parse(tmp_path / "net")
    assert [list(graph.tensors[name].shape) for name in graph.inputs] == [[2, 3, 8, 8]]
    status, out, err = cli(capsys, "info", "net", "--batch-size", "5")
    assert status == 0, err
    assert "input: scalar[5, 3, 8, 8]" in out
    status, out, err = cli(capsys, "validate", "net", "--batch-size", "3")
    assert status == 0 and "valid NNEF" in out, err
    module = importlib.import_module(factories).build().eval()
    x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        expected = module(x).numpy()
    np.save(tmp_path / "x.npy", x.numpy())
    status, out, err = cli(capsys, "run", "net", "--batch-size", "5", "--input", "x.npy", "-o", "found.npz")
    assert status == 0, err
    found = np.load(tmp_path / "found.npz")
    np.testing.assert_allclose(next(iter(found.values())), expected, rtol=1e-5, atol=1e-5)


def test_batch_size_must_be_positive(capsys, tmp_path):
    assert cli(capsys, "info", str(tmp_path), "--batch-size", "0")[0] == 2


def test_dynamic_dims_export_standard_and_tract_files(tmp_path, capsys, factories):
    """`--dynamic-dim 0:0=B --dynamic-dim 0:1=S:2:64`: the standard file runs re-declared at another size in
    nnef_torch, the tract file in tract at two sizes, both against torch."""
    (tmp_path / f"{factories}_seq.py").write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn

        def build():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    '''))
    spec = f"{factories}_seq:build"
    for target, out in (("standard", "net"), ("tract", "net_tract")):
        status, _, err = cli(capsys, "export", spec, "-o", out, "--input-shape", "2,5,8", "--dynamic-dim", "0:0=B",
                             "--dynamic-dim", "0:1=S:2:64", "--target", target)
        assert status == 0, err
    module = importlib.import_module(f"{factories}_seq").build().eval()
    x = torch.randn(3, 11, 8)
    with torch.no_grad():
        expected = module(x).numpy()
    loaded = nnef_torch.load(tmp_path / "net", input_shapes={"input": [3, 11, 8]})
    np.testing.assert_allclose(loaded(x).detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    text = (tmp_path / "net_tract" / "graph.nnef").read_text()
    assert "extension tract_symbol S;" in text and "extension tract_assert S <= 64;" in text
    assert "external<scalar>(shape = [B, S, 8])" in text
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    runnable = tract.nnef().load(str(tmp_path / "net_tract")).into_runnable()
    np.testing.assert_allclose(runnable.run([x.numpy()])[0].to_numpy(), expected, rtol=1e-5, atol=1e-5)
    status, _, err = cli(capsys, "export", spec, "-o", "bad", "--input-shape", "2,5,8", "--dynamic-dim", "0:1")
    assert status != 0 and "--dynamic-dim expects INPUT:AXIS=NAME" in err


def test_input_and_output_names(tmp_path, capsys, factories):
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "1,3,8,8",
                           "--input-names", "image", "--output-names", "logits")
    assert status == 0, err
    assert "graph Sequential( image ) -> ( logits )" in (tmp_path / "net" / "graph.nnef").read_text()
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "bad", "--input-shape", "1,3,8,8",
                           "--input-names", "a,b")
    assert status != 0 and "input_names= gives 2 name(s)" in err


ACCELERATOR_OPS = """# an accelerator's importer: these names and no fragments
conv, relu
reshape   # flatten
matmul
add
"""


def test_ops_file_restricts_the_written_operations(tmp_path, capsys, factories):
    (tmp_path / "ops.txt").write_text(ACCELERATOR_OPS)
    status, out, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "1,3,8,8",
                           "--target", "standard", "--fold-batch-norm", "--ops", "ops.txt", "--input-names", "image",
                           "--output-names", "logits")
    assert status == 0, err
    nnef = pytest.importorskip("nnef")
    graph = nnef.load_graph(str(tmp_path / "net"), lowered=[])  # nothing lowered: the operations as written
    assert {op.name for op in graph.operations} <= {"conv", "relu", "reshape", "matmul", "add", "external",
                                                    "variable"}
    assert graph.inputs == ["image"] and graph.outputs == ["logits"]
    module = importlib.import_module(factories).build().eval()
    x = torch.randn(1, 3, 8, 8)
    with nnef.Session(str(tmp_path / "net"), lowered=[]) as session:
        found = session(x.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(found[0] if isinstance(found, (list, tuple)) else found),
                                   module(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("text", "options", "message"), [
    ("conv\nrelu\n", (), "'batch_normalization'"),  # the batch norm (not folded) and the linear layer need more
    ("convolution\n", (), "did you mean 'conv'"),
    ("# nothing\n", (), "names no operation"),
    ("conv\n", ("--target", "tract"), "target='tract'"),
])
def test_ops_file_errors_exit_1_with_a_message(tmp_path, capsys, factories, text, options, message):
    (tmp_path / "ops.txt").write_text(text)
    status, _, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "1,3,8,8",
                         "--ops", "ops.txt", *options)
    assert status == 1 and message in err and "Traceback" not in err
    status, _, err = cli(capsys, "export", f"{factories}:build", "-o", "net", "--input-shape", "1,3,8,8",
                         "--ops", "missing.txt")
    assert status == 1 and "missing.txt" in err
