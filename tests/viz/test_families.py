"""Operation families: every standard op has a family, the library fragments the table names exist, and each
family has its own colour."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import nnef_torch
from nnef_torch.stdlib import standard_fragments
from nnef_torch.viz.families import FAMILIES, FAMILY_COLOURS, FAMILY_OF, colour, family

PACKAGE = Path(nnef_torch.__file__).parent
LIBRARIES = [PACKAGE / "stdlib" / "extensions.nnef", *sorted((PACKAGE / "formats").glob("*/fragments.nnef"))]

# op -> family, one row per kind of case: standard ops of each family, library fragments, names the table does
# not hold, and other frameworks' names
FAMILY_ROWS = [
    ("conv", "convolution"), ("deconv", "convolution"), ("separable_conv", "convolution"), ("box", "convolution"),
    ("linear", "convolution"), ("matmul", "convolution"),
    ("max_pool", "pooling"), ("avg_pool", "pooling"), ("argmax_pool", "pooling"), ("max_roi_align", "pooling"),
    ("sum_reduce", "reduction"), ("mean_reduce", "reduction"), ("argmax_reduce", "reduction"),
    ("relu", "activation"), ("sigmoid", "activation"), ("tanh", "activation"), ("elu", "activation"),
    ("gelu", "activation"), ("softmax", "activation"), ("prelu", "activation"),
    ("batch_normalization", "normalization"), ("local_response_normalization", "normalization"),
    ("l2_normalization", "normalization"), ("moments", "normalization"),
    ("add", "element-wise"), ("lt", "element-wise"), ("and", "element-wise"), ("exp", "element-wise"),
    ("select", "element-wise"), ("clamp", "element-wise"), ("max", "element-wise"), ("cast", "element-wise"),
    ("reshape", "shape"), ("transpose", "shape"), ("concat", "shape"), ("slice", "shape"), ("pad", "shape"),
    ("gather", "shape"), ("copy", "shape"), ("unstack", "shape"),
    ("linear_quantize", "quantization"), ("zero_point_linear_quantize", "quantization"),
    ("nearest_upsample", "resize"), ("area_downsample", "resize"), ("multilinear_upsample", "resize"),
    ("external", "other"), ("variable", "other"), ("update", "other"),
    # fragments of the package libraries
    ("gelu_erf", "activation"), ("gelu_tanh", "activation"), ("hard_swish", "activation"),
    ("log_softmax", "activation"), ("layer_norm", "normalization"), ("group_norm", "normalization"),
    ("instance_norm", "normalization"), ("erf_rational", "element-wise"), ("prod_reduce", "reduction"),
    ("scaled_dot_product_attention", "convolution"),
    # names the table does not hold
    ("my_custom_op", "other"), ("", "other"), (None, "other"), ("requantize_int8", "quantization"),
    # TVM Relay names (RelayViz documents)
    ("nn.conv2d", "convolution"), ("nn.dense", "convolution"), ("nn.max_pool2d", "pooling"),
    ("nn.batch_norm", "normalization"), ("qnn.dequantize", "quantization"), ("image.resize2d", "resize"),
    ("multiply", "element-wise"), ("expand_dims", "shape"),
]


@pytest.mark.parametrize("op, expected", FAMILY_ROWS)
def test_family_of_op(op, expected):
    assert family(op) == expected


def test_every_standard_op_but_the_declarations_has_a_family():
    unclassified = sorted(name for name in standard_fragments() if family(name) == "other")
    assert unclassified == ["constant", "external", "update", "variable"]


def test_table_names_only_ops_that_exist():
    library = set()
    for path in LIBRARIES:
        library.update(re.findall(r"^fragment\s+(\w+)", path.read_text(encoding="utf-8"), re.MULTILINE))
    older_standard = {"planewise_conv", "planewise_deconv"}  # NNEF 1.0.0 ops, still found in old models
    assert set(FAMILY_OF) - set(standard_fragments()) - library - older_standard == set()


def test_families_have_distinct_colours():
    assert FAMILIES[0] == "convolution" and FAMILIES[-1] == "other"
    assert set(FAMILY_OF.values()) <= set(FAMILIES)
    values = list(FAMILY_COLOURS.values())
    assert len(set(values)) == len(values)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", value) for value in values)
    assert colour("no such family") == FAMILY_COLOURS["other"]
