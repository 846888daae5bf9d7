"""Every LightNet optype the JSON IR may name, as LightNet's operator definitions (`protos/op/*.op`) declare it.

Shared by the reader (which checks each op of a file against it) and the writer (which writes ops from it), so that
both speak one vocabulary. The API, kept stable for both:

- `OPTYPES[optype] -> OpType`: the generic (architecture-independent) optypes. `OpType.tensors_in` and
  `OpType.tensors_out` are the tensor `arg_name`s in declared order; `OpType.params` the params (`Param`) in the
  order LightNet's tools write them, which is the `.op` order except for `create`, written as the documentation's
  example writes it (dtype, dims, data, ran, from_file). `OpType.param(name)` finds one.
- `Param`: `name` (the `arg_name`), `kind` (one of `KINDS`), `length` (the exact item count of an array, else None),
  the static bounds `gt`, `ge`, `le` (numbers, or None; an array's bounds hold for each item), `choices` (the
  strings a string param may take, or None for free text), `default` (the value a writer uses when it has nothing
  better to say: LightNet itself requires every param, so readers never fill it in).
- `check_param(optype, param, value) -> str | None`: the problem with a JSON value for a param, or None.
- `DTYPES`: TensorLight dtype names -> numpy dtype names; `ELEW_OPS`, `RESIZE_MODES`, `SORT_DIRS`, `AUTOPADS`.
- `compiled(optype) -> str | None`: why an optype that is no generic one belongs to a compiled IR (an architecture's
  optype such as `conv2d_cpu`, the folded `tensorrt` op, the DPU's layout ops), or None when LightNet has no such
  optype at all. `BACKEND_ONLY`: the optypes only LightNet's optimizers write, with what each is.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

# TensorLight's dtypes (tl_dtype names) as numpy dtypes
DTYPES = {"TL_DOUBLE": "float64", "TL_FLOAT": "float32", "TL_INT64": "int64", "TL_INT32": "int32",
          "TL_INT16": "int16", "TL_INT8": "int8", "TL_UINT64": "uint64", "TL_UINT32": "uint32",
          "TL_UINT16": "uint16", "TL_UINT8": "uint8", "TL_BOOL": "bool"}
ELEW_OPS = ("TL_MUL", "TL_DIV", "TL_SUM", "TL_SUB", "TL_MAX", "TL_MIN", "TL_POW")
RESIZE_MODES = ("TL_NEAREST", "TL_LINEAR")
SORT_DIRS = ("TL_SORT_DIR_ASCENDING", "TL_SORT_DIR_DESCENDING")
AUTOPADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")

# param kinds: LightNet's ptype with its realtype (what the C code reads the JSON number as)
KINDS = ("int", "float", "double", "string", "bool", "int[]", "float[]", "double[]")


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    length: int | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None


@dataclass(frozen=True)
class OpType:
    name: str
    tensors_in: tuple[str, ...]
    tensors_out: tuple[str, ...]
    params: tuple[Param, ...] = ()

    def param(self, name: str) -> Param | None:
        return next((param for param in self.params if param.name == name), None)


def _op(name: str, tensors_in: str, tensors_out: str, *params: Param) -> OpType:
    return OpType(name, tuple(tensors_in.split()), tuple(tensors_out.split()), params)


_SIZE = Param("size", "int[]", 2, ge=1)
_STRIDE = Param("stride", "int[]", 2, ge=1, default=[1, 1])
_DILATION = Param("dilation", "int[]", 2, ge=1, default=[1, 1])
_PADDING = Param("padding", "int[]", 4, ge=0, default=[0, 0, 0, 0])  # [top, left, bottom, right]
# conv2d and the pools accept any autopad string (an unknown one is warned about and ignored); deconv2d does not
_AUTOPAD = Param("autopad", "string", default="NOTSET")
_DTYPE = Param("dtype", "string", choices=tuple(DTYPES), default="TL_FLOAT")
_MODE = Param("mode", "string", choices=RESIZE_MODES, default="TL_NEAREST")
_DIR = Param("dir", "string", choices=SORT_DIRS, default="TL_SORT_DIR_ASCENDING")
_RANGE = (Param("start", "double"), Param("stop", "double"), Param("step", "double", default=1))
_POOL = (Param("size", "int[]", 2, gt=0), Param("stride", "int[]", 2, gt=0, default=[1, 1]), _PADDING, _AUTOPAD)

OPTYPES: dict[str, OpType] = {op.name: op for op in (
    _op("create", "", "dst", _DTYPE, Param("dims", "int[]", gt=0), Param("data", "double[]", default=[0]),
        Param("ran", "double[]", 2, default=[0, 0]), Param("from_file", "bool", default=False)),
    _op("zeros", "", "dst", _DTYPE, Param("dims", "int[]", gt=0)),
    _op("arange", "", "dst", _DTYPE, *_RANGE),
    _op("conv2d", "src weight bias", "dst", Param("group", "int", ge=1, default=1), _SIZE, _STRIDE, _DILATION,
        _PADDING, _AUTOPAD),
    _op("deconv2d", "src weight bias", "dst", Param("group", "int", ge=1, default=1), _SIZE, _STRIDE,
        Param("output_dims", "int[]", 4, ge=0, default=[0, 0, 0, 0]), _PADDING,
        Param("output_padding", "int[]", 2, ge=0, default=[0, 0]), _DILATION,
        Param("autopad", "string", choices=AUTOPADS, default="NOTSET")),
    _op("maxpool2d", "src", "dst", *_POOL),
    _op("avgpool2d", "src", "dst", *_POOL),
    _op("batchnorm", "src scale offset mean var", "dst", Param("epsilon", "float", gt=0, default=1e-5)),
    _op("elew", "src1 src2", "dst", Param("elew_op", "string", choices=ELEW_OPS)),
    _op("relu", "src", "dst"),
    _op("lrelu", "src", "dst", Param("negslope", "float", default=0.01)),
    _op("sigmoid", "src", "dst"),
    _op("softmax", "src", "dst", Param("axis", "int")),
    _op("concat", "src1 src2", "dst", Param("axis", "int")),
    _op("reshape", "src", "dst", Param("dims", "int[]", ge=1)),
    _op("transpose", "src", "dst", Param("axes", "int[]", ge=0)),
    _op("slice", "src", "dst", Param("axis", "int", ge=0), Param("start", "int", ge=0), Param("len", "int", gt=0)),
    _op("resize", "src", "dst", _MODE, Param("dims", "int[]", gt=0)),
    _op("upsample", "src", "dst", _MODE, Param("scales", "float[]", gt=0)),
    _op("maxreduce", "src", "dst", Param("axis", "int")),
    _op("maxreduce_arg", "src", "dst arg", Param("axis", "int")),
    _op("dot_product", "src1 src2", "dst"),
    _op("forward", "src", "dst"),
    _op("print", "src", "", Param("msg", "string", default="")),
    _op("fprint", "src", "", Param("msg", "string", default=""), Param("file", "string")),
    _op("sort1d", "src_key", "dst_key", _DIR),
    _op("sort1d_by_key", "src_key src_val", "dst_key dst_val", _DIR),
    _op("pick1d", "src src_index", "dst", Param("len", "int"), Param("stride", "int", ge=1, default=1)),
    _op("rearange", "src", "dst", *_RANGE),
    _op("submean", "src", "dst", Param("mean", "double[]", 3), _DTYPE),
    _op("transform_bboxSQD", "src_delta src_anchor", "dst", Param("width", "int", gt=0),
        Param("height", "int", gt=0), Param("img_width", "int", gt=0), Param("img_height", "int", gt=0),
        Param("x_shift", "int", default=0), Param("y_shift", "int", default=0)),
    _op("detect_yolov3", "feature anchors", "box_centers box_sizes boxes confs probs",
        Param("img_width", "int", gt=0), Param("img_height", "int", gt=0)),
)}

# the architectures of LightNet's compiled IRs: an optype with one of these suffixes is a generic op bound to it
ARCHS = ("cpu", "cuda", "cudnn", "tensorrt", "dpu")
BACKEND_ONLY = {
    "tensorrt": "the TensorRT engine op into which LightNet's tensorrt optimizer folds a run of generic ops",
    "bn2scale_wts_cpu": "a weight-folding step that LightNet's tensorrt optimizer inserts for batchnorm",
    "conv1x1_dpu": "a DPU convolution kernel", "conv3x3_dpu": "a DPU convolution kernel",
    "ldmr": "a DPU memory-layout op (load with channels padded to a multiple of 8)",
    "svmr": "a DPU memory-layout op (save from the DPU's layout)",
    "gather": "a memory-planning op of LightNet's optimizers",
    "scatter": "a memory-planning op of LightNet's optimizers",
    "gather_nocopy": "a memory-planning op of LightNet's optimizers",
    "scatter_nocopy": "a memory-planning op of LightNet's optimizers",
}


def compiled(optype: str) -> str | None:
    """Why `optype` belongs to a compiled IR (one that LightNet's optimizer wrote for an architecture), or None."""
    if optype in BACKEND_ONLY:
        return BACKEND_ONLY[optype]
    base, _, arch = optype.rpartition("_")
    if arch in ARCHS and (base in OPTYPES or base in BACKEND_ONLY):
        return f"the {base} op compiled for LightNet's {arch} architecture"
    return None


def check_param(optype: OpType, param: Param, value: Any) -> str | None:
    """What is wrong with the JSON `value` of `param` of `optype` by the definition alone (its JSON type, length,
    bounds and choices), or None. Checks that need the input tensors (axes in range, ...) are the rules' job."""
    scalar = param.kind.rstrip("[]")
    if param.kind.endswith("[]"):
        if not isinstance(value, list):
            return f"should be an array of {_NOUNS[scalar]}s, found {_describe(value)}"
        if not value:
            return "is an empty array (LightNet reads no empty arrays)"
        if param.length is not None and len(value) != param.length:
            return f"should have {param.length} items, found {len(value)}"
        for index, item in enumerate(value):
            problem = _check_scalar(param, scalar, item)
            if problem is not None:
                return f"item {index} {problem}"
        return None
    return _check_scalar(param, scalar, value)


_NOUNS = {"int": "integer", "float": "number", "double": "number", "string": "string", "bool": "boolean"}


def _check_scalar(param: Param, kind: str, value: Any) -> str | None:
    if kind == "bool":
        return None if isinstance(value, bool) else f"should be true or false, found {_describe(value)}"
    if kind == "string":
        if not isinstance(value, str):
            return f"should be a string, found {_describe(value)}"
        if param.choices is not None and value not in param.choices:
            return f"should be one of {', '.join(param.choices)}, found {value!r}"
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"should be {'an integer' if kind == 'int' else 'a number'}, found {_describe(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"should be a finite number, found {value!r}"
    if kind == "int" and value != int(value):
        return f"should be an integer, found {value!r}"
    if kind == "int" and not -2**31 <= value < 2**31:
        return f"is {_number(value)}, out of the range of a C int"
    if kind != "int" and abs(value) > _LARGEST[kind]:  # a C float or double would hold an infinity
        return f"is {_number(value)}, out of the range of a C {kind}"
    if param.gt is not None and not value > param.gt:
        return f"should be greater than {_number(param.gt)}, found {_number(value)}"
    if param.ge is not None and not value >= param.ge:
        return f"should be at least {_number(param.ge)}, found {_number(value)}"
    if param.le is not None and not value <= param.le:
        return f"should be at most {_number(param.le)}, found {_number(value)}"
    return None


_LARGEST = {"float": 3.4028234663852886e38, "double": sys.float_info.max}  # FLT_MAX, DBL_MAX


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value) if abs(value) < 10 ** 20 else f"{'-' if value < 0 else ''}~2^{abs(value).bit_length() - 1}"
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {_number(value) if isinstance(value, int) else repr(value)}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return "an array" if isinstance(value, list) else "an object"


__all__ = ["ARCHS", "AUTOPADS", "BACKEND_ONLY", "DTYPES", "ELEW_OPS", "KINDS", "OPTYPES", "RESIZE_MODES",
           "SORT_DIRS", "OpType", "Param", "check_param", "compiled"]
