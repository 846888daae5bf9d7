"""Fuzzing the LightNet front end: mutated JSON IR documents (the tests' own network and the fixtures, in both
layouts), their text, the options that name their tensors, and the weight files beside them, are converted or
refused with a located `NNEFError`; nothing else escapes (`NNEF_TORCH_FUZZ_SCALE` scales the example counts).
Mutated `.wts` text alone is fuzzed in `test_wts.py`."""
from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from formats.lightnet.lightnet_ir import create, document, hand_layout, il2json_layout, op
from nnef_torch.errors import NNEFError
from nnef_torch.reader import read_model

FIXTURES = Path(__file__).parent / "fixtures"
OPTYPES = st.sampled_from(["create", "conv2d", "relu", "slice", "print", "elew", "concat", "reshape", "maxpool2d",
                           "batchnorm", "sort1d", "upsample", "resize", "pick1d", "conv2d_cpu", "tensorrt", "gelu",
                           "deconv2d", "forward", "zeros", "arange", "detect_yolov3", "softmax", "transpose",
                           "rearange", "lrelu", "submean", "sort1d_by_key"])
NUMBERS = st.one_of(st.integers(-3, 9), st.integers(-(2 ** 40), 2 ** 40), st.integers(2 ** 20, 2 ** 31 - 1),
                    st.floats(allow_nan=False, allow_infinity=False, width=32),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e39, -1e39, 1e300, 5e-324]))
VALUES = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=8),
                   st.sampled_from(["TL_FLOAT", "TL_INT32", "TL_DOUBLE", "TL_BOOL", "NOTSET", "SAME_UPPER", "VALID",
                                    "TL_SUM", "TL_NEAREST", "TL_LINEAR", "TL_SORT_DIR_ASCENDING", "inf", "NaN"]),
                   st.lists(st.integers(-1, 5), max_size=5), st.lists(st.floats(-2, 4, width=32), max_size=5),
                   st.lists(NUMBERS, min_size=1, max_size=4),
                   st.dictionaries(st.sampled_from(["a", "name"]), st.integers(0, 2), max_size=2))
ARGS = st.sampled_from(["src", "src1", "src2", "dst", "weight", "bias", "arg", "msg", "axis", "start", "len",
                        "dims", "data", "size", "stride", "padding", "autopad", "group", "dilation", "x", "",
                        "from_file", "ran", "dtype", "scales", "stop", "step", "negslope"])
TENSORS = st.sampled_from(["x", "w", "b", "y", "z", "s", "nothing", "input", "conv1", "prob", "tensor1", "tensor2"])
SEEDS = ("base", "net_il2json", "seed_example")


def base() -> dict[str, Any]:
    return document(create("x", [1, 2, 4, 4], from_file=True),
                    create("w", [3, 2, 3, 3], np.linspace(-1, 1, 54)), create("b", [3], [0.5, -0.5, 0]),
                    op("conv2d", "conv", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, group=1,
                       size=[3, 3], stride=[1, 1], dilation=[1, 1], padding=[1, 1, 1, 1], autopad="NOTSET"),
                    op("slice", "cut", {"src": "y"}, {"dst": "s"}, axis=1, start=1, len=2),
                    op("relu", "act", {"src": "s"}, {"dst": "z"}),
                    op("print", "show", {"src": "z"}, {}, msg="z:"))


def seed(name: str) -> dict[str, Any]:
    return base() if name == "base" else json.loads((FIXTURES / f"{name}.json").read_text())


@st.composite
def mutated(draw: st.DrawFn, name: str = "base") -> dict[str, Any]:
    doc = seed(name)
    for _ in range(draw(st.integers(1, 4))):
        ops = doc.get("ops")
        if not isinstance(ops, list) or not ops:
            break
        item = ops[draw(st.integers(0, len(ops) - 1))]
        where = draw(st.sampled_from(["optype", "param", "param_value", "tensor", "arg", "key", "drop", "move",
                                      "dup", "top", "rename"]))
        if not isinstance(item, dict) or not all(isinstance(item.get(key), list) and
                                                 all(isinstance(entry, dict) for entry in item[key])
                                                 for key in ("params", "tensors_in", "tensors_out")):
            continue  # an earlier mutation broke this op: the reader refuses it already
        if where == "optype":
            item["optype"] = draw(OPTYPES)
        elif where == "param" and item["params"]:
            item["params"][draw(st.integers(0, len(item["params"]) - 1))]["arg_name"] = draw(ARGS)
        elif where == "param_value" and item["params"]:
            item["params"][draw(st.integers(0, len(item["params"]) - 1))]["value"] = draw(VALUES)
        elif where == "tensor":
            key = draw(st.sampled_from(["tensors_in", "tensors_out"]))
            if item[key]:
                item[key][draw(st.integers(0, len(item[key]) - 1))]["name"] = draw(TENSORS)
        elif where == "arg":
            key = draw(st.sampled_from(["tensors_in", "tensors_out"]))
            item[key].append({"arg_name": draw(ARGS), "name": draw(TENSORS)})
        elif where == "key":
            item[draw(st.sampled_from(["name", "optype", "params", "tensors_in", "extra"]))] = draw(VALUES)
        elif where == "drop":
            item.pop(draw(st.sampled_from(["name", "optype", "params", "tensors_in", "tensors_out"])), None)
        elif where == "move":
            ops.insert(draw(st.integers(0, len(ops))), ops.pop(draw(st.integers(0, len(ops) - 1))))
        elif where == "dup":
            ops.append(copy.deepcopy(item))
        elif where == "rename":  # names that become one identifier or label
            item["name"] = draw(st.sampled_from(["a!", "a?", "A!", "relu", "t0", "x", "1", "\u00e9", "\ud800"]))
        else:
            doc[draw(st.sampled_from(["ops", "extra"]))] = draw(VALUES)
    return doc


OPTIONS = st.fixed_dictionaries({}, optional={
    "inputs": st.lists(TENSORS, max_size=2), "outputs": st.lists(TENSORS, max_size=2),
    "input_shapes": st.dictionaries(TENSORS, st.one_of(st.lists(st.integers(-1, 6), max_size=4),
                                                       st.lists(st.integers(2 ** 30, 2 ** 40), min_size=1,
                                                                max_size=3), st.text(max_size=3)), max_size=1)})


def convert(path: Any, **options: Any) -> None:
    options = {"inputs": ["x"], **options}
    if "input_shapes" in options and not options.get("inputs"):
        del options["input_shapes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_model(path, format="lightnet", **options)
        except NNEFError as error:  # located in the model, or in the weights beside it
            assert error.location is not None and error.location.file in (str(path), str(path)[:-5] + ".wts"), error


@fuzz(300)
@given(mutated(), OPTIONS, st.booleans())
def test_mutated_document_is_converted_or_refused_cleanly(tmp_path_factory, doc: dict[str, Any],
                                                          options: dict[str, Any], il2json: bool) -> None:
    path = tmp_path_factory.mktemp("ir") / "model.json"
    path.write_text(il2json_layout(doc) if il2json else json.dumps(doc))
    convert(path, **options)


@fuzz(200)
@given(st.sampled_from(SEEDS[1:]).flatmap(lambda name: st.tuples(st.just(name), mutated(name))), OPTIONS)
def test_mutated_fixture_is_converted_or_refused_cleanly(tmp_path_factory, named: tuple[str, dict[str, Any]],
                                                         options: dict[str, Any]) -> None:
    name, doc = named
    folder = tmp_path_factory.mktemp("ir")
    path = folder / "model.json"
    path.write_text(il2json_layout(doc))
    if name == "net_il2json":
        (folder / "model.wts").write_bytes((FIXTURES / "net_il2json.wts").read_bytes())
        options.setdefault("inputs", ["input"])
    convert(path, **options)


@fuzz(200)
@given(st.data())
def test_mutated_text_is_converted_or_refused_cleanly(tmp_path_factory, data: st.DataObject) -> None:
    text = bytearray(hand_layout(base()).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text) - 1))
        how = data.draw(st.sampled_from(["byte", "cut", "insert"]))
        if how == "byte":
            text[at] = data.draw(st.sampled_from(b'{}[]",:0123456789-.e tfn\n\xff'))
        elif how == "cut":
            del text[at:at + data.draw(st.integers(1, 20))]
        else:
            text[at:at] = data.draw(st.sampled_from([b"[", b"{", b'"', b",", b"1e999", b"-", b"null", b"\\u0000",
                                                     b"1e39", b'"ops": [], ', b"99999999999999999999",
                                                     b"\\ud800", b"\xc3\xa9"]))
    path = tmp_path_factory.mktemp("ir") / "model.json"
    path.write_bytes(bytes(text))
    convert(path)


@fuzz(200)
@given(st.data())
def test_mutated_weights_beside_a_model_are_read_or_refused_cleanly(tmp_path_factory, data: st.DataObject) -> None:
    """The fixture network with its .wts file mutated (read through a mapping of the file, only the arrays the
    creates read kept)."""
    text = bytearray((FIXTURES / "net_il2json.wts").read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        how = data.draw(st.sampled_from(["byte", "cut", "insert", "line"]))
        if how == "byte" and at < len(text):
            text[at] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del text[at:at + data.draw(st.integers(1, 40))]
        elif how == "insert":
            text[at:at] = data.draw(st.sampled_from([b" ", b"\n", b"\t", b"\r\n", b"0x", b"\n\n\n", b"-1", b"F",
                                                     b" 0", b"99999999999", b"zz", b"\x00", b"\xe9"]))
        else:
            line = data.draw(st.sampled_from([b"conv1_bias 0 4 0 1 2 3\n", b"extra 2 2 ff 0x1\n",
                                              b"bn_var 0 4 3f800000 3f800000 3f800000 3f800000\n", b"2\n"]))
            text[at:at] = line
    folder = tmp_path_factory.mktemp("ir")
    (folder / "model.json").write_bytes((FIXTURES / "net_il2json.json").read_bytes())
    (folder / "model.wts").write_bytes(bytes(text))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_model(folder / "model.json", inputs=["input"])
        except NNEFError as error:
            assert error.location is not None and error.location.file in (str(folder / "model.json"),
                                                                           str(folder / "model.wts")), error
