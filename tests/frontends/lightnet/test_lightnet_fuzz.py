"""Fuzzing the LightNet front end: mutated JSON IR documents (and their text) are converted or refused with a
located `NNEFError`; nothing else escapes (`NNEF_TORCH_FUZZ_SCALE` scales the example counts). The `.wts` reader is
fuzzed in `test_wts.py`."""
from __future__ import annotations

import copy
import json
import warnings
from typing import Any

import numpy as np
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from frontends.lightnet.lightnet_ir import create, document, hand_layout, op
from nnef_torch.errors import NNEFError
from nnef_torch.reader import read_model

OPTYPES = st.sampled_from(["create", "conv2d", "relu", "slice", "print", "elew", "concat", "reshape", "maxpool2d",
                           "batchnorm", "sort1d", "upsample", "resize", "pick1d", "conv2d_cpu", "tensorrt", "gelu",
                           "deconv2d", "forward", "zeros", "arange", "detect_yolov3", "softmax", "transpose"])
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.integers(-(2 ** 40), 2 ** 40),
                   st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=8),
                   st.sampled_from(["TL_FLOAT", "TL_INT32", "NOTSET", "SAME_UPPER", "VALID", "TL_SUM", "TL_NEAREST",
                                    "TL_SORT_DIR_ASCENDING"]),
                   st.lists(st.integers(-1, 5), max_size=5), st.lists(st.floats(-2, 4, width=32), max_size=5),
                   st.dictionaries(st.sampled_from(["a", "name"]), st.integers(0, 2), max_size=2))
ARGS = st.sampled_from(["src", "src1", "src2", "dst", "weight", "bias", "arg", "msg", "axis", "start", "len",
                        "dims", "data", "size", "stride", "padding", "autopad", "group", "dilation", "x", ""])
TENSORS = st.sampled_from(["x", "w", "b", "y", "z", "s", "nothing"])


def base() -> dict[str, Any]:
    return document(create("x", [1, 2, 4, 4], from_file=True),
                    create("w", [3, 2, 3, 3], np.linspace(-1, 1, 54)), create("b", [3], [0.5, -0.5, 0]),
                    op("conv2d", "conv", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, group=1,
                       size=[3, 3], stride=[1, 1], dilation=[1, 1], padding=[1, 1, 1, 1], autopad="NOTSET"),
                    op("slice", "cut", {"src": "y"}, {"dst": "s"}, axis=1, start=1, len=2),
                    op("relu", "act", {"src": "s"}, {"dst": "z"}),
                    op("print", "show", {"src": "z"}, {}, msg="z:"))


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = base()
    for _ in range(draw(st.integers(1, 4))):
        ops = doc.get("ops")
        if not isinstance(ops, list) or not ops:
            break
        item = ops[draw(st.integers(0, len(ops) - 1))]
        where = draw(st.sampled_from(["optype", "param", "param_value", "tensor", "arg", "key", "drop", "move",
                                      "dup", "top"]))
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
        else:
            doc[draw(st.sampled_from(["ops", "extra"]))] = draw(VALUES)
    return doc


def convert(path: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_model(path, format="lightnet", inputs=["x"])
        except NNEFError as error:
            assert error.location is not None and error.location.file == str(path), error
        except ValueError as error:  # API misuse, not file content: inputs= naming what the file no longer creates
            assert "inputs=" in str(error), error


@fuzz(300)
@given(mutated())
def test_mutated_document_is_converted_or_refused_cleanly(tmp_path_factory, doc: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("ir") / "model.json"
    path.write_text(json.dumps(doc))
    convert(path)


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
            text[at:at] = data.draw(st.sampled_from([b"[", b"{", b'"', b",", b"1e999", b"-", b"null", b"\\u0000"]))
    path = tmp_path_factory.mktemp("ir") / "model.json"
    path.write_bytes(bytes(text))
    convert(path)
