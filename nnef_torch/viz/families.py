"""The family of each operation, which sets its fill colour in a drawing.

Families, each a small set a reader can tell apart by colour:

- convolution: the layers that weigh their input with a filter or matrix. `linear` and `matmul` belong here:
  a fully connected layer is a 1x1 convolution, and both are where a network's weights are used.
- pooling: windowed pooling and the region-of-interest ops (`*_pool`, `*_roi_*`, `sample`, `desample`).
- reduction: `*_reduce` over axes (a reduction changes the shape, unlike an element-wise op).
- activation: the non-linearities, `softmax` included.
- normalization: batch, local and lp normalizations, `moments`, and the layer/group/instance norm fragments.
- element-wise: arithmetic, comparison, logic, unary math, `select`, `clamp`, `cast`.
- shape: ops that move, copy or pick values without computing new ones (reshape, concat, slice, gather, ...).
- quantization: every op whose name contains 'quantize' (linear_quantize, qnn.dequantize, ...).
- resize: up- and downsampling.
- other: the rest (external, variable, update, custom ops, fragments we do not know).

RelayViz documents use TVM's names ('nn.conv2d', 'multiply'): a name not in the NNEF table is looked up again
without its namespace in a small table of such aliases. Where the two disagree ('max' is element-wise in NNEF and
a reduction in TVM), the NNEF meaning wins.
"""
from __future__ import annotations

from collections.abc import Mapping

# family -> fill colour, in legend order
FAMILY_COLOURS: dict[str, str] = {
    "convolution": "#9ecae9",
    "pooling": "#a6dcc8",
    "reduction": "#c7e9a0",
    "activation": "#ffd08a",
    "normalization": "#d4c2ef",
    "element-wise": "#fff2a8",
    "shape": "#d9d9d9",
    "quantization": "#f5a3a3",
    "resize": "#f7c6e0",
    "other": "#ffffff",
}
FAMILIES = tuple(FAMILY_COLOURS)
OTHER = "other"

_NNEF_FAMILIES: dict[str, tuple[str, ...]] = {
    "convolution": ("conv", "deconv", "separable_conv", "separable_deconv", "planewise_conv", "planewise_deconv",
                    "box", "debox", "linear", "matmul", "scaled_dot_product_attention"),
    "pooling": ("max_pool", "avg_pool", "rms_pool", "argmax_pool", "max_pool_with_index", "sample", "desample",
                "avg_roi_pool", "max_roi_pool", "avg_roi_align", "max_roi_align", "roi_resample"),
    "reduction": ("sum_reduce", "mean_reduce", "max_reduce", "min_reduce", "argmax_reduce", "argmin_reduce",
                  "any_reduce", "all_reduce", "prod_reduce"),
    "activation": ("relu", "leaky_relu", "prelu", "elu", "selu", "gelu", "silu", "sigmoid", "tanh", "softmax",
                   "softplus", "gelu_erf", "gelu_tanh", "hard_sigmoid", "hard_swish", "softsign", "log_softmax"),
    "normalization": ("batch_normalization", "local_response_normalization", "local_contrast_normalization",
                      "local_mean_normalization", "local_variance_normalization", "l1_normalization",
                      "l2_normalization", "moments", "layer_norm", "group_norm", "instance_norm",
                      "batch_norm_moving"),
    "element-wise": ("add", "sub", "mul", "div", "pow", "min", "max", "add_n", "neg", "rcp", "abs", "sign", "exp",
                     "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh",
                     "acosh", "atanh", "sqr", "sqrt", "rsqr", "rsqrt", "floor", "ceil", "round", "softabs", "eq",
                     "ne", "lt", "le", "gt", "ge", "and", "or", "not", "select", "clamp", "cast", "erf_rational",
                     "erfinv_polynomial"),
    "shape": ("reshape", "transpose", "squeeze", "unsqueeze", "concat", "split", "slice", "pad", "tile", "stack",
              "unstack", "gather", "copy", "copy_n", "lightnet_pick1d", "lightnet_sort1d",
              "lightnet_sort1d_by_key"),
    "quantization": ("linear_quantize", "logarithmic_quantize", "min_max_linear_quantize",
                     "zero_point_linear_quantize"),
    "resize": ("nearest_upsample", "multilinear_upsample", "nearest_downsample", "area_downsample"),
}

# other frameworks' names (TVM Relay in RelayViz documents), looked up without their namespace
_ALIAS_FAMILIES: dict[str, tuple[str, ...]] = {
    "convolution": ("conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose",
                    "dense", "batch_matmul", "contrib_conv2d_winograd_without_weight_transform"),
    "pooling": ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                "global_max_pool2d", "global_avg_pool2d", "adaptive_max_pool2d", "adaptive_avg_pool2d", "roi_align",
                "roi_pool"),
    "reduction": ("sum", "mean", "prod", "argmax", "argmin", "all", "any"),
    "activation": ("fast_softmax", "fast_tanh"),
    "normalization": ("batch_norm", "lrn", "l2_normalize"),
    "element-wise": ("bias_add", "multiply", "subtract", "divide", "power", "maximum", "minimum", "negative",
                     "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
                     "logical_or", "logical_not", "where", "clip", "fast_exp", "erf", "reciprocal"),
    "shape": ("expand_dims", "concatenate", "strided_slice", "take", "flatten", "batch_flatten", "reshape_like",
              "broadcast_to", "layout_transform"),
    "resize": ("upsampling", "upsampling3d", "resize1d", "resize2d", "resize3d"),
}


def _invert(table: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    inverted: dict[str, str] = {}
    for family, names in table.items():
        for name in names:
            assert name not in inverted, f"{name} listed twice"
            inverted[name] = family
    return inverted


FAMILY_OF: dict[str, str] = _invert(_NNEF_FAMILIES)
_ALIAS_OF: dict[str, str] = _invert(_ALIAS_FAMILIES)


def family(op: str | None) -> str:
    """The family of operation `op` ('other' where unknown or None)."""
    if not op:
        return OTHER
    found = FAMILY_OF.get(op)
    if found is not None:
        return found
    if "quantize" in op:
        return "quantization"
    return _ALIAS_OF.get(op.rpartition(".")[2], OTHER)


def colour(family_name: str) -> str:
    """The fill colour of a family (white for one we do not know)."""
    return FAMILY_COLOURS.get(family_name, FAMILY_COLOURS[OTHER])
