"""The optype table against LightNet's op definitions (`protos/op/*.op`, read from the LightNet sources where they
are at hand): every generic optype, its tensor arg_names in order, its params in order with their types, lengths and
static bounds; and the checks of param values the table makes."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nnef_torch.formats.lightnet.optypes import OPTYPES, check_param, compiled

MIRROR = Path("/work/.mirror/zhaozhixu+LightNet/repo")
_KINDS = {("LN_PARAM_NUMBER", "int"): "int", ("LN_PARAM_NUMBER", "float"): "float",
          ("LN_PARAM_NUMBER", "double"): "double", ("LN_PARAM_ARRAY_NUMBER", "int"): "int[]",
          ("LN_PARAM_ARRAY_NUMBER", "float"): "float[]", ("LN_PARAM_ARRAY_NUMBER", "double"): "double[]",
          ("LN_PARAM_STRING", None): "string", ("LN_PARAM_STRING", "int"): "string", ("LN_PARAM_BOOL", None): "bool"}


def op_files() -> dict[str, str]:
    if not MIRROR.exists():
        pytest.skip("the LightNet sources (protos/op) are not at hand")
    names = subprocess.run(["git", "--git-dir", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD", "protos/op"],
                           capture_output=True, text=True, check=True).stdout.split()
    return {name: subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"HEAD:{name}"], capture_output=True,
                                 text=True, check=True).stdout for name in names}


def generic_definitions() -> dict[str, dict]:
    """optype -> {'in': [...], 'out': [...], 'params': [(name, kind, len, bounds)]} of the arch 'none' blocks."""
    found = {}
    for path, text in op_files().items():
        text = re.sub(r"`.*?`", '""', text, flags=re.S)  # C code blocks
        text = re.sub(r"//[^\n]*", "", text)
        for block in re.findall(r"^\w+ \{\n(.*?)^\}", text, flags=re.S | re.M):
            optype = re.search(r'optype:\s*"(\w+)"', block).group(1)
            if 'arch: "none"' not in block or "/dpu/" in path:
                continue
            at = {key: block.index(f"{key}:") for key in ("tensors_in", "tensors_out", "params")}
            params = []
            for entry in re.findall(r"\{([^{}]*arg_name[^{}]*)\}", block[at["params"]:]):
                name = re.search(r'arg_name:\s*"(\w+)"', entry).group(1)
                ptype = re.search(r'ptype:\s*"(\w+)"', entry).group(1)
                realtype = re.search(r'realtype:\s*"(\w+)"', entry)
                length = re.search(r"\blen:\s*(\d+)", entry)
                bounds = {key: float(value) for key, value in re.findall(r"\b(gt|ge|le):\s*(-?[\d.]+)\b", entry)}
                params.append((name, _KINDS[(ptype, realtype.group(1) if realtype else None)],
                               int(length.group(1)) if length else None, bounds))
            found[optype] = {
                "in": re.findall(r'arg_name:\s*"(\w+)"', block[at["tensors_in"]:at["tensors_out"]]),
                "out": re.findall(r'arg_name:\s*"(\w+)"', block[at["tensors_out"]:at["params"]]),
                "params": params}
    return found


def test_table_matches_the_op_definitions() -> None:
    definitions = generic_definitions()
    assert sorted(definitions) == sorted(OPTYPES)
    for optype, definition in definitions.items():
        entry = OPTYPES[optype]
        assert list(entry.tensors_in) == definition["in"], optype
        assert list(entry.tensors_out) == definition["out"], optype
        table = [(p.name, p.kind, p.length, {k: v for k, v in (("gt", p.gt), ("ge", p.ge), ("le", p.le))
                                             if v is not None}) for p in entry.params]
        if optype == "create":  # the documentation's order: data before ran
            assert sorted(table, key=str) == sorted(definition["params"], key=str)
            assert [p.name for p in entry.params] == ["dtype", "dims", "data", "ran", "from_file"]
        else:
            assert table == definition["params"], optype


def test_compiled_optypes_are_recognised() -> None:
    for optype in ("conv2d_cpu", "conv2d_cuda", "relu_cudnn", "conv1x1_dpu", "tensorrt", "ldmr", "svmr_dpu",
                   "bn2scale_wts_cpu", "gather_nocopy_cuda"):
        assert compiled(optype) is not None, optype
    for optype in ("conv2d", "gelu", "cpu", "foo_cpu"):
        assert compiled(optype) is None, optype


@pytest.mark.parametrize(("optype", "param", "value", "problem"), [
    ("conv2d", "group", 2, None),
    ("conv2d", "group", 2.0, None),
    ("conv2d", "group", 0, "should be at least 1, found 0"),
    ("conv2d", "group", 2.5, "should be an integer, found 2.5"),
    ("conv2d", "group", 2 ** 31, "out of the range of a C int"),
    ("conv2d", "group", "2", "should be an integer, found the string '2'"),
    ("conv2d", "padding", [0, 0, 0], "should have 4 items, found 3"),
    ("conv2d", "padding", [0, 0, 0, -1], "item 3 should be at least 0, found -1"),
    ("conv2d", "padding", 0, "should be an array of integers, found the number 0"),
    ("conv2d", "autopad", "WHATEVER", None),
    ("deconv2d", "autopad", "WHATEVER", "should be one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"),
    ("create", "from_file", 0, "should be true or false, found the number 0"),
    ("create", "data", [], "is an empty array"),
    ("create", "data", [0.5, True], "item 1 should be a number, found true"),
    ("batchnorm", "epsilon", 0.0, "should be greater than 0, found 0"),
    ("lrelu", "negslope", None, "should be a number, found null"),
    ("print", "msg", ["a"], "should be a string, found an array"),
])
def test_check_param(optype: str, param: str, value: object, problem: str | None) -> None:
    entry = OPTYPES[optype]
    found = check_param(entry, entry.param(param), value)
    assert found == problem if problem is None else problem in found
