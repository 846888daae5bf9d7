"""`run`: conformance cases against their expected outputs, seeded random inputs, reference checks, input errors."""
from __future__ import annotations

import numpy as np
import pytest
from khronos import CONFORMANCE, require_conformance

import nnef_torch
from cli.helpers import cli


def case_files(tmp_path, case: str, outputs: tuple[str, ...]) -> tuple[str, str, str]:
    """(model folder, inputs .npz, expected outputs .npz) of a conformance case, decoded by nnef_torch.read_tensor."""
    require_conformance()
    folder = CONFORMANCE / case
    inputs, reference = tmp_path / f"{case}_inputs.npz", tmp_path / f"{case}_expected.npz"
    np.savez(inputs, input=nnef_torch.read_tensor(folder / "input.dat"))
    np.savez(reference, **{name: nnef_torch.read_tensor(folder / f"{name}.dat") for name in outputs})
    return str(folder), str(inputs), str(reference)


@pytest.mark.parametrize("case, outputs", [("conv3x3", ("output",)), ("mnist", ("output",)),
                                           ("split_channel", ("output1", "output2"))])
def test_conformance_case_matches_expected_output(tmp_path, capsys, case, outputs):
    folder, inputs, reference = case_files(tmp_path, case, outputs)
    written = tmp_path / "outputs.npz"
    status, out, err = cli(capsys, "run", folder, "--input", inputs, "--reference", reference, "--atol", "1e-4",
                           "-o", written)
    assert status == 0, err
    for name in outputs:
        assert f"  {name}: max abs diff" in out and f"{name}: shape" in out
    with np.load(written) as found, np.load(reference) as expected:
        assert sorted(found.files) == sorted(outputs)
        for name in outputs:
            np.testing.assert_allclose(found[name], expected[name], rtol=1e-4, atol=1e-3)


def test_named_npy_input_and_mismatching_reference(tmp_path, capsys):
    folder, inputs, reference = case_files(tmp_path, "conv3x3", ("output",))
    with np.load(inputs) as arrays:
        np.save(tmp_path / "image.npy", arrays["input"])
    with np.load(reference) as expected:
        np.savez(tmp_path / "off.npz", output=expected["output"] + 0.01)
    status, out, err = cli(capsys, "run", folder, "--input", f"input={tmp_path / 'image.npy'}",
                           "--reference", tmp_path / "off.npz")
    assert status == 1 and "MISMATCH" in out
    assert err.startswith("nnef-torch: error: 1 of 1 output(s) differ from the reference")


def test_reference_missing_an_output_exits_1(tmp_path, capsys):
    folder, _, _ = case_files(tmp_path, "split_channel", ())
    np.savez(tmp_path / "partial.npz", output1=np.zeros([4, 8, 32, 32], np.float32))
    status, _, err = cli(capsys, "run", folder, "--reference", tmp_path / "partial.npz")
    assert status == 1 and "no array for output(s) ['output2']" in err


def test_random_inputs_are_reproducible_with_a_seed(tmp_path, capsys):
    require_conformance()
    folder = CONFORMANCE / "add_2d"
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        status, out, _ = cli(capsys, "run", folder, "--seed", seed, "-o", tmp_path / f"{name}.npz")
        assert status == 0 and f"random (seed {seed})" in out
        with np.load(tmp_path / f"{name}.npz") as arrays:
            runs[name] = arrays["output"]
    assert runs["a"].shape == (4, 16) and runs["a"].dtype == np.float32
    np.testing.assert_array_equal(runs["a"], runs["b"])
    assert not np.array_equal(runs["a"], runs["c"])
    # the sum of two standard normal inputs: variance 2
    assert 0.5 < float(runs["a"].var()) < 4.0


def test_input_shape_override_and_dtype(tmp_path, capsys):
    require_conformance()
    status, _, err = cli(capsys, "run", CONFORMANCE / "relu", "--input-shape", "input=2,16,5,5",
                         "--dtype", "float64", "-o", tmp_path / "out.npz")
    assert status == 0, err
    with np.load(tmp_path / "out.npz") as arrays:
        assert arrays["output"].shape == (2, 16, 5, 5) and arrays["output"].dtype == np.float64
        assert float(arrays["output"].min()) == 0.0


@pytest.mark.parametrize("array, message", [
    (np.zeros([2, 16], np.float32), "input 'input1' has shape [2, 16], the graph declares [4, 16]"),
    (np.zeros([4, 16], np.int32), "input 'input1' is scalar: expected a float array, found dtype int32"),
])
def test_inputs_of_wrong_shape_or_dtype_exit_1(tmp_path, capsys, array, message):
    require_conformance()
    np.savez(tmp_path / "inputs.npz", input1=array, input2=np.zeros([4, 16], np.float32))
    status, _, err = cli(capsys, "run", CONFORMANCE / "add_2d", "--input", tmp_path / "inputs.npz")
    assert status == 1 and message in err and "Traceback" not in err


def test_unknown_input_name_exits_1(tmp_path, capsys):
    require_conformance()
    np.save(tmp_path / "x.npy", np.zeros([4, 16], np.float32))
    status, _, err = cli(capsys, "run", CONFORMANCE / "add_2d", "--input", f"nope={tmp_path / 'x.npy'}")
    assert status == 1 and "the graph has no input 'nope' (inputs: ['input1', 'input2'])" in err


def test_missing_inputs_exit_1(tmp_path, capsys):
    require_conformance()
    np.save(tmp_path / "one.npy", np.zeros([4, 16], np.float32))
    status, _, err = cli(capsys, "run", CONFORMANCE / "add_2d", "--input", f"input1={tmp_path / 'one.npy'}")
    assert status == 1 and "no value for input(s) ['input2']" in err


def test_missing_reference_fails_before_running(tmp_path, capsys):
    require_conformance()
    status, out, err = cli(capsys, "run", CONFORMANCE / "add_2d", "--reference", tmp_path / "nope.npz",
                           "-o", tmp_path / "out.npz")
    assert status == 1 and "nope.npz" in err and "error" in err
    assert "ran graph" not in out and not (tmp_path / "out.npz").exists()
