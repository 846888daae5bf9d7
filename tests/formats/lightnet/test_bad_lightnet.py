"""Bad LightNet models are refused with a located `NNEFError` that says what was expected and what was found:
malformed JSON (line:column), unknown optypes (compiled IRs named as such), unknown or missing `arg_name`s, inputs
no earlier op defines, names given twice, params of the wrong type, `dims` that disagree with `data`, weight files
that are truncated, lie about a length or name a tensor twice, and ops whose tensors do not fit."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnef_torch
from formats.lightnet.lightnet_ir import create, document, hand_layout, op, write
from nnef_torch.errors import ForeignFormatError, NNEFError, NNEFUnsupportedError

X = create("x", [1, 2, 4, 4], from_file=True)


def conv(**changes: Any) -> dict[str, Any]:
    params = dict(group=1, size=[3, 3], stride=[1, 1], dilation=[1, 1], padding=[1, 1, 1, 1], autopad="NOTSET")
    params.update(changes)
    return op("conv2d", "conv", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, **params)


W = [create("w", [3, 2, 3, 3], np.ones((3, 2, 3, 3))), create("b", [3], [1, 2, 3])]


def line_of(path: Path, name: str) -> int:
    """The line where op `name` begins (the `{` above its name)."""
    lines = path.read_text().split("\n")
    keys = (f'"name": {json.dumps(name)},', f'"name" : {json.dumps(name)},')
    found = next(i for i, line in enumerate(lines) if line.strip() in keys)
    return next(i for i in range(found, -1, -1) if lines[i].strip() == "{") + 1


def refused(tmp_path: Path, ops: list[dict[str, Any]], error: type[NNEFError], message: str, at: str | None,
            **options: Any) -> NNEFError:
    layout = "hand" if all(set(item) == {"name", "optype", "tensors_in", "tensors_out", "params"} for item in ops) \
        else "il2json"  # the hand layout writes the five keys of an op
    path = write(tmp_path, document(*ops), layout=layout)
    with pytest.raises(error, match=message) as caught:
        nnef_torch.load(path, **{"inputs": ["x"], **options})
    location = caught.value.location
    assert location is not None and location.file == str(path)
    if at is not None:
        column = 9 if layout == "hand" else 7
        assert (location.line, location.column) == (line_of(path, at), column), str(caught.value)
    return caught.value


def test_malformed_json_is_located(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    text = hand_layout(document(X)).replace('"dtype", "value": "TL_FLOAT"}', '"dtype", "value": TL_FLOAT}')
    path.write_text(text)
    with pytest.raises(ForeignFormatError, match="malformed JSON: Expecting value") as caught:
        nnef_torch.load(path)
    line = next(i for i, item in enumerate(text.split("\n"), 1) if "TL_FLOAT" in item)
    column = text.split("\n")[line - 1].index("TL_FLOAT") + 1
    assert (caught.value.location.line, caught.value.location.column) == (line, column)


def test_a_document_without_ops(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"operators": []}')
    with pytest.raises(ForeignFormatError, match="no graph format"):
        nnef_torch.load(path)
    with pytest.raises(ForeignFormatError, match="no 'ops' array"):
        nnef_torch.load(path, format="lightnet")
    path.write_text('{"ops": []}')
    with pytest.raises(ForeignFormatError, match="'ops' is empty"):
        nnef_torch.load(path)


def test_unknown_optypes_are_listed_together(tmp_path: Path) -> None:
    error = refused(tmp_path, [X, op("gelu", "g1", {"src": "x"}, {"dst": "y"}),
                               op("swish", "g2", {"src": "y"}, {"dst": "z"})],
                    NNEFUnsupportedError, "2 op\\(s\\) have optypes LightNet does not define", None)
    assert "ops[1] 'g1' (gelu)" in str(error) and "ops[2] 'g2' (swish)" in str(error) and "conv2d" in str(error)


@pytest.mark.parametrize(("optype", "why"), [("conv2d_cpu", "the conv2d op compiled for LightNet's cpu"),
                                             ("relu_cudnn", "compiled for LightNet's cudnn"),
                                             ("tensorrt", "TensorRT engine op"),
                                             ("bn2scale_wts_cpu", "weight-folding step")])
def test_compiled_irs_are_named(optype: str, why: str, tmp_path: Path) -> None:
    error = refused(tmp_path, [X, op(optype, "compiled", {"src": "x"}, {"dst": "y"})], NNEFUnsupportedError,
                    "this is a compiled LightNet IR", None)
    assert why in str(error)


@pytest.mark.parametrize(("ops", "message", "at"), [
    ([X, op("relu", "r", {"input": "x"}, {"dst": "y"})], "has arg_name 'input', which this optype does not have \\(src\\)",
     "r"),
    ([X, op("relu", "r", {}, {"dst": "y"})], "tensors_in lacks 'src'", "r"),
    ([X, op("relu", "r", {"src": "x"}, {"dst": "y", "arg": "z"})], "tensors_out\\[1\\] has arg_name 'arg'", "r"),
    ([X, {"name": "r", "optype": "relu", "tensors_in": [{"arg_name": "src", "name": "x"}] * 2,
          "tensors_out": [{"arg_name": "dst", "name": "y"}], "params": []}], "gives arg_name 'src' twice", "r"),
    ([X, op("relu", "r", {"src": "nowhere"}, {"dst": "y"})], "input 'src' reads tensor 'nowhere', which no earlier op",
     "r"),
    ([X, op("relu", "r", {"src": "later"}, {"dst": "y"}), op("relu", "s", {"src": "x"}, {"dst": "later"})],
     "defined by a later op \\('s'\\): ops must come in the order they run", "r"),
    ([X, op("relu", "r", {"src": "x"}, {"dst": "y"}), op("sigmoid", "r", {"src": "y"}, {"dst": "z"})],
     "op name 'r' is already the name of ops\\[1\\]", None),
    ([X, op("relu", "r", {"src": "x"}, {"dst": "x"})], "defines tensor 'x', already defined by op 'create_x'", "r"),
    ([X, {"name": "r", "optype": "relu", "tensors_in": [], "tensors_out": []}], "has no 'params'", "r"),
    ([X, {**op("relu", "r", {"src": "x"}, {"dst": "y"}), "attrs": {}}], "has unknown keys \\['attrs'\\]", "r"),
    ([X, op("relu", "r", {"src": "x"}, {"dst": "y"}, alpha=1)], "has no param 'alpha' \\(its params: none\\)", "r"),
    ([X, op("softmax", "s", {"src": "x"}, {"dst": "y"})], "lacks param\\(s\\) 'axis' \\(LightNet requires every", "s"),
    ([X, op("softmax", "s", {"src": "x"}, {"dst": "y"}, axis="1")], "param 'axis' should be an integer, found the "
     "string '1'", "s"),
    ([X, op("softmax", "s", {"src": "x"}, {"dst": "y"}, axis=1.5)], "param 'axis' should be an integer, found 1.5",
     "s"),
    ([X, op("softmax", "s", {"src": "x"}, {"dst": "y"}, axis=True)], "should be an integer, found true", "s"),
    ([X, op("softmax", "s", {"src": "x"}, {"dst": "y"}, axis=4)], "param 'axis' is 4, out of range for a tensor of 4",
     "s"),
    ([X, *W, conv(size=[3])], "param 'size' should have 2 items, found 1", "conv"),
    ([X, *W, conv(stride=[1, 0])], "param 'stride' item 1 should be at least 1, found 0", "conv"),
    ([X, *W, conv(padding=[])], "param 'padding' is an empty array", "conv"),
    ([X, *W, conv(padding=[1, 1, 1, "1"])], "item 3 should be an integer", "conv"),
    ([X, *W, conv(autopad=0)], "param 'autopad' should be a string, found the number 0", "conv"),
    ([X, op("elew", "e", {"src1": "x", "src2": "x"}, {"dst": "y"}, elew_op="TL_ADD")],
     "param 'elew_op' should be one of TL_MUL, TL_DIV, TL_SUM, TL_SUB, TL_MAX, TL_MIN, TL_POW, found 'TL_ADD'", "e"),
    ([X, create("c", [2, 3], [1, 2, 3])], "'data' holds 3 numbers, but 'dims' \\[2, 3\\] make 6", "create_c"),
    ([X, create("c", [2, 0], [1])], "param 'dims' item 1 should be greater than 0, found 0", "create_c"),
    ([X, create("c", [2], [1, 2], dtype="TL_HALF")], "param 'dtype' should be one of TL_DOUBLE", "create_c"),
    ([X, create("c", [2], [1, 2], ran=(3, 1))], "'ran' \\[3.0, 1.0\\] should not decrease", "create_c"),
    ([X, create("c", [2], [1, 2], from_file=1)], "param 'from_file' should be true or false", "create_c"),
])
def test_bad_ops_are_refused_at_their_place(ops: list[dict[str, Any]], message: str, at: str | None,
                                            tmp_path: Path) -> None:
    refused(tmp_path, ops, ForeignFormatError, message, at)


@pytest.mark.parametrize(("ops", "message", "at"), [
    ([X, create("z", [1, 2, 4, 5]), op("elew", "e", {"src1": "x", "src2": "z"}, {"dst": "y"}, elew_op="TL_SUM")],
     "'src2' \\('z'\\) has shape \\[1, 2, 4, 5\\], but 'src1' \\('x'\\) has shape \\[1, 2, 4, 4\\]: they must have "
     "the same shape", "e"),
    ([X, create("z", [1, 2, 4, 4], dtype="TL_INT32"), op("elew", "e", {"src1": "x", "src2": "z"}, {"dst": "y"},
                                                         elew_op="TL_SUM")],
     "'src2' \\('z'\\) is TL_INT32, but 'src1' \\('x'\\) is TL_FLOAT", "e"),
    ([X, create("z", [1, 3, 4, 4]), op("concat", "c", {"src1": "x", "src2": "z"}, {"dst": "y"}, axis=2)],
     "should have the same shape, except in dimension 2", "c"),
    ([X, op("reshape", "r", {"src": "x"}, {"dst": "y"}, dims=[5, 7])], "has 32 items, the reshaped \\[5, 7\\] 35",
     "r"),
    ([X, op("transpose", "t", {"src": "x"}, {"dst": "y"}, axes=[0, 1, 1, 3])], "should be a permutation", "t"),
    ([X, op("slice", "s", {"src": "x"}, {"dst": "y"}, axis=2, start=2, len=3)], "exceed dimension 2", "s"),
    ([X, *W, conv(group=2)], "dims\\[1\\] of 'weight' \\[3, 2, 3, 3\\] times 'group' \\(2\\) should be the channels",
     "conv"),
    ([X, *W, conv(size=[3, 2])], "'size' \\[3, 2\\] should be equal to the last two dimensions of 'weight'", "conv"),
    ([X, W[0], create("b", [4]), conv()], "'bias' \\[4\\] should have the size of dims\\[0\\] of 'weight'", "conv"),
    ([X, *W, conv(padding=[0, 0, 0, 0], dilation=[3, 3])], "does not fit the input's spatial extents \\[4, 4\\]",
     "conv"),
    ([X, create("w", [2, 3, 3, 3]), create("b", [3]),
      op("deconv2d", "d", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, group=1, size=[3, 3], stride=[2, 2],
         output_dims=[1, 3, 9, 10], padding=[0, 0, 0, 0], output_padding=[0, 0], dilation=[1, 1], autopad="NOTSET")],
     "'output_dims' \\[1, 3, 9, 10\\] do not match the output's dimensions \\[1, 3, 9, 9\\]", "d"),
    ([X, create("w", [2, 3, 3, 3]), create("b", [3]),
      op("deconv2d", "d", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, group=1, size=[3, 3], stride=[2, 2],
         output_dims=[0, 0, 0, 0], padding=[0, 0, 0, 0], output_padding=[0, 0], dilation=[1, 1],
         autopad="SAME_UPPER")], "'autopad' cannot be SAME_UPPER when 'output_dims'", "d"),
    ([X, op("batchnorm", "bn", {"src": "x", "scale": "x", "offset": "x", "mean": "x", "var": "x"}, {"dst": "y"},
            epsilon=0.001)], "'scale' \\('x'\\) should have shape \\[2\\]", "bn"),
    ([X, op("batchnorm", "bn", {"src": "x", "scale": "x", "offset": "x", "mean": "x", "var": "x"}, {"dst": "y"},
            epsilon=0)], "param 'epsilon' should be greater than 0", "bn"),
    ([X, op("resize", "r", {"src": "x"}, {"dst": "y"}, mode="TL_NEAREST", dims=[2, 2])],
     "'dims' \\[2, 2\\] should have one extent per dimension", "r"),
    ([X, op("upsample", "u", {"src": "x"}, {"dst": "y"}, mode="TL_LINEAR", scales=[1, 1, 0.1, 1])],
     "make the empty shape", "u"),
    ([X, op("arange", "a", {}, {"dst": "y"}, dtype="TL_FLOAT", start=2, stop=1, step=1)],
     "'stop' \\(1.0\\) should be greater than 'start'", "a"),
    ([X, create("k", [4]), create("v", [4]), op("sort1d_by_key", "s", {"src_key": "k", "src_val": "v"},
                                                 {"dst_key": "a", "dst_val": "b"}, dir="TL_SORT_DIR_ASCENDING")],
     "'src_val' should be a TL_INT32 vector", "s"),
])
def test_ops_whose_tensors_do_not_fit(ops: list[dict[str, Any]], message: str, at: str, tmp_path: Path) -> None:
    refused(tmp_path, ops, ForeignFormatError, message, at)


@pytest.mark.parametrize(("ops", "message", "at"), [
    ([X, create("z", [1, 2, 4, 4], dtype="TL_INT32"), op("relu", "r", {"src": "z"}, {"dst": "y"})],
     "input 'src' \\('z'\\) is TL_INT32; nnef_torch converts relu on floating tensors", "r"),
    ([X, create("w", [2, 2, 3, 3]), create("b", [2]),
      op("deconv2d", "d", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, group=1, size=[3, 3], stride=[1, 1],
         output_dims=[1, 2, 8, 8], padding=[0, 0, 0, 0], output_padding=[0, 0], dilation=[1, 1],
         autopad="SAME_UPPER")], "the padding \\[-1, -1, -1, -1\\] is negative", "d"),
])
def test_ops_nnef_cannot_express(ops: list[dict[str, Any]], message: str, at: str, tmp_path: Path) -> None:
    refused(tmp_path, ops, NNEFUnsupportedError, message, at)


def test_names_of_inputs_and_outputs_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path, document(X, op("relu", "r", {"src": "x"}, {"dst": "y"})))
    with pytest.raises(ValueError, match="inputs= names \\['y'\\], which no create op makes \\(y computed by ops\\)"):
        nnef_torch.load(path, inputs=["y"])
    with pytest.raises(ValueError, match="outputs= names \\['nope'\\]"):
        nnef_torch.load(path, inputs=["x"], outputs=["nope"])


def test_missing_weights_are_listed_together(tmp_path: Path) -> None:
    path = write(tmp_path, document(X, create("w", [3, 2, 3, 3], from_file=True), create("b", [3], from_file=True),
                                    conv()))
    with pytest.raises(ForeignFormatError, match="2 weight problem") as caught:
        nnef_torch.load(path, inputs=["x"])
    assert "'w' (op 'create_w'" in str(caught.value) and "no weights were given" in str(caught.value)
    with pytest.raises(ForeignFormatError, match="'x' .*it is not in the params mapping.*name it in inputs="):
        nnef_torch.load(path, params={"w": np.zeros(54, np.float32), "b": np.zeros(3, np.float32)})


@pytest.mark.parametrize(("wts", "message", "line"), [
    ("2\nw 0 54 " + " ".join(["3f800000"] * 54) + "\n", "truncated weight file: its count says 2", 3),
    ("2\nw 0 54 " + " ".join(["3f800000"] * 53) + "\nb 0 3 0 0 0\n", "says it holds 54 items, its line has 53", 2),
    ("3\nw 0 54 " + " ".join(["0"] * 54) + "\nb 0 3 0 0 0\nb 0 3 0 0 0\n", "'b' is given twice", 4),
])
def test_bad_weight_files(wts: str, message: str, line: int, tmp_path: Path) -> None:
    path = write(tmp_path, document(X, create("w", [3, 2, 3, 3], from_file=True), create("b", [3], from_file=True),
                                    conv()))
    (tmp_path / "model.wts").write_text(wts)
    with pytest.raises(ForeignFormatError, match=message) as caught:
        nnef_torch.load(path, inputs=["x"])
    assert caught.value.location.file == str(tmp_path / "model.wts") and caught.value.location.line == line


def test_weights_that_do_not_fit_their_tensors(tmp_path: Path) -> None:
    path = write(tmp_path, document(X, create("w", [3, 2, 3, 3], from_file=True), create("b", [3], from_file=True),
                                    conv()))
    (tmp_path / "model.wts").write_text("2\nw 0 2 0 0\nb 2 3 1 2 3\n")
    with pytest.raises(ForeignFormatError, match="2 weight problem") as caught:
        nnef_torch.load(path, inputs=["x"])
    message = str(caught.value)
    assert "'w' in " in message and "holds 2 numbers, but 'dims' [3, 2, 3, 3]" in message
    assert "'b' in " in message and "is int8 (type 2), but op 'create_b' (create, ops[2]) creates TL_FLOAT" in message


def test_bad_params_argument(tmp_path: Path) -> None:
    path = write(tmp_path, document(X))
    with pytest.raises(ForeignFormatError, match="no such weight file"):
        nnef_torch.load(path, inputs=["x"], params=tmp_path / "missing.wts")
    with pytest.raises(TypeError, match="params must be a path or a mapping"):
        nnef_torch.load(path, inputs=["x"], params=3)
    with pytest.raises(ValueError, match="not of numbers"):
        nnef_torch.load(path, inputs=["x"], params={"x": np.array(["a"])})


K = create("k", [4], from_file=True)
SORT = op("sort1d", "s", {"src_key": "k2"}, {"dst_key": "sorted"}, dir="TL_SORT_DIR_ASCENDING")


@pytest.mark.parametrize(("ops", "outputs", "message"), [
    ([K, op("reshape", "r", {"src": "k"}, {"dst": "k2"}, dims=[4]), SORT, op("relu", "late", {"src": "k"}, {"dst": "y"})],
     None, "op 'late' \\(relu, ops\\[3\\]\\) reads 'k' after op 's' \\(sort1d, ops\\[2\\]\\) rewrote it"),
    ([K, op("reshape", "r", {"src": "k"}, {"dst": "k2"}, dims=[4]), SORT], ["sorted", "k2"],
     "the model's outputs reads 'k2' after op 's'"),
    ([K, create("i", [4], dtype="TL_INT32", ran=(0, 9)),
      op("rearange", "ra", {"src": "i"}, {"dst": "order"}, start=0, stop=4, step=1),
      op("print", "p", {"src": "i"}, {}, msg="i")], None, "op 'p' \\(print, ops\\[3\\]\\) reads 'i' after op 'ra'"),
])
def test_reading_what_an_in_place_op_rewrote_is_refused(ops: list[dict[str, Any]], outputs: list[str] | None,
                                                        message: str, tmp_path: Path) -> None:
    path = write(tmp_path, document(*ops))
    with pytest.raises(NNEFUnsupportedError, match=message):
        nnef_torch.load(path, inputs=["k"], outputs=outputs)


def test_reading_after_an_in_place_op_through_a_later_alias_is_fine(tmp_path: Path) -> None:
    ops = [K, op("reshape", "r", {"src": "k"}, {"dst": "k2"}, dims=[4]), SORT,
           op("reshape", "again", {"src": "sorted"}, {"dst": "flat"}, dims=[2, 2])]
    module = nnef_torch.load(write(tmp_path, document(*ops)), inputs=["k"])
    assert module(__import__("torch").tensor([3.0, 1.0, 2.0, 0.0])).tolist() == [[0.0, 1.0], [2.0, 3.0]]
