"""Fixtures of the MXNet operators ordinary symbol-API and Gluon models use beyond the core set: repetition and
rearrangement (tile, repeat, broadcast_axis, broadcast_like, stack, reverse, _split_v2, SequenceMask), the
initializers (_zeros, _ones, _full), add_n, index search (argmax, argmin, argmax_channel), statistics (norm,
moments, GroupNorm, softmin), images (space_to_depth, depth_to_space, Crop, _contrib_BilinearResize2D), linear
algebra (_linalg_gemm, _linalg_gemm2, _contrib_div_sqrt_dim), element-wise functions (hard_sigmoid, smooth_l1,
erfinv, rint, cbrt, rcbrt, degrees, radians) and `where` with an integer condition. Each family is named after
its operator. Imports MXNet: only `make_fixtures.py` imports it, never a test."""
from __future__ import annotations

from typing import Any

import mxnet as mx
import numpy as np

from formats.nnvm.mxnet_op_cases import Built, case, data, integers, normal, one, uniform

S = mx.sym


def inputs(family: str, name: str, make: Any, **arrays: Any) -> None:
    """A case whose inputs are the named arrays (or `(shape)` tuples: standard normals), passed to `make` in order."""
    def build(rs: np.random.RandomState) -> Built:
        values = {key: normal(rs, *value) if isinstance(value, tuple) else value for key, value in arrays.items()}
        return Built(make(*[data(key) for key in arrays]), values)
    case(name, family, build)


# tile, repeat, broadcast_axis, broadcast_like, stack, reverse -----------------------------------------------------

one("tile", "tile_more_reps", (2, 3), lambda x: S.tile(x, reps=(2, 1, 3), name="tile"))
one("tile", "tile_fewer_reps", (2, 3, 2), lambda x: S.tile(x, reps=(3,), name="tile"))
one("tile", "tile_no_reps", (2, 3), lambda x: S.tile(x, reps=(), name="tile"))
one("repeat", "repeat_axis1", (2, 3), lambda x: S.repeat(x, repeats=2, axis=1, name="rep"))
one("repeat", "repeat_negative_axis", (2, 3, 2), lambda x: S.repeat(x, repeats=3, axis=-3, name="rep"))
one("repeat", "repeat_flattened", (2, 3), lambda x: S.repeat(x, repeats=2, name="rep"))
one("broadcast_axis", "broadcast_axis", (2, 1, 3, 1), lambda x: S.broadcast_axis(x, axis=(1, 3), size=(4, 2),
                                                                                 name="b"))
one("broadcast_axis", "broadcast_axes_one", (1, 3), lambda x: S.broadcast_axes(x, axis=0, size=3, name="b"))
inputs("broadcast_like", "broadcast_like", lambda a, b: S.broadcast_like(a, b, name="b"), lhs=(2, 1, 3), rhs=(2, 4, 3))
inputs("broadcast_like", "broadcast_like_axes",
       lambda a, b: S.broadcast_like(a, b, lhs_axes=(0, -1), rhs_axes=(2, 0), name="b"), lhs=(1, 3, 1), rhs=(5, 2, 4))
inputs("stack", "stack_axis1", lambda a, b, c: S.stack(a, b, c, axis=1, name="s"), a=(2, 3), b=(2, 3), c=(2, 3))
inputs("stack", "stack_last_axis", lambda a, b: S.stack(a, b, axis=-1, name="s"), a=(2, 3), b=(2, 3))
one("reverse", "reverse_axes", (2, 3, 4), lambda x: S.reverse(x, axis=(0, 2), name="r"))
one("reverse", "flip", (2, 3), lambda x: S.flip(x, axis=1, name="r"))

# _split_v2 and SequenceMask ------------------------------------------------------------------------------------------

one("_split_v2", "split_v2_indices", (2, 6, 3), lambda x: S.split_v2(x, (1, 4), axis=1))
one("_split_v2", "split_v2_sections_unequal", (7, 2), lambda x: S.split_v2(x, 3, axis=0))
one("_split_v2", "split_v2_squeeze_axis", (2, 3, 4),
    lambda x: S.split_v2(x, 3, axis=-2, squeeze_axis=True))
one("_split_v2", "split_v2_one_index", (2, 6), lambda x: S._internal._split_v2(x, indices=(0,), axis=1, name="split"))


def sequence_mask(name: str, shape: tuple[int, ...], lengths: np.ndarray | None, **attrs: Any) -> None:
    def build(rs: np.random.RandomState) -> Built:
        values = {"data": normal(rs, *shape)}
        if lengths is None:
            return Built(S.SequenceMask(data(), name="mask", **attrs), values)
        values["lengths"] = lengths
        kind = "int32" if lengths.dtype == np.int32 else "float32"
        symbol = S.SequenceMask(data(), S.var("lengths", dtype=kind), use_sequence_length=True, name="mask", **attrs)
        return Built(symbol, values)
    case(name, "SequenceMask", build)


sequence_mask("sequence_mask_no_lengths", (3, 2, 2), None, value=-1.0)
sequence_mask("sequence_mask_lengths", (4, 4, 3), np.array([2, 0, 5, 1.7], np.float32))
sequence_mask("sequence_mask_batch_major_value", (3, 5, 2), np.array([3, 1, 4], np.float32), axis=1, value=-2.5)
sequence_mask("sequence_mask_integer_lengths", (4, 2), np.array([1, 3], np.int32))


def _sequence_mask_integer_data(rs: np.random.RandomState) -> Built:
    symbol = S.SequenceMask(S.var("data", dtype="int32"), data("lengths"), use_sequence_length=True, value=-7.9,
                            axis=1, name="mask")
    return Built(symbol, {"data": rs.randint(-5, 5, (2, 3)).astype(np.int32),
                          "lengths": np.array([2, 1], np.float32)})


case("sequence_mask_integer_data", "SequenceMask", _sequence_mask_integer_data)

# initializers and add_n -------------------------------------------------------------------------------------------

one("_zeros", "zeros", (2, 3), lambda x: x + S.zeros(shape=(2, 3), name="z"))
one("_ones", "ones_int32", (2, 3),
    lambda x: S.broadcast_mul(x, S.Cast(S.ones(shape=(1, 3), dtype="int32", name="o"), dtype="float32")))
one("_full", "full", (2, 3), lambda x: S.broadcast_mul(x, S.full(shape=(1, 3), val=2.5, name="f")))
inputs("add_n", "add_n", lambda a, b, c: S.add_n(a, b, c, name="sum"), a=(2, 3), b=(2, 3), c=(2, 3))
inputs("add_n", "element_wise_sum", lambda a, b: S.ElementWiseSum(a, b, name="sum"), a=(3,), b=(3,))

# argmax, argmin, argmax_channel -----------------------------------------------------------------------------------


def search(name: str, family: str, make: Any, shape: tuple[int, ...]) -> None:
    """An index search over small integers, so that ties happen (the first index wins)."""
    def build(rs: np.random.RandomState) -> Built:
        return Built(make(data()), {"data": integers(rs, *shape, low=0, high=3)})
    case(name, family, build)


search("argmax_axis1", "argmax", lambda x: S.argmax(x, axis=1, name="a"), (3, 4, 2))
search("argmax_global", "argmax", lambda x: S.argmax(x, name="a"), (3, 4))
search("argmax_global_keepdims", "argmax", lambda x: S.argmax(x, keepdims=True, name="a"), (2, 3))
search("argmin_negative_axis_keepdims", "argmin", lambda x: S.argmin(x, axis=-1, keepdims=True, name="a"), (3, 4))
search("argmin_vector", "argmin", lambda x: S.argmin(x, axis=0, name="a"), (7,))
search("argmax_channel", "argmax_channel", lambda x: S.argmax_channel(x, name="a"), (3, 5))
search("argmax_channel_3d", "argmax_channel", lambda x: S.argmax_channel(x, name="a"), (2, 4, 3))

# norm, moments, GroupNorm, softmin --------------------------------------------------------------------------------

one("norm", "norm_default", (2, 3, 4), lambda x: S.norm(x, name="n"))
one("norm", "norm_ord1_axis", (2, 3, 4), lambda x: S.norm(x, ord=1, axis=1, name="n"))
one("norm", "norm_axes_keepdims", (2, 3, 4), lambda x: S.norm(x, axis=(0, -1), keepdims=True, name="n"))
one("norm", "norm_ord1_all_keepdims", (3, 4), lambda x: S.norm(x, ord=1, axis=(0, 1), keepdims=True, name="n"))
one("moments", "moments_axes", (2, 3, 4), lambda x: S.moments(x, axes=(0, 2), name="m"))
one("moments", "moments_keepdims", (2, 3, 4), lambda x: S.moments(x, axes=(-1,), keepdims=True, name="m"))
one("moments", "moments_all", (3, 4), lambda x: S.moments(x, axes=(0, 1), name="m"))
one("GroupNorm", "group_norm_groups2", (2, 4, 3, 3), lambda x: S.GroupNorm(x, num_groups=2, name="gn"))
one("GroupNorm", "group_norm_one_group_eps", (2, 3, 5), lambda x: S.GroupNorm(x, eps=0.1, name="gn"))
one("GroupNorm", "group_norm_per_channel_groups", (1, 3, 2, 2, 2), lambda x: S.GroupNorm(x, num_groups=3, name="gn"))
one("GroupNorm", "group_norm_output_mean_var", (2, 6, 4),
    lambda x: S.GroupNorm(x, num_groups=3, output_mean_var=True, name="gn"))
one("softmin", "softmin_last", (2, 3, 4), lambda x: S.softmin(x, name="sm"))
one("softmin", "softmin_axis1_temperature", (2, 3, 4), lambda x: S.softmin(x, axis=1, temperature=0.5, name="sm"))

# images: space_to_depth, depth_to_space, Crop, BilinearResize2D ---------------------------------------------------

one("space_to_depth", "space_to_depth", (2, 3, 4, 6), lambda x: S.space_to_depth(x, block_size=2, name="s2d"))
one("depth_to_space", "depth_to_space", (2, 8, 2, 3), lambda x: S.depth_to_space(x, block_size=2, name="d2s"))
one("depth_to_space", "depth_to_space_block3", (1, 18, 2, 2), lambda x: S.depth_to_space(x, block_size=3,
                                                                                         name="d2s"))
one("Crop", "crop_h_w_offset", (1, 2, 6, 7), lambda x: S.Crop(x, h_w=(3, 4), offset=(2, 1), num_args=1, name="c"))
one("Crop", "crop_h_w_center", (1, 2, 6, 7), lambda x: S.Crop(x, h_w=(3, 4), center_crop=True, num_args=1,
                                                              name="c"))
inputs("Crop", "crop_like_center", lambda a, b: S.Crop(a, b, center_crop=True, num_args=2, name="c"),
       data=(2, 1, 7, 8), reference=(1, 1, 4, 5))
inputs("Crop", "crop_like_offset", lambda a, b: S.Crop(a, b, offset=(1, 3), num_args=2, name="c"),
       data=(1, 2, 5, 6), reference=(1, 3, 3, 2))

_RESIZE = "_contrib_BilinearResize2D"
for _name, _shape, _attrs in (
        ("resize_up_aligned", (1, 2, 3, 4), {"height": 7, "width": 9}),
        ("resize_up_half_pixel", (1, 2, 3, 4), {"height": 7, "width": 9, "align_corners": False}),
        ("resize_down_aligned", (2, 1, 7, 8), {"height": 3, "width": 5}),
        ("resize_down_half_pixel", (2, 1, 7, 8), {"height": 3, "width": 5, "align_corners": False}),
        ("resize_one_row", (1, 1, 4, 3), {"height": 1, "width": 6, "align_corners": False}),
        ("resize_scale", (1, 2, 5, 4), {"scale_height": 1.5, "scale_width": 2.0}),
        ("resize_odd_scale", (1, 1, 5, 4), {"scale_height": 2.0, "scale_width": 0.5, "mode": "odd_scale"}),
        ("resize_to_even_down", (1, 1, 5, 6), {"mode": "to_even_down"}),
        ("resize_to_odd_up", (1, 1, 5, 6), {"mode": "to_odd_up", "align_corners": False})):
    one(_RESIZE, _name, _shape, lambda x, a=_attrs: S.contrib.BilinearResize2D(x, name="resize", **a))
inputs(_RESIZE, "resize_like", lambda a, b: S.contrib.BilinearResize2D(a, b, mode="like", name="resize"),
       data=(1, 2, 4, 3), reference=(1, 1, 6, 5))

# linear algebra ---------------------------------------------------------------------------------------------------

inputs("_linalg_gemm2", "gemm2", lambda a, b: S.linalg.gemm2(a, b, name="g"), a=(3, 4), b=(4, 5))
inputs("_linalg_gemm2", "gemm2_batch_transpose_b_alpha",
       lambda a, b: S.linalg.gemm2(a, b, transpose_b=True, alpha=2.5, name="g"), a=(2, 3, 4), b=(2, 5, 4))
inputs("_linalg_gemm2", "gemm2_row_axis1", lambda a, b: S.linalg.gemm2(a, b, transpose_a=True, axis=1, name="g"),
       a=(2, 4, 3, 3), b=(2, 4, 3, 5))
inputs("_linalg_gemm", "gemm_alpha_beta",
       lambda a, b, c: S.linalg.gemm(a, b, c, alpha=0.5, beta=-2.0, transpose_a=True, name="g"),
       a=(2, 4, 3), b=(2, 4, 5), c=(2, 3, 5))
one("_contrib_div_sqrt_dim", "div_sqrt_dim", (2, 3, 5), lambda x: S.contrib.div_sqrt_dim(x, name="d"))

# element-wise functions -------------------------------------------------------------------------------------------

one("hard_sigmoid", "hard_sigmoid", (3, 4), lambda x: S.hard_sigmoid(x, name="h"), low=-4.0, high=4.0)
one("hard_sigmoid", "hard_sigmoid_alpha_beta", (3, 4), lambda x: S.hard_sigmoid(x, alpha=0.4, beta=0.3, name="h"),
    low=-3.0, high=3.0)
one("smooth_l1", "smooth_l1", (3, 4), lambda x: S.smooth_l1(x, name="s"), low=-3.0, high=3.0)
one("smooth_l1", "smooth_l1_sigma", (3, 4), lambda x: S.smooth_l1(x, scalar=2.0, name="s"))
one("erfinv", "erfinv", (4, 5), lambda x: S.erfinv(x, name="e"), low=-0.999, high=0.999)
one("cbrt", "cbrt", (3, 4), lambda x: S.cbrt(x, name="c"), low=-8.0, high=8.0)
one("rcbrt", "rcbrt", (3, 4), lambda x: S.rcbrt(x, name="c"), low=0.5, high=8.0)
one("degrees", "degrees", (3, 4), lambda x: S.degrees(x, name="d"))
one("radians", "radians", (3, 4), lambda x: S.radians(x, name="r"), low=-360.0, high=360.0)


def _rint(rs: np.random.RandomState) -> Built:
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5], np.float32)
    return Built(S.rint(data(), name="r"), {"data": np.concatenate([halves, uniform(rs, 8, low=-4.0, high=4.0)])})


case("rint", "rint", _rint)

# where with an integer condition ----------------------------------------------------------------------------------


def _where_integer(rs: np.random.RandomState) -> Built:
    condition = np.array([[0, 1, -2], [3, 0, 0]], np.int32)
    symbol = S.where(S.var("condition", dtype="int32"), data("x"), data("y"), name="where")
    return Built(symbol, {"condition": condition, "x": normal(rs, 2, 3), "y": normal(rs, 2, 3)})


case("where_integer_condition", "where", _where_integer)
